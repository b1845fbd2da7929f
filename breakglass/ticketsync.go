package breakglass

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// claimStale is how long a ticket sync's claim on a session holds before
// another run may take over (the claimer died).
const claimStale = 5 * time.Minute

// PendingTicket is Jira work the audit log says is not done yet.
type PendingTicket struct {
	Session string       `json:"session"`
	App     audit.AppRef `json:"application"`
	// Key is the session's ticket, "" when none was filed.
	Key string `json:"ticket,omitempty"`
	// Why is the error of the newest queued or failed record.
	Why string `json:"why"`
	// Patches are the session's breakglass.patched records.
	Patches []*audit.Record `json:"-"`
	// Closed is the session's restored (or forced) record, nil while open.
	Closed *audit.Record `json:"-"`
	// NeedsContent is whether Jira lacks the patches, not only the close.
	NeedsContent bool `json:"-"`
	since        uint64
}

// PendingTickets reads the log (in chain order) for sessions whose newest
// Jira record is queued or failed.
func PendingTickets(records []*audit.Record) []*PendingTicket {
	type state struct {
		pt      PendingTicket
		pending bool
	}
	sessions := map[string]*state{}
	var order []string
	for _, r := range records {
		if r.Session == "" {
			continue
		}
		st := sessions[r.Session]
		if st == nil {
			st = &state{pt: PendingTicket{Session: r.Session}}
			sessions[r.Session] = st
			order = append(order, r.Session)
		}
		ok := r.Outcome.Status == audit.StatusSucceeded
		// Legal records name only the session's own ticket.
		if r.Ticket != nil && r.Ticket.Key != "" {
			st.pt.Key = r.Ticket.Key
		}
		switch r.Event {
		case audit.EventPatched:
			if ok && r.Application != nil {
				st.pt.Patches = append(st.pt.Patches, r)
				st.pt.App = *r.Application
			}
		case audit.EventRestored, audit.EventForced:
			if ok {
				st.pt.Closed = r
			}
		case audit.EventQueued, audit.EventFailed:
			st.pending, st.pt.Why, st.pt.since = true, r.Outcome.Error, r.Seq
			if st.pt.Closed == nil {
				st.pt.NeedsContent = true
			}
		case audit.EventTicketed, audit.EventFiled:
			if ok {
				st.pending, st.pt.NeedsContent = false, false
			}
		}
	}
	var out []*PendingTicket
	for _, id := range order {
		if st := sessions[id]; st.pending && len(st.pt.Patches) > 0 {
			pt := st.pt
			out = append(out, &pt)
		}
	}
	return out
}

// SyncedTicket is what `ticket sync` did for one session.
type SyncedTicket struct {
	Session string        `json:"session"`
	App     audit.AppRef  `json:"application"`
	Ticket  *audit.Ticket `json:"ticket,omitempty"`
	// Done lists what was done: found (already in Jira), filed,
	// commented, closed.
	Done []string `json:"done,omitempty"`
	// Skipped says which other ticket sync is doing this session's work.
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
}

// SyncTickets does the Jira work the audit log says is queued or failed,
// exactly once per session even when several run at once: each run claims
// the session with a ticket.filed record, the earliest live claim does the
// work, and a ticket already in Jira is found by its session label first.
func (e *Engine) SyncTickets(ctx context.Context) ([]SyncedTicket, error) {
	if err := e.tickets().Ready(); err != nil {
		return nil, err
	}
	entries, err := e.Audit.Entries(ctx, audit.Filter{})
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	// Only verified records the session state machine accepts say what
	// Jira must be told: a patch or a close appended by hand in someone
	// else's session files and closes nothing.
	legal, _ := audit.Legal(audit.Trusted(entries))
	pending := PendingTickets(legal)
	if len(pending) == 0 {
		return nil, nil
	}
	actor, err := e.Whoami(ctx)
	if err != nil {
		return nil, err
	}
	out := []SyncedTicket{}
	for i, pt := range pending {
		synced, err := e.syncTicket(ctx, actor, pt)
		out = append(out, synced)
		// The same credentials or the same outage would fail every other
		// session too, each after its own timeouts and audit records.
		if errors.Is(err, ticket.ErrAuth) || errors.Is(err, ticket.ErrUnreachable) {
			for _, rest := range pending[i+1:] {
				out = append(out, SyncedTicket{Session: rest.Session, App: rest.App, Error: "not attempted: " + err.Error()})
			}
			break
		}
	}
	return out, nil
}

