package breakglass

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// RestoreRequest is what `kubectl gitops restore` asks for.
type RestoreRequest struct {
	App string
	// Namespace is the Application's; "" is the engine's AppNamespace.
	Namespace string
	// Force restores even when Git has not caught up; Reason is required
	// then and recorded.
	Force  bool
	Reason string
	// AllowSecretText writes Reason even when a secret rule finds
	// something in it (redacted, as always); the records say so.
	AllowSecretText bool
	DryRun          bool
	// Argo enables the field-level catch-up check; nil skips it.
	Argo *argocd.Server
	// Session, when set, is the session the caller means: another open
	// there is not restored. AutoRestore restores only a session marked
	// auto-restore (the controller's restore).
	Session     string
	AutoRestore bool
}

// Validate is the rule of a restore request: forcing needs a reason, and a
// reason only goes with forcing (a normal restore records the session's).
func (r RestoreRequest) Validate() error {
	switch {
	case r.Force && strings.TrimSpace(r.Reason) == "":
		return inputError(InputReason, "", "a forced restore needs one: say why restoring without Git's fix is right")
	case !r.Force && r.Reason != "":
		return inputError(InputReason, r.Reason, "goes with forcing; a normal restore records the session's reason")
	case !r.AllowSecretText:
		return checkText(textInput{InputReason, r.Reason})
	}
	return nil
}

// Restore re-enables sync with the exact saved policy once Git has caught
// up (or when forced), removes the session and records it.
func (e *Engine) Restore(ctx context.Context, req RestoreRequest) (*SessionStatus, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	actor, err := e.Whoami(ctx)
	if err != nil {
		return nil, err
	}
	appID := e.refOf(req.Namespace, req.App)
	app, err := e.withSession(ctx, appID, "there is nothing to restore")
	if err != nil {
		return nil, err
	}
	st, app, err := e.restoreStatus(ctx, req, app)
	if err != nil {
		return st, err
	}
	discrepancy, err := st.restoreRefusal(req)
	if err != nil || req.DryRun {
		return st, err
	}
	if err := allowed(ctx, e.Kube, argocd.ApplicationGVR, appID.Namespace, appID.Name); err != nil {
		return st, err
	}
	if fresh, err := e.App(ctx, appID); err == nil {
		app = fresh
	}
	return st, e.restoreSession(ctx, req, actor, app, st, discrepancy)
}

// restoreStatus is the session's status as restore judges it, with the
// Application as last seen. A run still sending its patch is refused, or
// (forced) resolved from the live target first, recorded.
func (e *Engine) restoreStatus(ctx context.Context, req RestoreRequest, app argocd.App) (*SessionStatus, argocd.App, error) {
	// A dry run writes nothing, not even the refresh request.
	st, err := e.CaughtUp(ctx, app, req.Argo, !req.DryRun)
	if err != nil {
		return nil, app, err
	}
	if req.DryRun {
		st.Notes = append(st.Notes, "dry run: no refresh was requested, so the state is as of Argo CD's last reconcile")
	}
	if run := st.sending(); run != nil && !req.DryRun {
		// A run still sending its patch: a restore now could re-enable
		// sync under it. Forcing ends it from the live target, recorded.
		if !req.Force {
			return st, app, fmt.Errorf("%w: %s is patching %s in session %s (planned %s, still running): run restore again once it is done, or after %s; --force ends it now, recording what it overrode",
				ErrRunInFlight, run.Actor, run.Target, st.Session.ID, run.Planned.Format(time.RFC3339), run.Planned.Add(RunBound).Format(time.RFC3339))
		}
		resolvedApp, resolved, err := e.Resolve(ctx, app, st, true)
		if err != nil {
			return st, app, err
		}
		stale := st.Stale
		if st, err = e.evaluate(ctx, e.log(), resolvedApp, req.Argo, resolved); err != nil {
			return nil, app, err
		}
		st.Stale, app = stale, resolvedApp
	}
	if st.Stale && !req.Force && !req.DryRun {
		// Whether Git caught up is as of a reconcile that may predate the
		// fix in Git: re-enabling sync on that could revert the fix.
		return st, app, fmt.Errorf("%w: Argo CD's controller did not refresh %s in time, so whether Git has caught up is not known; sync not restored", ErrNotCaughtUp, req.App)
	}
	return st, app, nil
}

