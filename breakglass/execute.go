package breakglass

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// Result is what Execute did.
type Result struct {
	Session  *Session
	Warnings []string
}

// execution is one Plan being carried out: the plan, the session as the
// run last wrote it, and what the run learns that the plan does not keep.
type execution struct {
	*Plan
	session *Session
	res     *Result
	// planned is the run's planned record; pendingPatch names the patch
	// in the session while it is being sent (the planned record's ID).
	planned      *audit.Record
	pendingPatch string
	// patch is what the patch changes: the dry run's until the API server
	// answers the real patch, then the answer's.
	patch answer
	// confirmed is Argo CD's controller taking up the pause, nil once
	// waited for (pauseConfirmed).
	confirmed *pending[argocd.App]
}

// answer is what a patch changes: the diff, the same redacted as records
// keep it, and its paths with digests of their values, for the session.
type answer struct {
	diff, changes []audit.Change
	fields        []PatchedField
}

// withPatch adds the patch, its changes and the pause to a record.
func (x *execution) withPatch(r *audit.Record) {
	r.Patch = x.RecordedPatch()
	r.Changes = x.patch.changes
	r.SyncPolicy = &audit.SyncPolicy{Before: x.SyncPolicyBefore, After: x.SyncPolicyAfter}
}

// Execute pauses the Application keeping its policy, applies the patch, and
// records each step. A patch that fails after the pause undoes the pause and
// records breakglass.aborted. The plan is not changed: what the run learns
// stays in the run.
func (e *Engine) Execute(ctx context.Context, p *Plan) (*Result, error) {
	x, err := newExecution(p)
	if err != nil {
		return nil, err
	}
	defer e.auditSettled()
	if err := e.recordPlanned(ctx, x); err != nil {
		return nil, err
	}
	app, err := e.holdApp(ctx, x)
	if err != nil {
		return nil, err
	}
	if app, err = e.markPending(ctx, x, app); err != nil {
		return nil, err
	}
	if err := e.patchTarget(ctx, x); err != nil {
		return nil, e.abort(ctx, x, x.RedactErr(err))
	}
	e.progress("%s the fix is live: %s patched; recording it and asking Argo CD whether it sees it", time.Now().Format("15:04:05"), x.Target)
	_, warning := x.pauseConfirmed(e.ControllerTimeout())
	x.res.Warnings = appendWarning(x.res.Warnings, warning)
	return e.recordPatched(ctx, x, app)
}

// newExecution is the run of p: the session it joins, or the new one it
// opens (state pausing, the policy it saves, when it expires).
func newExecution(p *Plan) (*execution, error) {
	x := &execution{Plan: p, session: p.Join, res: &Result{}, patch: answer{diff: p.diff, changes: p.Changes, fields: p.fields}}
	if p.Join != nil {
		return x, nil
	}
	now := time.Now().UTC()
	session := &Session{
		ID: now.Format("20060102-150405") + "-" + rand.String(5), State: StatePausing,
		OpenedBy: p.Actor.Username, OpenedAt: now, Reason: p.Redact(p.Request.Reason), Incident: p.Redact(p.Request.Incident),
		GitRevision: p.Git.Revision, GitRevisions: p.Git.Revisions, AutoRestore: p.AutoRestore,
		Propose: p.Request.Propose,
	}
	if p.app.Unstructured != nil {
		session.SavedNotice = savedNotice(p.app)
	}
	session.Hold = p.Hold
	// The Application's own entries, whatever the mode: an entry added
	// within the session beyond them and the hold's is foreign, and every
	// close writes them back exactly.
	session.SavedIgnoreDifferences, session.ownIgnoreSaved = savedIgnore(p.app), true
	if p.PauseFor > 0 {
		expires := now.Add(p.PauseFor).Truncate(time.Second)
		session.Expires = &expires
	}
	saved, err := json.Marshal(p.SyncPolicyBefore)
	if err != nil {
		return nil, err
	}
	session.SavedSyncPolicy = saved
	x.session = session
	return x, nil
}

