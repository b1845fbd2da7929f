package breakglass

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// RunBound is the longest a break-glass run takes from its planned record
// to recording how its patch ended: the waits for Argo CD's controller
// (the pause, each parent's, a terminated sync, the refresh after the
// patch: ControllerTimeout each, 30 s by default) and the patch's own
// retries, with room to spare. A run planned longer ago than this has been
// interrupted (killed, its laptop closed, its connection lost), wherever it
// ran, and what it left in flight is resolved from the live target.
const RunBound = 10 * time.Minute

// InFlight is a break-glass run of a session that has not recorded how its
// patch ended: its planned record, and why its writer can no longer
// finish it ("" while it may still be running).
type InFlight struct {
	Plan *audit.Record `json:"-"`
	// Target is what the run patches, Actor who ran it, Planned when.
	Target  audit.Target `json:"target"`
	Actor   string       `json:"actor"`
	Planned time.Time    `json:"planned"`
	// Gone says why the run can no longer finish; "" when it may.
	Gone string `json:"gone,omitempty"`
}

// writerGone says why the run that wrote plan can no longer finish it,
// "" when it may still be running: it was planned longer ago than RunBound,
// or it ran on this host and its process is gone.
func writerGone(plan *audit.Record, now time.Time) string {
	if age := now.Sub(plan.Time); age > RunBound {
		return fmt.Sprintf("planned %s ago, longer than a run takes (%s)", age.Round(time.Second), RunBound)
	}
	host, _ := os.Hostname()
	pid := plan.Client.PID
	if pid > 0 && plan.Client.Host == host && pid != os.Getpid() && !processAlive(pid) {
		return fmt.Sprintf("its process (%d on %s) has ended", pid, host)
	}
	return ""
}

// inFlight is the session's runs in flight, as the log has them.
func (ls *loggedSession) inFlight(now time.Time) []InFlight {
	if ls.log == nil {
		return nil
	}
	var out []InFlight
	for _, p := range ls.log.InFlight {
		run := InFlight{Plan: p, Actor: p.Actor.Username, Planned: p.Time, Gone: writerGone(p, now)}
		if p.Target != nil {
			run.Target = *p.Target
		}
		out = append(out, run)
	}
	return out
}

// pendingFor is the annotation's pending patch that plan's run marked
// before sending it: the one named by the plan's record id, or (sessions
// marked before pending patches were named so) the one of the same target
// and fields. nil when the run was interrupted before it marked one.
func pendingFor(s *Session, plan *audit.Record) *SessionPatch {
	fields := loggedFields(plan)
	for i := range s.Patches {
		p := &s.Patches[i]
		if p.Pending && (p.ID == plan.ID || plan.Target != nil && p.Target == *plan.Target && equalJSON(p.Fields, fields)) {
			return p
		}
	}
	return nil
}

// ErrRunInFlight is a restore refused because a break-glass run of the
// session may still be sending its patch.
var ErrRunInFlight = errors.New("a break-glass run of the session is still in flight")

// Resolve ends the runs of st's session that were interrupted before they
// recorded how their patch ended (or, with force, every run in flight),
// from the live target: a patch that landed is recorded as
// breakglass.patched, one that did not as breakglass.abandoned, each
// naming the interrupted run's planned record; then the session annotation
// says the same, and the session goes on. It returns the Application as
// last written and what it resolved.
func (e *Engine) Resolve(ctx context.Context, app argocd.App, st *SessionStatus, force bool) (argocd.App, []string, error) {
	var done []string
	for _, run := range st.InFlight {
		if run.Gone == "" && !force {
			continue
		}
		landed, how, err := e.landed(ctx, app, run.Plan)
		if err != nil {
			return app, done, fmt.Errorf("checking whether the interrupted patch of %s landed: %w", run.Target, err)
		}
		why := run.Gone
		if why == "" {
			why = "a forced restore overrode it while its run may still be going"
		}
		event, outcome := audit.EventAbandoned, audit.Outcome{Status: audit.StatusFailed, Error: fmt.Sprintf("the run %s planned at %s ended before it recorded its patch (%s): %s", run.Actor, run.Planned.Format(time.RFC3339), why, how)}
		if landed {
			event, outcome = audit.EventPatched, audit.Outcome{Status: audit.StatusSucceeded, Error: outcome.Error}
		}
		if err := e.recordResolved(ctx, app, st, run.Plan, event, outcome); err != nil {
			return app, done, err
		}
		_, written, err := e.writeSession(ctx, app, st.Session.ID, nil, func(s *Session) { s.resolve(run.Plan, landed) })
		if err != nil {
			return app, done, fmt.Errorf("recording the resolved patch of %s in the session annotation: %w", run.Target, err)
		}
		app = written
		done = append(done, fmt.Sprintf("resolved the interrupted break-glass run of %s by %s (planned %s) as %s: %s", run.Target, run.Actor, run.Planned.Format(time.RFC3339), event, how))
	}
	return app, done, nil
}

