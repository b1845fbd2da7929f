package breakglass

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// The reasons of the Warning Events of notices.
const (
	EventExpiredReason = "Expired"
	EventReenabled     = "SyncReenabled"
	EventRetargeted    = "Retargeted"
	EventReverted      = "Reverted"
	EventMismatch      = "SessionMismatch"
)

// WarnMismatch emits a Warning Event naming what the session annotation of
// app gets wrong (st.Mismatch): nothing acts on it, since restore, --join
// and the controller read the session from its audit records, but someone
// edited it behind the session. It returns a warning when it could not.
func (e *Engine) WarnMismatch(ctx context.Context, app argocd.App, st *SessionStatus) string {
	return e.emit(ctx, app, EventMismatch, true, "The annotation of break-glass session %s on %s disagrees with its audit records: %s. Restore, --join and auto-restore act on the session as the records have it; the next --join writes the annotation back. Who edited it: kubectl get application %s -n %s --show-managed-fields",
		st.Session.ID, st.App.Name, strings.Join(st.Mismatch, "; "), st.App.Name, st.App.Namespace)
}

// bannerDiffers names how app's Argo CD notice differs from want, the
// banner the session's records make; "" when it is that banner. People
// read it before they press Sync: rewritten ("Git has the fix. Sync is
// safe.", a link to another host) it was a phishing channel.
func bannerDiffers(app argocd.App, want map[string]any) string {
	var differ []string
	for _, k := range NoticeKeys {
		got, has := app.GetAnnotations()[k]
		w, wanted := want[k].(string)
		if has != wanted || got != w {
			differ = append(differ, fmt.Sprintf("%s (Application %s, audit log %s)", strings.TrimPrefix(k, "notice.argocd.argoproj.io/"), jsonText(got), jsonText(w)))
		}
	}
	if len(differ) == 0 {
		return ""
	}
	return "notice banner: " + strings.Join(differ, ", ")
}

// BannerForged is whether st's Application shows a notice other than the
// one its session's records make.
func (st *SessionStatus) BannerForged() bool { return st.banner != nil }

// PutBannerBack writes the banner st's session records make over the one
// app shows (BannerForged), within the session: nothing else changes.
func (e *Engine) PutBannerBack(ctx context.Context, app argocd.App, st *SessionStatus) error {
	if st.banner == nil {
		return nil
	}
	_, err := e.Write(ctx, app, argocd.Write{Check: ownSession(app.GetName(), st.Session.ID), Patch: func(argocd.App) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": st.banner}}
	}})
	return err
}

// Notice is something noticed about an open session that a person must
// act on: its pause expired while Git had not caught up, or automated sync
// was turned back on behind it.
type Notice struct {
	Event  audit.Event
	Reason string // the Event's reason
	What   string
	Todo   string
}

// NoticesOf is what st, evaluated as of now, has to be noticed, each a
// notice of its own: nothing when all is well.
func NoticesOf(st *SessionStatus) []*Notice {
	restore, force := next.Restore(st.App.Namespace, st.App.Name), next.ForceRestore(st.App.Namespace, st.App.Name)
	var out []*Notice
	if len(st.Retargeted) > 0 {
		out = append(out, &Notice{Event: audit.EventRetargeted, Reason: EventRetargeted,
			What: fmt.Sprintf("%s was repointed behind break-glass session %s (%s): Git catching up there would not keep the live fix once it is pointed back.", st.App.Name, st.Session.ID, strings.Join(st.Retargeted, "; ")),
			Todo: fmt.Sprintf("Point it back at the sources the session was opened against, or close the session with `%s` once the fix is safe.", force)})
	}
	if len(st.Reverted) > 0 {
		out = append(out, &Notice{Event: audit.EventReverted, Reason: EventReverted,
			What: fmt.Sprintf("The live fix of break-glass session %s on %s was reverted: %s.", st.Session.ID, st.App.Name, describeReverted(st.Reverted)),
			Todo: fmt.Sprintf("Patch it again within the session (`%s`), and find out why it was reverted (a manual Sync applies Git over the fix).", next.Join(st.App.Namespace, st.App.Name))})
	}
	if st.SyncReenabled {
		out = append(out, &Notice{Event: audit.EventReenabled, Reason: EventReenabled,
			What: fmt.Sprintf("Automated sync of %s was turned back on behind break-glass session %s: Argo CD may have reverted the live fix.", st.App.Name, st.Session.ID),
			Todo: fmt.Sprintf("Check the target; then close the session with `%s` and break-glass again if the fix is gone.", force)})
	}
	if st.Expired && !st.Ready {
		out = append(out, &Notice{Event: audit.EventExpired, Reason: EventExpiredReason,
			What: fmt.Sprintf("Break-glass session %s on %s expired at %s and Git has not caught up: sync stays paused, since re-enabling it would revert the fix.", st.Session.ID, st.App.Name, st.Session.Expires.UTC().Format(time.RFC3339)),
			Todo: fmt.Sprintf("Bring Git up to the fix (see this ticket), then `%s`; or `%s` to drop the fix.", restore, force)})
	}
	return out
}

// RecordNotice writes n about app's open session (evaluated in st) once:
// a record, unless the verified log holds that notice already, a Warning
// Event and a comment on the session's ticket. It reports when the notice
// was recorded (by it or before; zero when the log has no open session to
// notice) and whether it wrote the record now; warnings are what could not
// be told (Event, ticket).
func (e *Engine) RecordNotice(ctx context.Context, app argocd.App, st *SessionStatus, n *Notice) (time.Time, bool, []string, error) {
	ls, err := e.log().session(ctx, st.App, st.Session.ID)
	if err != nil {
		return time.Time{}, false, nil, err
	}
	if !ls.hasPlanned() || !ls.log.Open() {
		return time.Time{}, false, nil, nil
	}
	actor, err := e.Whoami(ctx)
	if err != nil {
		return time.Time{}, false, nil, err
	}
	// Only its own notice counts: one written in advance by someone else
	// (the admission policy lets only the controller write them) must not
	// silence it.
	if prior := ls.log.Noticed(n.Event, actor.Username); prior != nil {
		return prior.Time, false, nil, nil
	}
	p := subject{actor: actor, app: st.App, cluster: app.Destination().Server, git: st.GitAt(), reason: n.What, incident: st.Session.Incident}
	if len(st.Targets) > 0 {
		p.target = st.Targets[0].Target
	}
	rec, err := e.record(ctx, p, st.Session.ID, n.Event, audit.Outcome{Status: audit.StatusSucceeded}, nil)
	if err != nil {
		return time.Time{}, false, nil, err
	}
	return rec.Time, true, e.Remind(ctx, app, st, n, witness(rec)), nil
}

// Remind tells of n again, with a Warning Event and a ticket comment, and
// records nothing: the record was written once.
func (e *Engine) Remind(ctx context.Context, app argocd.App, st *SessionStatus, n *Notice, at audit.HeadState) []string {
	var warnings []string
	if w := e.emit(ctx, app, n.Reason, true, "%s %s", n.What, n.Todo); w != "" {
		warnings = append(warnings, w)
	}
	if key := st.Session.Ticket; key != "" && e.tickets().Ready() == nil {
		if err := e.tickets().Comment(ctx, key, ticket.NoticeComment(n.What, n.Todo, at)); err != nil {
			warnings = append(warnings, fmt.Sprintf("could not comment on %s: %v", key, err))
		}
	}
	return warnings
}