// recordPlanned writes the run's planned record, before anything changes:
// for a new session it also keeps what the session opens with (expiry,
// the pin, the hold) for whoever checks the session against the log.
func (e *Engine) recordPlanned(ctx context.Context, x *execution) error {
	planned := x.withPatch
	if x.Join == nil {
		session := x.session
		planned = func(r *audit.Record) {
			x.withPatch(r)
			r.Expires, r.AutoRestore, r.Propose = session.Expires, session.AutoRestore, session.Propose
			if x.app.Unstructured != nil {
				pin := x.app.Pin(redact.Text)
				r.Pinned = &pin
			}
			r.Hold = &audit.Hold{Mode: session.Hold, Own: session.ownIgnoreSaved}
			if len(session.SavedIgnoreDifferences) > 0 {
				_ = json.Unmarshal(session.SavedIgnoreDifferences, &r.Hold.IgnoreDifferences)
			}
			r.OwnNotice = &audit.OwnNotice{Annotations: map[string]string{}}
			for k, v := range session.SavedNotice {
				r.OwnNotice.Annotations[k] = v
			}
		}
	}
	rec, err := e.recordSoon(ctx, x.subject(), x.session.ID, audit.EventPlanned, audit.Outcome{Status: audit.StatusStarted}, planned)
	x.planned = rec
	return err
}

// holdApp pauses a new session's Application (and parents), then ends a
// sync still running, which would apply Git's state over the fix. It
// returns the Application as last seen.
func (e *Engine) holdApp(ctx context.Context, x *execution) (argocd.App, error) {
	var app argocd.App // nil when it must be read again
	if x.Join == nil {
		warnings, seen, err := e.pause(ctx, x)
		if err != nil {
			return argocd.App{}, err
		}
		x.res.Warnings, app = append(x.res.Warnings, warnings...), seen
	}
	if warning := e.terminateSync(ctx, x.App, x.session, app); warning != "" {
		x.res.Warnings = append(x.res.Warnings, warning)
	}
	if app.Unstructured == nil || x.session.TerminatedSync != "" { // terminating wrote it
		app = knownApp(x.App)
	}
	return app, nil
}

// markPending tells the session of the patch before it is sent: a restore
// that read the session before then refuses to remove it, and one that
// removed it already makes this write fail, before anything is patched.
// The mark is named by the planned record, so that whoever resolves this
// run if it is interrupted finds it (pendingFor). With the hold, the same
// write holds the patched paths: every sync from then on keeps the live
// value there.
//
// A new session's pause marked the patch already (unless it holds
// fields): then the write is needed only to name a sync it terminated, or
// to check again for a running sync it could not end.
func (e *Engine) markPending(ctx context.Context, x *execution, app argocd.App) (argocd.App, error) {
	terminated := x.session.TerminatedSync
	if x.pendingPatch != "" && terminated == "" && app.Unstructured != nil {
		if _, running := app.SyncRunning(); !running && !app.SyncQueued() {
			return app, nil
		}
	}
	pending := x.pendingMark()
	x.pendingPatch = pending.ID
	var hold func(argocd.App) map[string]any
	if x.session.holdsFields() {
		hold = func(app argocd.App) map[string]any {
			return holdPatch(app, x.Target, x.patch.fields, x.Patched)
		}
	}
	check, fromLog := noOtherSync(x.App.Name, terminated), func(s *Session) *Session { return s }
	if x.Join != nil {
		check, fromLog = e.joinedFromLog(ctx, x.App, x.session.ID, check)
	}
	marked, app, err := e.writeSessionWith(ctx, app, x.session.ID, check, func(s *Session) {
		*s = *fromLog(s)
		s.Patches = s.patches(pending)
		if terminated != "" {
			s.TerminatedSync = terminated
		}
	}, hold)
	if err != nil {
		return app, e.abort(ctx, x, fmt.Errorf("recording the patch in session %s before sending it: %w", x.session.ID, err))
	}
	x.session = marked
	if !x.session.pauses() {
		// Automated sync stays on: Argo CD's controller must compare with
		// the hold before the patch lands, or self-heal would apply Git
		// over it from a compare made without the hold.
		if _, err := e.WaitRefreshed(ctx, app); err != nil {
			return app, e.abort(ctx, x, fmt.Errorf("Argo CD's controller did not take up the hold before the patch (%v): nothing was patched", err))
		}
	}
	return app, nil
}