// syncTicket does one session's queued work; the error is Jira's, for the
// caller to tell an outage from a refusal.
func (e *Engine) syncTicket(ctx context.Context, actor audit.Actor, pt *PendingTicket) (SyncedTicket, error) {
	p := pt.subject(actor)
	res := SyncedTicket{Session: pt.Session, App: pt.App}
	ref := &audit.Ticket{Key: pt.Key}
	claim, err := e.record(ctx, p, pt.Session, audit.EventFiled, audit.Outcome{Status: audit.StatusStarted}, withTicket(ref))
	if err != nil {
		res.Error = err.Error()
		return res, nil
	}
	if holder, err := e.claimHolder(ctx, pt, claim); err != nil {
		res.Error = err.Error()
		return res, nil
	} else if holder.ID != claim.ID {
		res.Skipped = fmt.Sprintf("ticket sync by %s (audit record %s) is doing it; if that run died, run again after %s",
			holder.Actor.Username, holder.ID, holder.Time.Add(claimStale).Local().Format("15:04:05"))
		if _, err := e.record(ctx, p, pt.Session, audit.EventFiled, audit.Outcome{Status: audit.StatusSkipped, Error: res.Skipped}, withTicket(ref)); err != nil {
			res.Error = err.Error()
		}
		return res, nil
	}
	rc := ticket.Reconcile{Patches: pt.Patches, Source: e.appSource(ctx, pt.App), Restore: next.Restore(pt.App.Namespace, pt.App.Name), Witness: witness(claim)}
	ref, res.Done, err = e.tellJira(ctx, pt, rc, ref)
	res.Ticket = ref
	if err != nil {
		res.Error = err.Error()
		e.recordTicketTrouble(ctx, p, pt.Session, ref, err)
		return res, err
	}
	if _, err := e.record(ctx, p, pt.Session, audit.EventFiled, audit.Outcome{Status: audit.StatusSucceeded}, withTicket(ref)); err != nil {
		res.Error = err.Error()
	}
	if pt.Closed == nil {
		if err := e.setSessionTicket(ctx, pt, ref); err != nil {
			res.Error = "the ticket is filed but the open session could not learn it: " + err.Error()
		}
	}
	return res, nil
}

// subject is what the session's first patch says, as actor syncs it.
func (pt *PendingTicket) subject(actor audit.Actor) subject {
	first := pt.Patches[0]
	p := subject{actor: actor, app: pt.App, reason: first.Reason, incident: first.Incident}
	if first.Target != nil {
		p.target = *first.Target
	}
	if first.Git != nil {
		p.git = *first.Git
	}
	if first.Cluster != nil {
		p.cluster = first.Cluster.Server
	}
	return p
}

// tellJira does pt's Jira work on ref (found or filed when it has no key):
// it returns the ticket and what was done, up to the first error.
func (e *Engine) tellJira(ctx context.Context, pt *PendingTicket, rc ticket.Reconcile, ref *audit.Ticket) (*audit.Ticket, []string, error) {
	var done []string
	switch {
	case ref.Key == "":
		issue, found, err := e.tickets().FindSession(ctx, pt.Session)
		if err != nil {
			return ref, done, err
		}
		if found {
			done = append(done, "found")
		} else {
			if issue, err = e.tickets().Create(ctx, rc); err != nil {
				return ref, done, err
			}
			done = append(done, "filed")
		}
		ref = &audit.Ticket{Key: issue.Key, URL: issue.URL}
	case pt.NeedsContent:
		if err := e.tickets().Comment(ctx, ref.Key, ticket.Description(rc)); err != nil {
			return ref, done, err
		}
		done = append(done, "commented")
	}
	if c := pt.Closed; c != nil {
		revision := ""
		if c.Git != nil {
			revision = c.Git.Revision
		}
		if err := e.tickets().Close(ctx, ref.Key, ticket.RestoreComment(revision, c.Actor.Username, c.Event == audit.EventForced, c.Reason, rc.Witness)); err != nil {
			return ref, done, err
		}
		done = append(done, "closed")
	}
	return ref, done, nil
}

// claimHolder returns the claim that does pt's work: the earliest
// ticket.filed claim since the work was queued that is not stale.
func (e *Engine) claimHolder(ctx context.Context, pt *PendingTicket, mine *audit.Record) (*audit.Record, error) {
	entries, err := e.Audit.Entries(ctx, audit.Filter{App: pt.App.Name, Event: audit.EventFiled})
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	for _, r := range audit.Trusted(entries) {
		if r.Session == pt.Session && r.Event == audit.EventFiled && r.Outcome.Status == audit.StatusStarted &&
			r.Seq > pt.since && r.Seq <= mine.Seq && live(r.Time, mine.Time) {
			return r, nil
		}
	}
	return mine, nil
}

// live is whether a claim made at claimed still holds at now: younger than
// claimStale, and not dated after now (the writer sets the time: a claim
// dated in the future would otherwise hold for good).
func live(claimed, now time.Time) bool {
	return !claimed.After(now.Add(time.Minute)) && now.Sub(claimed) < claimStale
}

// appSource reads the Application's Git source for a late ticket; empty
// when the Application is gone.
func (e *Engine) appSource(ctx context.Context, app audit.AppRef) argocd.Source {
	a, err := e.App(ctx, argocd.AppRef{Namespace: app.Namespace, Name: app.Name})
	if err != nil {
		return argocd.Source{}
	}
	return a.Source()
}

// setSessionTicket tells a session that is still open which ticket tracks
// it, so that restore closes it.
func (e *Engine) setSessionTicket(ctx context.Context, pt *PendingTicket, ref *audit.Ticket) error {
	_, err := e.Write(ctx, argocd.Known(argocd.AppRef{Namespace: pt.App.Namespace, Name: pt.App.Name}), argocd.Write{Check: ownSession(pt.App.Name, pt.Session), Patch: func(app argocd.App) map[string]any {
		s, _ := SessionOf(app)
		s.Ticket, s.TicketURL, s.TicketPending = ref.Key, ref.URL, ""
		return sessionPatch(s, nil)
	}})
	if errors.Is(err, argocd.ErrConflict) || apierrors.IsNotFound(err) {
		return nil // restored or deleted meanwhile: nothing to tell
	}
	return err
}