// restoreRefusal is why req may not restore st's session, nil when it
// may, with the annotation's disagreement with the log, which the restore
// records.
//
// The annotation is a pointer anyone with patch rights can edit: what
// restore acts on is the session the verified audit log has open on the
// Application (evaluate put it in st.Session). A field of the annotation
// the log contradicts is recorded with the restore and holds nothing
// back: everything restore judges and writes back is the log's. An
// annotation naming another session than the log's open one (or one the
// log closed) is no honest restore's: only forcing restores the log's
// open session.
func (st *SessionStatus) restoreRefusal(req RestoreRequest) (discrepancy string, err error) {
	discrepancy = st.disagreement()
	if st.Untrusted != "" {
		switch {
		case !req.Force:
			return discrepancy, fmt.Errorf("%w on %s: %s; nothing was changed", ErrSessionMismatch, req.App, st.Untrusted)
		case !st.trusted:
			return discrepancy, fmt.Errorf("%w on %s: %s; the audit log has no open session there to restore, so not even a forced restore knows what to write back: nothing was changed", ErrSessionMismatch, req.App, st.Untrusted)
		}
		st.Notes = append(st.Notes, discrepancy+": restoring what the audit log says")
	}
	switch {
	case req.Session != "" && st.Session.ID != req.Session:
		return discrepancy, fmt.Errorf("%w: %s's open session is %s, not %s: nothing was changed", argocd.ErrConflict, req.App, st.Session.ID, req.Session)
	case req.AutoRestore && !st.Session.AutoRestore:
		return discrepancy, fmt.Errorf("%w: session %s on %s is not marked auto-restore: nothing was changed", argocd.ErrConflict, st.Session.ID, req.App)
	case len(st.Retargeted) > 0 && !req.Force:
		return discrepancy, fmt.Errorf("%w: %s; nothing was changed", ErrRetargeted, strings.Join(st.Retargeted, "; "))
	case st.SyncReenabled && !req.Force:
		return discrepancy, fmt.Errorf("%w: automated sync of %s is on again, behind session %s, so Argo CD may have reverted the fix; nothing was changed", ErrSyncReenabled, req.App, st.Session.ID)
	case !st.Restorable() && !req.Force && !(req.DryRun && st.Ready):
		var behind []string
		for _, t := range st.Targets {
			if t.Git != GitCaughtUp {
				behind = append(behind, fmt.Sprintf("%s %s: %s", t.Target, t.Git, t.Detail))
			}
		}
		return discrepancy, fmt.Errorf("%w: sync not restored, %s", ErrNotCaughtUp, strings.Join(behind, "; "))
	}
	return discrepancy, nil
}

// restoreSession writes the restore: the started record, the saved policy
// back and the session gone, the succeeded record, then the ticket's close
// and the Event, which can no longer undo anything.
func (e *Engine) restoreSession(ctx context.Context, req RestoreRequest, actor audit.Actor, app argocd.App, st *SessionStatus, discrepancy string) error {
	event, reason := audit.EventRestored, st.Session.Reason
	if !st.Ready {
		event, reason = audit.EventForced, req.Reason
	}
	current := app.SyncPolicy()
	var saved any
	_ = json.Unmarshal(st.Session.SavedSyncPolicy, &saved)
	p := subject{actor: actor, app: st.App, cluster: app.Destination().Server, git: st.GitAt(), reason: reason, incident: st.Session.Incident, allowSecretText: req.AllowSecretText}
	if len(st.Targets) > 0 {
		p.target = st.Targets[0].Target
	}
	if app.SyncsAutomatically() {
		// restorePolicy leaves a policy that syncs again as it is.
		saved = current
		st.Notes = append(st.Notes, "automated sync was already on: the policy stays as it was turned back on; the saved one is in the session's breakglass.paused record")
	}
	withPolicy := func(r *audit.Record) { r.SyncPolicy = &audit.SyncPolicy{Before: current, After: saved} }
	started, err := e.record(ctx, p, st.Session.ID, event, audit.Outcome{Status: audit.StatusStarted, Error: discrepancy}, withPolicy)
	if err != nil {
		return err
	}
	// The write is conditional on the annotation as evaluated: a patch
	// that landed meanwhile must not be reverted by a restore that never
	// saw it.
	if err := e.undoPause(ctx, st.App, st.Session, event, unchangedSession(req.App, st.annotated, st.Session)); err != nil {
		_, _ = e.record(ctx, p, st.Session.ID, event, audit.Outcome{Status: audit.StatusFailed, Error: err.Error()}, withPolicy)
		return fmt.Errorf("restoring %s: %w", req.App, err)
	}
	// The fix is safe from here on: Jira trouble only queues the close.
	ref, ticketErr := e.closeTicket(ctx, st.Session, ticket.RestoreComment(st.Revision, actor.Username, !st.Ready, req.Reason, witness(started)))
	closed := ref
	if ticketErr != nil {
		closed = nil
	}
	if _, err := e.record(ctx, p, st.Session.ID, event, audit.Outcome{Status: audit.StatusSucceeded, Error: discrepancy}, func(r *audit.Record) {
		withPolicy(r)
		withTicket(closed)(r)
	}); err != nil {
		return err
	}
	switch {
	case ticketErr != nil:
		st.Warnings = append(st.Warnings, e.recordTicketTrouble(ctx, p, st.Session.ID, ref, ticketErr))
	case ref == nil && st.Session.TicketPending != "":
		st.Warnings = append(st.Warnings, "the session's ticket was never filed: `"+next.TicketSync()+"` files and closes it")
	}
	var w string
	if event == audit.EventForced {
		w = e.emit(ctx, app, EventForced, true, "%s forced the restore of break-glass session %s without Git's fix (%s): %s", actor.Username, st.Session.ID, argocd.DescribeGit(st.GitAt()), p.redacted(req.Reason))
	} else {
		w = e.emit(ctx, app, EventRestored, false, "%s restored the saved sync policy and closed break-glass session %s: Git caught up (%s)", actor.Username, st.Session.ID, argocd.DescribeGit(st.GitAt()))
	}
	if w != "" {
		st.Warnings = append(st.Warnings, w)
	}
	return nil
}