// pendingMark is the session's mark of the run's patch while it is sent,
// named by the planned record.
func (x *execution) pendingMark() SessionPatch {
	return SessionPatch{ID: x.planned.ID, Target: x.Target, Type: x.PatchType, Fields: x.patch.fields, At: time.Now().UTC(), Pending: true}
}

// recordPatched follows a live fix: the session says patched, Argo CD is
// asked whether it sees the patch, the patched record is written, then
// the ticket and the Events, none of which can undo the fix.
func (e *Engine) recordPatched(ctx context.Context, x *execution, app argocd.App) (*Result, error) {
	res := x.res
	// asked is the write that asked Argo CD to look at the patched state.
	asked := knownApp(x.App)
	if written, writtenApp, err := e.writeSession(ctx, app, x.session.ID, nil, func(s *Session) {
		s.State = StatePatched
		if sp := s.patchNamed(x.pendingPatch); sp != nil {
			sp.Pending, sp.Fields = false, x.patch.fields
		}
	}); err != nil {
		res.Warnings = append(res.Warnings, "the patch is live but the session annotation could not be updated: "+err.Error())
	} else {
		x.session, asked = written, writtenApp
	}
	// Does Argo CD see the patch? If the target stays Synced, the patch only
	// added fields Git never set, and resource-level Synced will prove
	// nothing. Held paths are out of Argo CD's compare: it cannot see the
	// patch there, and the field-level check is what tells caught-up.
	var observed *bool
	if !x.session.holdsFields() {
		var warnings []string
		x.session, observed, warnings = e.observePatch(ctx, x, asked)
		res.Warnings = append(res.Warnings, warnings...)
	}
	res.Session = x.session
	// The record, not the annotation anyone may edit, is what restore
	// believes about whether Argo CD saw the patch.
	patched, err := e.record(ctx, x.subject(), x.session.ID, audit.EventPatched, audit.Outcome{Status: audit.StatusSucceeded}, func(r *audit.Record) {
		x.withPatch(r)
		r.OutOfSync = observed
	})
	if err != nil {
		return res, err
	}
	if warning := e.ticketPatch(ctx, x.Plan, x.session, patched); warning != "" {
		res.Warnings = append(res.Warnings, warning)
	}
	res.Warnings = append(res.Warnings, e.emitExecuted(ctx, x)...)
	return res, nil
}

// joinedFromLog is what a join's first write checks (also, then the
// session still the audit log's open one on app) and writes: the
// annotation as the log has the session, so that whatever was edited in
// it behind the session is mended. The log is read for each attempt, once
// the Application is read: every mark a run in flight left in it then
// has its planned record in what is read.
func (e *Engine) joinedFromLog(ctx context.Context, app audit.AppRef, id string, also func(argocd.App) error) (func(argocd.App) error, func(*Session) *Session) {
	ref := audit.AppRef{Namespace: app.Namespace, Name: app.Name}
	var ls *loggedSession
	check := func(current argocd.App) error {
		if err := also(current); err != nil {
			return err
		}
		var err error
		if ls, err = e.log().session(ctx, ref, id); err != nil {
			return err
		}
		if why := ls.untrusted(ref, id); why != "" {
			return fmt.Errorf("%w on %s: %s; nothing was patched", ErrSessionMismatch, app.Name, why)
		}
		return nil
	}
	return check, func(s *Session) *Session { return ls.repaired(s) }
}

// observePatch waits for Argo CD's reconcile after the patch (asked is the
// write that asked for it) and notes in the session whether Argo CD flagged
// the patched target: the session as written, what Argo CD saw (nil when
// not known) and warnings.
func (e *Engine) observePatch(ctx context.Context, x *execution, asked argocd.App) (*Session, *bool, []string) {
	session := x.session
	app, err := e.WaitRefreshed(ctx, asked)
	if err != nil {
		return session, nil, []string{"could not learn whether Argo CD sees the patch: " + err.Error()}
	}
	var warnings []string
	app = e.sawPatch(ctx, app, x.Target)
	status, _ := app.ManagedStatus(x.Target)
	saw := status == "OutOfSync"
	if !saw {
		warnings = append(warnings, fmt.Sprintf("Argo CD still reports %s Synced: the patch only adds fields Git never set, so restore will need the field-level check (the Argo CD API) or to be forced", x.Target))
	}
	written, _, err := e.writeSession(ctx, app, session.ID, nil, func(s *Session) {
		if sp := s.patchNamed(x.pendingPatch); sp != nil {
			sp.ArgoSawPatch = &saw
		}
	})
	if err != nil {
		return session, &saw, append(warnings, "could not record Argo CD's view of the patch in the session: "+err.Error())
	}
	return written, &saw, warnings
}

