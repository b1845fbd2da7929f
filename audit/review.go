package audit

import "fmt"

// ReviewerGroup is the group of the reviewer role (deploy/rbac/reviewer.yaml).
// Separation of duties rests on it: the audit-log policy lets only its
// members create a breakglass.reviewed record, the engine refuses anyone
// else, and a review whose actor is not in it does not count
// (docs/design.md §8). Clusters whose reviewers are in another group map
// them to this one: the tool and the policy both name it.
const ReviewerGroup = "reviewers"

// HeadGuardedGroups are the groups the shipped audit-log policy
// (deploy/policy/audit-log.yaml, variable guarded) never lets move the head
// back or record a head repair; audit repair-head tells their members so
// before it asks or writes anything. A test keeps the two lists one.
var HeadGuardedGroups = []string{"oncall", "auditors", ReviewerGroup}

// BreakReviewOutOfRules is a review that does not follow the rules of
// review: by someone not in ReviewerGroup, without a verdict, or an
// approval over a standing rejection that does not overturn it, that
// overturns a rejection of its own reviewer's, or that names no rejection
// standing. It changes no verdict.
const BreakReviewOutOfRules BreakKind = "review-out-of-rules"

// Reviews is a closed session's review history, read by the rules of
// review (docs/design.md §8): only the reviewer role's reviews count; a
// rejection stands until an approval by another reviewer overturns it,
// naming it (the note says why); otherwise the newest review that counts
// gives the verdict. The zero value is a session nobody reviewed.
type Reviews struct {
	// History is every review of the session, in chain order, each with
	// why it does not count.
	History []ReviewEntry
	// standing is the review whose verdict stands; rejections are the
	// rejections standing now (since the verdict last became rejected),
	// oldest first; rejected is every rejection that counted, by id.
	standing   *Record
	rejections []*Record
	rejected   map[string]*Record
}

// ReviewEntry is one review of a session and whether it counts.
type ReviewEntry struct {
	Record *Record
	// Break is why the review does not count (as audit verify names it,
	// without the session); nil when it counts.
	Break *Break
}

// Verdict is the verdict that stands: VerdictApproved, VerdictRejected,
// or "" when no review counts.
func (h *Reviews) Verdict() string {
	if h.standing == nil {
		return ""
	}
	return h.standing.Review.Verdict
}

// Approved says whether an approval stands.
func (h *Reviews) Approved() bool { return h.Verdict() == VerdictApproved }

// Standing is the review whose verdict stands, nil when none counts.
func (h *Reviews) Standing() *Record { return h.standing }

// Rejections are the rejections that stand, oldest first: an approval
// overturns the newest, by a reviewer who made none of them.
func (h *Reviews) Rejections() []*Record { return h.rejections }

// Add reads r, a review written after the session closed by someone who
// neither opened nor joined it, by the rules of review, keeps it in the
// history and returns why it does not count (nil when it counts).
func (h *Reviews) Add(r *Record) *Break {
	b := h.judge(r)
	h.keep(r, b)
	if b != nil {
		return b
	}
	if r.Review.Verdict == VerdictRejected {
		if h.Verdict() != VerdictRejected {
			h.rejections = nil
		}
		h.rejections = append(h.rejections, r)
		if h.rejected == nil {
			h.rejected = map[string]*Record{}
		}
		h.rejected[r.ID] = r
	} else {
		h.rejections = nil
	}
	h.standing = r
	return nil
}

// keep puts r in the history, not counting for b (nil: it counts).
func (h *Reviews) keep(r *Record, b *Break) {
	h.History = append(h.History, ReviewEntry{Record: r, Break: b})
}

func (h *Reviews) judge(r *Record) *Break {
	out := func(format string, args ...any) *Break {
		return &Break{Kind: BreakReviewOutOfRules, Seq: r.Seq, Detail: fmt.Sprintf(format, args...)}
	}
	who := r.Actor.Username
	switch {
	case r.Review == nil || (r.Review.Verdict != VerdictApproved && r.Review.Verdict != VerdictRejected):
		return out("a review by %s with no verdict", who)
	case !r.Actor.In(ReviewerGroup):
		return out("reviewed by %s, who is not in group %s: only the reviewer role's reviews count", who, ReviewerGroup)
	case r.Review.Overturns != "" && r.Review.Verdict != VerdictApproved:
		return out("a rejection by %s that says it overturns a review: only an approval overturns a rejection", who)
	case r.Review.Overturns == "" && r.Review.Verdict == VerdictApproved && h.Verdict() == VerdictRejected:
		newest := h.rejections[len(h.rejections)-1]
		return out("approved by %s while the rejection by %s (record %d) stands: an approval over a rejection overturns it, saying why", who, newest.Actor.Username, newest.Seq)
	case r.Review.Overturns == "":
		return nil
	}
	rejection := h.rejected[r.Review.Overturns]
	if rejection == nil {
		return out("approved by %s overturning %s, which is no rejection of the session", who, r.Review.Overturns)
	}
	if h.Verdict() != VerdictRejected {
		// The rejection was overturned already (two reviewers raced):
		// this approval changes nothing, unless it is the rejecter's own.
		if rejection.Actor.Username == who {
			return out("approved by %s overturning their own rejection (record %d): a rejection is overturned by another reviewer", who, rejection.Seq)
		}
		return nil
	}
	standing := false
	for _, rj := range h.rejections {
		if rj.Actor.Username == who {
			return out("approved by %s, who rejected the session (record %d): a rejection is overturned by another reviewer", who, rj.Seq)
		}
		standing = standing || rj == rejection
	}
	if !standing {
		newest := h.rejections[len(h.rejections)-1]
		return out("approved by %s overturning record %d, which no longer stands: the rejection by %s (record %d) does", who, rejection.Seq, newest.Actor.Username, newest.Seq)
	}
	return nil
}