// sending is a run of st's session in flight that may still be running
// and has marked its patch as being sent, nil when none has.
func (st *SessionStatus) sending() *InFlight {
	for i, run := range st.InFlight {
		if run.Gone == "" && st.annotated != nil && pendingFor(st.annotated, run.Plan) != nil {
			return &st.InFlight[i]
		}
	}
	return nil
}

// resolve makes the annotation say how plan's interrupted patch ended.
func (s *Session) resolve(plan *audit.Record, landed bool) {
	p := pendingFor(s, plan)
	switch {
	case !landed && p != nil:
		s.dropPatch(p.ID)
	case landed && p != nil:
		p.Pending, p.Fields = false, loggedFields(plan)
	case landed && plan.Target != nil && plan.Patch != nil:
		s.Patches = append(s.Patches, SessionPatch{ID: plan.ID, Target: *plan.Target, Type: plan.Patch.Type, Fields: loggedFields(plan), At: plan.Time})
	}
	if landed && (s.State == StatePaused || s.State == StatePausing) {
		s.State = StatePatched
	}
}

// landed is whether plan's patch reached its target, read live: every
// changed field whose value the record keeps holds the patched value; when
// the record keeps none (secrets, free text), whether this tool's field
// manager wrote the target since the plan. It says how it decided.
func (e *Engine) landed(ctx context.Context, app argocd.App, plan *audit.Record) (bool, string, error) {
	if plan.Target == nil || len(plan.Changes) == 0 {
		return false, "the plan names no change", nil
	}
	cluster, err := e.ClusterOf(app, "")
	if err != nil {
		return false, "", err
	}
	live, err := cluster.Object(ctx, *plan.Target)
	if err != nil {
		return false, "", err
	}
	checked := 0
	for _, f := range loggedFields(plan) {
		if f.Secret {
			continue
		}
		got, _ := audit.Lookup(live.Object, f.Path)
		if digest(got) != f.After {
			return false, fmt.Sprintf("the live %s does not hold the patched value at %s", plan.Target, f.Path), nil
		}
		checked++
	}
	if checked > 0 {
		return true, fmt.Sprintf("the live %s holds the patched values", plan.Target), nil
	}
	if wrote := argocd.ManagerWroteSince(live, argocd.FieldManager, plan.Time); wrote {
		return true, fmt.Sprintf("%s wrote the live %s after the plan", argocd.FieldManager, plan.Target), nil
	}
	return false, fmt.Sprintf("%s has not written the live %s since the plan", argocd.FieldManager, plan.Target), nil
}

// recordResolved writes the record that ends plan's interrupted run, in
// the resolver's own name.
func (e *Engine) recordResolved(ctx context.Context, app argocd.App, st *SessionStatus, plan *audit.Record, event audit.Event, outcome audit.Outcome) error {
	actor, err := e.Whoami(ctx)
	if err != nil {
		return err
	}
	p := subject{actor: actor, app: st.App, cluster: app.Destination().Server, git: st.GitAt(), reason: plan.Reason, incident: plan.Incident}
	if plan.Target != nil {
		p.target = *plan.Target
	}
	_, err = e.record(ctx, p, st.Session.ID, event, outcome, func(r *audit.Record) {
		r.Resolves = plan.ID
		// Argo CD's view of the landed patch, when it already flags it;
		// unknown otherwise (the paused Application may not have been
		// compared since).
		if status, _ := app.ManagedStatus(p.target); event == audit.EventPatched && status == "OutOfSync" {
			saw := true
			r.OutOfSync = &saw
		}
		r.Reason, r.Incident = plan.Reason, plan.Incident // already redacted
	})
	return err
}