// emitExecuted emits the Events of a break-glass once its records are
// written, off the path to the live fix: the session opened (unless
// joined) and the patch.
func (e *Engine) emitExecuted(ctx context.Context, x *execution) []string {
	s := x.session
	var warnings []string
	warn := func(w string) {
		if w != "" {
			warnings = append(warnings, w)
		}
	}
	changed := make([]string, 0, len(x.patch.changes))
	for _, c := range x.patch.changes {
		changed = append(changed, c.Path)
	}
	if x.Join != nil {
		warn(e.emit(ctx, x.app, EventJoined, false, "%s patched %s within break-glass session %s, opened by %s: %s", x.Actor.Username, x.Target, s.ID, s.OpenedBy, strings.Join(changed, ", ")))
		return warnings
	}
	expiry := "no expiry"
	if s.Expires != nil {
		expiry = "expires " + s.Expires.Format(time.RFC3339)
	}
	warn(e.emit(ctx, x.app, EventOpened, false, "%s paused automated sync in break-glass session %s (%s; %s): %s; restore with `%s`", x.Actor.Username, s.ID, x.PauseMechanism, expiry, s.Reason, next.Restore(x.App.Namespace, x.App.Name)))
	warn(e.emit(ctx, x.app, EventPatched, false, "%s patched %s in break-glass session %s: %s", x.Actor.Username, x.Target, s.ID, strings.Join(changed, ", ")))
	return warnings
}

// noOtherSync accepts an Application on which no sync operation runs but
// the one the break-glass terminated (started at terminated, "" for none):
// the last check before the patch, under the write's precondition, so that
// a sync started while the break-glass ran cannot apply Git over the fix.
func noOtherSync(name, terminated string) func(argocd.App) error {
	return func(app argocd.App) error {
		if started, running := app.SyncRunning(); running && (terminated == "" || started != terminated) {
			return fmt.Errorf("%w: a sync operation started on %s at %s, while the break-glass ran; nothing was patched: run the break-glass again, it terminates running syncs", argocd.ErrConflict, name, started)
		}
		if app.SyncQueued() {
			return fmt.Errorf("%w: a sync operation is queued on %s and has not started, so it cannot be terminated yet; nothing was patched: run the break-glass again", argocd.ErrConflict, name)
		}
		return nil
	}
}

// sawPatchWait bounds how long a break-glass waits, after a refresh that
// still shows the target Synced, for the controller to notice the patch.
const sawPatchWait = 3 * time.Second

// sawPatch returns app once the controller reports target OutOfSync, or as
// it is after sawPatchWait. A refresh requested right after the patch may
// be compared against the controller's cache of live state before the
// patch's watch event reaches it; that event makes the controller compare
// again, and this waits for it (off the critical path: the fix is live).
// Only a patch that adds fields Git never set waits the whole bound.
func (e *Engine) sawPatch(ctx context.Context, app argocd.App, target audit.Target) argocd.App {
	outOfSync := func(a argocd.App) bool {
		status, _ := a.ManagedStatus(target)
		return status == "OutOfSync"
	}
	if outOfSync(app) {
		return app
	}
	if seen, ok := e.WaitApp(ctx, app.GetNamespace()+"/"+app.GetName(), min(sawPatchWait, e.ControllerTimeout()), outOfSync); ok {
		return seen
	}
	return app
}

