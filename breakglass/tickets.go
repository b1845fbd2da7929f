package breakglass

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// Tickets files, finds, comments on and closes reconcile tickets;
// *ticket.Jira implements it.
type Tickets interface {
	Create(ctx context.Context, rc ticket.Reconcile) (ticket.Issue, error)
	FindSession(ctx context.Context, session string) (ticket.Issue, bool, error)
	Get(ctx context.Context, key string) (ticket.Issue, error)
	Comment(ctx context.Context, key, body string) error
	Close(ctx context.Context, key, comment string) error
	LinkTo(ctx context.Context, key, url, title string) error
}

// TicketKey matches a Jira issue key such as OPS-42.
var TicketKey = regexp.MustCompile(`^[A-Z][A-Z0-9_]*-[1-9][0-9]*$`)

// claimStale is how long a ticket sync's claim on a session holds before
// another run may take over (the claimer died).
const claimStale = 5 * time.Minute

// RestoreCommand is the command that closes app's session.
func RestoreCommand(app audit.AppRef) string {
	cmd := "kubectl gitops restore " + app.Name
	if app.Namespace != "" && app.Namespace != "argocd" {
		cmd += " --app-namespace " + app.Namespace
	}
	return cmd
}

func (e *Engine) ticketsOff() error {
	if e.TicketsOff != nil {
		return e.TicketsOff
	}
	return ticket.ErrNotConfigured
}

// checkTicket checks --ticket before anything changes: a key Jira says does
// not exist is refused; a Jira that cannot answer only earns a warning.
func (e *Engine) checkTicket(ctx context.Context, req Request, join *Session) (*audit.Ticket, string, error) {
	switch {
	case req.Ticket == "":
		return nil, "", nil
	case !TicketKey.MatchString(req.Ticket):
		return nil, "", fmt.Errorf("%w: --ticket %q is not a Jira issue key such as OPS-42", ErrPatchInvalid, req.Ticket)
	case join != nil && join.Ticket != "" && join.Ticket != req.Ticket:
		return nil, "", fmt.Errorf("%w: session %s is tracked by %s already; drop --ticket to comment there", ErrPatchInvalid, join.ID, join.Ticket)
	case e.Tickets == nil:
		return &audit.Ticket{Key: req.Ticket}, "", nil
	}
	issue, err := e.Tickets.Get(ctx, req.Ticket)
	switch {
	case errors.Is(err, ticket.ErrNotFound):
		return nil, "", fmt.Errorf("%w: --ticket %s: %v", ErrNotFound, req.Ticket, err)
	case err != nil:
		return &audit.Ticket{Key: req.Ticket}, fmt.Sprintf("could not check --ticket %s (%v)", req.Ticket, err), nil
	}
	return &audit.Ticket{Key: issue.Key, URL: issue.URL}, "", nil
}

func withTicket(t *audit.Ticket) func(*audit.Record) {
	return func(r *audit.Record) {
		if t != nil && t.Key != "" {
			c := *t
			r.Ticket = &c
		}
	}
}

// recordTicketTrouble records Jira work that could not be done: queued when
// Jira was unreachable or is not configured, failed when Jira refused it.
// Either way `ticket sync` retries it. It returns the warning to show.
func (e *Engine) recordTicketTrouble(ctx context.Context, p *Plan, session string, ref *audit.Ticket, cause error) string {
	event, status := audit.EventQueued, audit.StatusQueued
	if e.Tickets != nil && !errors.Is(cause, ticket.ErrUnreachable) {
		event, status = audit.EventFailed, audit.StatusFailed
	}
	warning := "ticket " + status + ": " + cause.Error()
	if _, err := e.record(ctx, p, session, event, audit.Outcome{Status: status, Error: cause.Error()}, withTicket(ref)); err != nil {
		return warning + "; and " + err.Error()
	}
	if status == audit.StatusFailed {
		warning += "; fix it, then run `kubectl gitops ticket sync`"
	}
	return warning
}

// ticketPatch files the session's ticket for the patch just made, or
// comments on the ticket it already has. Jira trouble never undoes a
// break-glass: the work is recorded as queued (or failed) for `ticket sync`.
func (e *Engine) ticketPatch(ctx context.Context, p *Plan, session *Session, patched *audit.Record) string {
	if p.Join != nil && session.Ticket == "" && session.TicketPending != "" {
		return "the session's ticket is still queued: `kubectl gitops ticket sync` files it with this patch"
	}
	ref := &audit.Ticket{Key: session.Ticket, URL: session.TicketURL}
	if ref.Key == "" && p.Ticket != nil {
		ref = p.Ticket
	}
	rc := ticket.Reconcile{Patches: []*audit.Record{patched}, Source: p.Source, Restore: RestoreCommand(p.App)}
	err := e.ticketsOff()
	if e.Tickets != nil {
		started, recErr := e.record(ctx, p, session.ID, audit.EventTicketed, audit.Outcome{Status: audit.StatusStarted}, withTicket(ref))
		if recErr != nil {
			return "the ticket was not filed: " + recErr.Error()
		}
		rc.Witness = witness(started)
		switch {
		case ref.Key == "":
			var issue ticket.Issue
			if issue, err = e.Tickets.Create(ctx, rc); err == nil {
				ref = &audit.Ticket{Key: issue.Key, URL: issue.URL}
			}
		case p.Join != nil:
			err = e.Tickets.Comment(ctx, ref.Key, ticket.PatchComment(rc))
		default:
			// An existing issue learns the whole story.
			err = e.Tickets.Comment(ctx, ref.Key, ticket.Description(rc))
		}
	}
	var warnings []string
	if err != nil {
		session.TicketPending = p.Redact(err.Error())
		warnings = append(warnings, e.recordTicketTrouble(ctx, p, session.ID, ref, err))
	} else {
		session.Ticket, session.TicketURL, session.TicketPending = ref.Key, ref.URL, ""
		if _, err := e.record(ctx, p, session.ID, audit.EventTicketed, audit.Outcome{Status: audit.StatusSucceeded}, withTicket(ref)); err != nil {
			warnings = append(warnings, err.Error())
		}
		if e.ArgoUI != "" && p.Join == nil {
			if err := e.Tickets.LinkTo(ctx, ref.Key, e.ArgoUI+"/applications/"+p.App.Namespace+"/"+p.App.Name, "Argo CD: "+p.App.Name); err != nil {
				warnings = append(warnings, "could not link "+ref.Key+" to Argo CD: "+err.Error())
			}
		}
	}
	if _, err := e.updateSession(ctx, p.App.Name, session.ID, func(s *Session) {
		s.Ticket, s.TicketURL, s.TicketPending = session.Ticket, session.TicketURL, session.TicketPending
	}); err != nil {
		warnings = append(warnings, "could not record the ticket in the session: "+err.Error())
	}
	return strings.Join(warnings, "; ")
}

