package breakglass

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// The refusals of a review (docs/design.md §8, the rules of review).
var (
	// ErrSelfReview is a review by someone who opened or joined the
	// session: an emergency change is reviewed by someone else
	// (separation of duties).
	ErrSelfReview = errors.New("a session is reviewed by someone who neither opened nor joined it")
	// ErrNotReviewer is a review by someone outside the reviewer role
	// (audit.ReviewerGroup): the admission policy refuses their record,
	// and a review not by the role counts for nothing.
	ErrNotReviewer = errors.New("only the reviewer role records a review")
	// ErrRejectionStands is an approval over a standing rejection that
	// does not say it overturns it.
	ErrRejectionStands = errors.New("a rejection of the session stands")
	// ErrOwnRejection is an approval overturning a rejection by the same
	// reviewer: a rejection is overturned by another reviewer.
	ErrOwnRejection = errors.New("a rejection is overturned by another reviewer")
)

// ReviewRequest is what `kubectl gitops audit review` asks for.
type ReviewRequest struct {
	Session string
	Approve bool
	Reject  bool
	// Overturn says that an approval overturns the rejection that stands;
	// Note says why.
	Overturn bool
	Note     string
	// AllowSecretText writes Note even when a secret rule finds something
	// in it (redacted, as always); the record says so.
	AllowSecretText bool
}

// Validate is the rule of a review: one verdict, and a note saying why.
func (r ReviewRequest) Validate() error {
	switch {
	case strings.TrimSpace(r.Session) == "":
		return inputError(InputSession, "", "required: the session id, as `%s` lists them", next.AuditLogUnreviewed())
	case r.Approve == r.Reject:
		return inputError(InputVerdict, "", "give exactly one: approve or reject")
	case r.Overturn && !r.Approve:
		return inputError(InputOverturn, "", "only an approval overturns a rejection")
	case strings.TrimSpace(r.Note) == "":
		return inputError(InputNote, "", "required: what the review found")
	case !r.AllowSecretText:
		return checkText(textInput{InputNote, r.Note})
	}
	return nil
}

// Review appends breakglass.reviewed to a closed session, by a member of
// the reviewer role who neither opened nor joined it, and comments on the
// session's ticket. An approval over a standing rejection must overturn it
// (req.Overturn), by another reviewer than those who rejected: the record
// names the rejection. Jira trouble is a warning: the review is in the log.
func (e *Engine) Review(ctx context.Context, req ReviewRequest) (*audit.Record, []string, error) {
	if err := req.Validate(); err != nil {
		return nil, nil, err
	}
	actor, err := e.Whoami(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !actor.In(audit.ReviewerGroup) {
		return nil, nil, fmt.Errorf("%w: %s is not in group %s; ask a member of it to review session %s", ErrNotReviewer, actor.Username, audit.ReviewerGroup, req.Session)
	}
	records, err := e.log().records(ctx, req.Session)
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
	overturned, err := overturning(req, s, actor.Username)
	if err != nil {
		return nil, nil, err
	}
	verdict, overturns, told := audit.VerdictApproved, "", audit.VerdictApproved
	if req.Reject {
		verdict, told = audit.VerdictRejected, audit.VerdictRejected
	}
	if overturned != nil {
		overturns = overturned.ID
		told = fmt.Sprintf("%s, overturning the rejection by %s (audit record %d)", verdict, overturned.Actor.Username, overturned.Seq)
	}
	p := subject{actor: actor, app: s.Application, reason: req.Note}
	rec, err := e.record(ctx, p, req.Session, audit.EventReviewed, audit.Outcome{Status: audit.StatusSucceeded}, func(r *audit.Record) {
		r.Reason, r.Cluster, r.Target, r.Git = "", nil, nil, nil
		r.Review = &audit.Review{Verdict: verdict, Note: req.Note, Overturns: overturns}
		r.TextCheck = confirmedText(req.AllowSecretText, textInput{InputNote, req.Note})
	})
	if err != nil {
		return nil, nil, err
	}
	var warnings []string
	for _, key := range sortedKeys(s.Tickets) {
		if err := e.tickets().Ready(); err != nil {
			warnings = append(warnings, fmt.Sprintf("ticket %s not told of the review: %v", key, err))
			break
		}
		if err := e.tickets().Comment(ctx, key, ticket.ReviewComment(actor.Username, told, rec.Review.Note, witness(rec))); err != nil {
			warnings = append(warnings, fmt.Sprintf("ticket %s not told of the review: %v", key, err))
		}
	}
	return rec, warnings, nil
}

// overturning is the rejection req's approval overturns (nil for none),
// by the rules of review: a rejection stands until a reviewer who made
// none of the standing rejections overturns the newest.
func overturning(req ReviewRequest, s *audit.SessionLog, reviewer string) (*audit.Record, error) {
	standing := s.Reviews.Rejections()
	if s.Reviews.Verdict() != audit.VerdictRejected {
		if req.Overturn {
			return nil, inputError(InputOverturn, "", "no rejection of session %s stands: there is nothing to overturn", req.Session)
		}
		return nil, nil
	}
	newest := standing[len(standing)-1]
	if !req.Approve {
		return nil, nil
	}
	for _, r := range standing {
		if r.Actor.Username == reviewer {
			return nil, fmt.Errorf("%w: %s rejected session %s (record %d); another member of group %s may overturn it", ErrOwnRejection, reviewer, req.Session, r.Seq, audit.ReviewerGroup)
		}
	}
	if !req.Overturn {
		return nil, fmt.Errorf("%w: %s rejected session %s (record %d), and only an approval that overturns it counts", ErrRejectionStands, newest.Actor.Username, req.Session, newest.Seq)
	}
	return newest, nil
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