// abort handles a patch the API server rejected: a pause this command made
// is undone, a joined session stays as it was, and breakglass.aborted says
// why.
func (e *Engine) abort(ctx context.Context, x *execution, patchErr error) error {
	session := x.session
	undo, cancel := undoContext(ctx)
	defer cancel()
	ctx = undo
	var undoErr error
	if x.Join == nil {
		if recErr := e.startAbort(ctx, x, "patch rejected: "+patchErr.Error(), x.withPatch); recErr != nil {
			return fmt.Errorf("patching %s failed (%v), and the pause was left in place because the undo could not be recorded first: %w; run `%s`", x.Target, patchErr, recErr, next.Restore(x.App.Namespace, x.App.Name))
		}
		undoErr = e.undoPause(ctx, x.App, session, audit.EventAborted, ownSession(x.App.Name, session.ID))
	} else if x.pendingPatch != "" {
		_, _, undoErr = e.writeSession(ctx, knownApp(x.App), session.ID, nil, func(s *Session) { s.dropPatch(x.pendingPatch) })
	}
	outcome := audit.Outcome{Status: audit.StatusFailed, Error: "patch rejected: " + patchErr.Error()}
	if undoErr != nil {
		outcome.Error += "; " + audit.PauseNotUndone + ": " + undoErr.Error()
	}
	if _, recErr := e.record(ctx, x.subject(), session.ID, audit.EventAborted, outcome, x.withPatch); recErr != nil {
		return fmt.Errorf("patching %s failed (%v) and %w", x.Target, patchErr, recErr)
	}
	switch {
	case undoErr != nil:
		return fmt.Errorf("patching %s failed: %v; the pause could not be undone (%v): run `%s`", x.Target, patchErr, undoErr, next.Restore(x.App.Namespace, x.App.Name))
	case x.Join != nil:
		return fmt.Errorf("patching %s failed; session %s is as it was: %w", x.Target, session.ID, patchErr)
	}
	return fmt.Errorf("patching %s failed, so the pause was undone and sync is as before: %w", x.Target, patchErr)
}

// terminateSync ends a running sync operation the way `argocd app
// terminate-op` does, and waits for the controller to stop it. It returns a
// warning when it could not.
func (e *Engine) terminateSync(ctx context.Context, ref audit.AppRef, session *Session, app argocd.App) string {
	name := ref.Name
	if app.Unstructured == nil { // not seen since the controller confirmed the pause
		var err error
		if app, err = e.App(ctx, appRef(ref)); err != nil {
			return "could not check for a running sync operation: " + err.Error()
		}
	}
	if app.SyncQueued() {
		// Queued, not yet started: it cannot be terminated until an
		// operation worker starts it, and it would apply Git once it does.
		seen, started := e.WaitApp(ctx, appRef(ref).String(), e.ControllerTimeout(), func(a argocd.App) bool { return !a.SyncQueued() })
		if !started {
			return fmt.Sprintf("a sync operation queued on %s did not start within %s, so it could not be terminated", name, e.ControllerTimeout())
		}
		app = seen
	}
	started, running := app.SyncRunning()
	if !running {
		return ""
	}
	// On a conflict the write is built again from the Application as it is
	// then: a sync that ended meanwhile has nothing left to terminate (and
	// the admission policy allows Terminating only from Running).
	errEnded := errors.New("the sync ended")
	_, err := e.Write(ctx, app, argocd.Write{Check: func(current argocd.App) error {
		if err := ownSession(name, session.ID)(current); err != nil {
			return err
		}
		if now, running := current.SyncRunning(); !running || now != started {
			return errEnded
		}
		return nil
	}, Patch: func(argocd.App) map[string]any {
		return map[string]any{"status": map[string]any{"operationState": map[string]any{"phase": "Terminating"}}}
	}})
	if errors.Is(err, errEnded) {
		return ""
	}
	if err != nil {
		return fmt.Sprintf("a sync operation (started %s) is running and could not be terminated (%v): it may apply Git's state over the patch", started, err)
	}
	session.TerminatedSync = started
	stopped := func(app argocd.App) bool { _, running := app.SyncRunning(); return !running }
	if _, ok := e.WaitApp(ctx, appRef(ref).String(), e.ControllerTimeout(), stopped); ok {
		return ""
	}
	return fmt.Sprintf("the sync operation started %s was asked to terminate but is still running after %s", started, e.ControllerTimeout())
}

// explainConflict names the session that won a race for the Application,
// when there is one.
func (e *Engine) explainConflict(ctx context.Context, ref audit.AppRef, conflict error) error {
	name := ref.Name
	app, err := e.App(ctx, appRef(ref))
	if err != nil {
		return conflict
	}
	if s, err := SessionOf(app); err == nil {
		return fmt.Errorf("%w on %s: session %s by %s started first; nothing was changed by this command", ErrSessionOpen, name, s.ID, s.OpenedBy)
	}
	return conflict
}
