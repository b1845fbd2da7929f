package breakglass

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// ErrSelfReview is a review by someone who opened or joined the session:
// an emergency change is reviewed by someone else (separation of duties).
var ErrSelfReview = errors.New("a session is reviewed by someone who neither opened nor joined it")

// ReviewRequest is what `kubectl gitops audit review` asks for.
type ReviewRequest struct {
	Session string
	Approve bool
	Reject  bool
	Note    string
	// AllowSecretText writes Note even when a secret rule finds something
	// in it (redacted, as always); the record says so.
	AllowSecretText bool
}

// Validate is the rule of a review: one verdict, and a note saying why.
func (r ReviewRequest) Validate() error {
	switch {
	case strings.TrimSpace(r.Session) == "":
		return inputError(InputSession, "", "required: the session id, as `kubectl gitops audit log --unreviewed` lists them")
	case r.Approve == r.Reject:
		return inputError(InputVerdict, "", "give exactly one: approve or reject")
	case strings.TrimSpace(r.Note) == "":
		return inputError(InputNote, "", "required: what the review found")
	case !r.AllowSecretText:
		return checkText(textInput{InputNote, r.Note})
	}
	return nil
}

// Review appends breakglass.reviewed to a closed session, by someone who
// neither opened nor joined it, and comments on the session's ticket.
// Jira trouble is a warning: the review is in the log.
func (e *Engine) Review(ctx context.Context, req ReviewRequest) (*audit.Record, []string, error) {
	if err := req.Validate(); err != nil {
		return nil, nil, err
	}
	actor, err := e.Whoami(ctx)
	if err != nil {
		return nil, nil, err
	}
	records, err := e.sessionRecords(ctx, req.Session)
	if err != nil {
		return nil, nil, err
	}
	_, s := ownLog(records, req.Session)
	switch {
	case s == nil || s.Opened == nil:
		return nil, nil, fmt.Errorf("%w: no verified audit record opens session %s", ErrNoSession, req.Session)
	case s.Open():
		return nil, nil, fmt.Errorf("%w: session %s on %s is still open: review it once it is restored", ErrNotCaughtUp, req.Session, s.Application.Name)
	case s.Members[actor.Username]:
		return nil, nil, fmt.Errorf("%w: %s opened or joined session %s", ErrSelfReview, actor.Username, req.Session)
	}
	verdict := audit.VerdictApproved
	if req.Reject {
		verdict = audit.VerdictRejected
	}
	p := &Plan{Actor: actor, App: s.Application, Request: Request{Reason: req.Note}}
	rec, err := e.record(ctx, p, req.Session, audit.EventReviewed, audit.Outcome{Status: audit.StatusSucceeded}, func(r *audit.Record) {
		r.Reason, r.Cluster, r.Target, r.Git = "", nil, nil, nil
		r.Review = &audit.Review{Verdict: verdict, Note: req.Note}
		r.TextCheck = confirmedText(req.AllowSecretText, textInput{InputNote, req.Note})
	})
	if err != nil {
		return nil, nil, err
	}
	var warnings []string
	for _, key := range sortedKeys(s.Tickets) {
		if e.Tickets == nil {
			warnings = append(warnings, fmt.Sprintf("ticket %s not told of the review: %v", key, e.ticketsOff()))
			break
		}
		if err := e.Tickets.Comment(ctx, key, ticket.ReviewComment(actor.Username, verdict, rec.Review.Note, witness(rec))); err != nil {
			warnings = append(warnings, fmt.Sprintf("ticket %s not told of the review: %v", key, err))
		}
	}
	return rec, warnings, nil
}

// AwaitingReview are the sessions restored or forced that no approval
// stands for (never reviewed, or rejected and not overturned), oldest
// first. It reads only the records of those three events (not the whole
// log), and reads each session's reviews by the rules of review
// (audit.Reviews); whether a review was by someone outside the session is
// what audit verify and audit log --unreviewed also check.
func (e *Engine) AwaitingReview(ctx context.Context) ([]*audit.Record, error) {
	closed := map[string]*audit.Record{}
	var reviews []*audit.Record
	for _, event := range []audit.Event{audit.EventRestored, audit.EventForced, audit.EventReviewed} {
		entries, err := e.Audit.Entries(ctx, audit.Filter{Event: event})
		if err != nil {
			return nil, err
		}
		for _, r := range audit.Trusted(entries) {
			switch {
			case r.Session == "" || r.Event != event:
			case event == audit.EventReviewed:
				reviews = append(reviews, r)
			case r.Outcome.Status == audit.StatusSucceeded && (closed[r.Session] == nil || r.Seq < closed[r.Session].Seq):
				closed[r.Session] = r
			}
		}
	}
	sortBySeq(reviews)
	histories := map[string]*audit.Reviews{}
	for _, r := range reviews {
		if c := closed[r.Session]; c == nil || r.Seq < c.Seq {
			continue // the state machine names a review before the close
		}
		if histories[r.Session] == nil {
			histories[r.Session] = &audit.Reviews{}
		}
		histories[r.Session].Add(r)
	}
	var out []*audit.Record
	for id, r := range closed {
		if h := histories[id]; h == nil || !h.Approved() {
			out = append(out, r)
		}
	}
	sortBySeq(out)
	return out, nil
}

// sortBySeq puts records read by several listings back in chain order.
func sortBySeq(records []*audit.Record) {
	sort.Slice(records, func(i, j int) bool { return records[i].Seq < records[j].Seq })
}