// closeTicket comments on the session's ticket and moves it to done, at
// restore. It returns the ticket (nil when the session has none yet).
func (e *Engine) closeTicket(ctx context.Context, s *Session, comment string) (*audit.Ticket, error) {
	if s.Ticket == "" {
		return nil, nil
	}
	ref := &audit.Ticket{Key: s.Ticket, URL: s.TicketURL}
	if e.Tickets == nil {
		return ref, e.ticketsOff()
	}
	return ref, e.Tickets.Close(ctx, s.Ticket, comment)
}

// witness is r's place in the chain, for Jira to keep.
func witness(r *audit.Record) audit.HeadState {
	return audit.HeadState{Seq: r.Seq, Hash: r.Hash}
}

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
	if e.Tickets == nil {
		return nil, e.ticketsOff()
	}
	entries, err := e.Audit.Entries(ctx, audit.Filter{})
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	pending := PendingTickets(audit.Records(entries))
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
	first := pt.Patches[0]
	p := &Plan{Request: Request{App: pt.App.Name, Reason: first.Reason, Incident: first.Incident}, Actor: actor, App: pt.App}
	if first.Target != nil {
		p.Target = *first.Target
	}
	if first.Git != nil {
		p.Git = *first.Git
	}
	if first.Cluster != nil {
		p.Cluster = first.Cluster.Server
	}
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

	rc := ticket.Reconcile{Patches: pt.Patches, Source: e.appSource(ctx, pt.App), Restore: RestoreCommand(pt.App), Witness: witness(claim)}
	err = func() error {
		switch {
		case ref.Key == "":
			issue, found, err := e.Tickets.FindSession(ctx, pt.Session)
			if err != nil {
				return err
			}
			if found {
				res.Done = append(res.Done, "found")
			} else {
				if issue, err = e.Tickets.Create(ctx, rc); err != nil {
					return err
				}
				res.Done = append(res.Done, "filed")
			}
			ref = &audit.Ticket{Key: issue.Key, URL: issue.URL}
		case pt.NeedsContent:
			if err := e.Tickets.Comment(ctx, ref.Key, ticket.Description(rc)); err != nil {
				return err
			}
			res.Done = append(res.Done, "commented")
		}
		if c := pt.Closed; c != nil {
			revision := ""
			if c.Git != nil {
				revision = c.Git.Revision
			}
			if err := e.Tickets.Close(ctx, ref.Key, ticket.RestoreComment(revision, c.Actor.Username, c.Event == audit.EventForced, c.Reason, rc.Witness)); err != nil {
				return err
			}
			res.Done = append(res.Done, "closed")
		}
		return nil
	}()
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

// claimHolder returns the claim that does pt's work: the earliest
// ticket.filed claim since the work was queued that is not stale.
func (e *Engine) claimHolder(ctx context.Context, pt *PendingTicket, mine *audit.Record) (*audit.Record, error) {
	entries, err := e.Audit.Entries(ctx, audit.Filter{App: pt.App.Name, Event: audit.EventFiled})
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	for _, r := range audit.Records(entries) {
		if r.Session == pt.Session && r.Event == audit.EventFiled && r.Outcome.Status == audit.StatusStarted &&
			r.Seq > pt.since && r.Seq <= mine.Seq && time.Since(r.Time) < claimStale {
			return r, nil
		}
	}
	return mine, nil
}

// appSource reads the Application's Git source for a late ticket; empty
// when the Application is gone.
func (e *Engine) appSource(ctx context.Context, app audit.AppRef) ticket.Source {
	a, err := e.Dynamic.Resource(ApplicationGVR).Namespace(app.Namespace).Get(ctx, app.Name, metav1.GetOptions{})
	if err != nil {
		return ticket.Source{}
	}
	return source(a)
}

// setSessionTicket tells a session that is still open which ticket tracks
// it, so that restore closes it.
func (e *Engine) setSessionTicket(ctx context.Context, pt *PendingTicket, ref *audit.Ticket) error {
	err := e.updateAppIn(ctx, pt.App.Namespace, pt.App.Name, ownSession(pt.App.Name, pt.Session), func(app *unstructured.Unstructured) map[string]any {
		s, _ := ParseSession(app.GetAnnotations()[SessionAnnotation])
		s.Ticket, s.TicketURL, s.TicketPending = ref.Key, ref.URL, ""
		return sessionPatch(s, nil)
	})
	if errors.Is(err, ErrConflict) || apierrors.IsNotFound(err) {
		return nil // restored or deleted meanwhile: nothing to tell
	}
	return err
}
