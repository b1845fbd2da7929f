package breakglass

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// Tickets files, finds, comments on and closes reconcile tickets;
// *ticket.Jira implements it, and ticket.Off when there is no Jira to use.
// Ready says whether the other calls can work; when it answers an error
// they all answer it, and the engine queues the work for `ticket sync`.
type Tickets interface {
	Ready() error
	Create(ctx context.Context, rc ticket.Reconcile) (ticket.Issue, error)
	FindSession(ctx context.Context, session string) (ticket.Issue, bool, error)
	Get(ctx context.Context, key string) (ticket.Issue, error)
	Comment(ctx context.Context, key, body string) error
	Close(ctx context.Context, key, comment string) error
	LinkTo(ctx context.Context, key, url, title string) error
}

// TicketKey matches a Jira issue key such as OPS-42.
var TicketKey = regexp.MustCompile(`^[A-Z][A-Z0-9_]*-[1-9][0-9]*$`)

// tickets is the engine's ticket system: Jira is off when none was given.
func (e *Engine) tickets() Tickets {
	if e.Tickets == nil {
		return ticket.Off{}
	}
	return e.Tickets
}

// checkTicket checks the existing ticket a request names (its key's shape
// is Request.Validate's) before anything changes: a key Jira says does not
// exist is refused; a Jira that cannot answer only earns a warning.
func (e *Engine) checkTicket(ctx context.Context, req Request, join *Session) (*audit.Ticket, string, error) {
	switch {
	case req.Ticket == "":
		return nil, "", nil
	case join != nil && join.Ticket != "" && join.Ticket != req.Ticket:
		return nil, "", inputError(InputTicket, req.Ticket, "session %s is tracked by %s already, where this patch is commented: give no ticket", join.ID, join.Ticket)
	case e.tickets().Ready() != nil:
		return &audit.Ticket{Key: req.Ticket}, "", nil
	}
	issue, err := e.tickets().Get(ctx, req.Ticket)
	switch {
	case errors.Is(err, ticket.ErrNotFound):
		return nil, "", fmt.Errorf("%w: %s: %v", ErrTicketNotFound, req.Ticket, err)
	case err != nil:
		return &audit.Ticket{Key: req.Ticket}, fmt.Sprintf("could not check ticket %s (%v)", req.Ticket, err), nil
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
func (e *Engine) recordTicketTrouble(ctx context.Context, s subject, session string, ref *audit.Ticket, cause error) string {
	event, status := audit.EventQueued, audit.StatusQueued
	if e.tickets().Ready() == nil && !errors.Is(cause, ticket.ErrUnreachable) {
		event, status = audit.EventFailed, audit.StatusFailed
	}
	warning := "ticket " + status + ": " + cause.Error()
	if _, err := e.record(ctx, s, session, event, audit.Outcome{Status: status, Error: cause.Error()}, withTicket(ref)); err != nil {
		return warning + "; and " + err.Error()
	}
	if status == audit.StatusFailed {
		warning += "; fix it, then run `" + next.TicketSync() + "`"
	}
	return warning
}

// ticketPatch files the session's ticket for the patch just made, or
// comments on the ticket it already has. Jira trouble never undoes a
// break-glass: the work is recorded as queued (or failed) for `ticket sync`.
func (e *Engine) ticketPatch(ctx context.Context, p *Plan, session *Session, patched *audit.Record) string {
	if p.Join != nil && session.Ticket == "" && session.TicketPending != "" {
		return "the session's ticket is still queued: `" + next.TicketSync() + "` files it with this patch"
	}
	ref := &audit.Ticket{Key: session.Ticket, URL: session.TicketURL}
	if ref.Key == "" && p.Ticket != nil {
		ref = p.Ticket
	}
	rc := ticket.Reconcile{Patches: []*audit.Record{patched}, Source: p.Source, Restore: next.Restore(p.App.Namespace, p.App.Name)}
	tickets := e.tickets()
	err := tickets.Ready()
	if err == nil {
		started, recErr := e.record(ctx, p.subject(), session.ID, audit.EventTicketed, audit.Outcome{Status: audit.StatusStarted}, withTicket(ref))
		if recErr != nil {
			return "the ticket was not filed: " + recErr.Error()
		}
		rc.Witness = witness(started)
		switch {
		case ref.Key == "":
			var issue ticket.Issue
			if issue, err = tickets.Create(ctx, rc); err == nil {
				ref = &audit.Ticket{Key: issue.Key, URL: issue.URL}
			}
		case p.Join != nil:
			err = tickets.Comment(ctx, ref.Key, ticket.PatchComment(rc))
		default:
			// An existing issue learns the whole story.
			err = tickets.Comment(ctx, ref.Key, ticket.Description(rc))
		}
	}
	var warnings []string
	if err != nil {
		session.TicketPending = p.Redact(err.Error())
		warnings = append(warnings, e.recordTicketTrouble(ctx, p.subject(), session.ID, ref, err))
	} else {
		session.Ticket, session.TicketURL, session.TicketPending = ref.Key, ref.URL, ""
		if _, err := e.record(ctx, p.subject(), session.ID, audit.EventTicketed, audit.Outcome{Status: audit.StatusSucceeded}, withTicket(ref)); err != nil {
			warnings = append(warnings, err.Error())
		}
		if e.ArgoUI != "" && p.Join == nil {
			if err := tickets.LinkTo(ctx, ref.Key, e.ArgoUI+"/applications/"+p.App.Namespace+"/"+p.App.Name, "Argo CD: "+p.App.Name); err != nil {
				warnings = append(warnings, "could not link "+ref.Key+" to Argo CD: "+err.Error())
			}
		}
	}
	if _, _, err := e.writeSession(ctx, knownApp(p.App), session.ID, nil, func(s *Session) {
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
	return ref, e.tickets().Close(ctx, s.Ticket, comment)
}

// witness is r's place in the chain, for Jira to keep.
func witness(r *audit.Record) audit.HeadState {
	return audit.HeadState{Seq: r.Seq, Hash: r.Hash}
}
