package controller

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/proposal"
)

// Proposer proposes in Git the fix of a session marked so (breakglass
// --propose) when no proposal is recorded for it: the break-glass run
// proposes right after its patch with the person's own credentials, and
// when that failed (no credentials at 3 a.m., the provider down) or was
// killed, the loop still closes.
type Proposer struct {
	// Auth reaches Git in process: the controller's image has no git.
	Auth proposal.Auth
	// ProviderFor opens the pull or merge request for a repository (nil
	// pushes the branch only).
	ProviderFor func(repoURL string) (proposal.Provider, error)
	// After is how long after a session opened the controller leaves its
	// proposal to the break-glass run (0: 2m); a failed attempt is tried
	// again after twice as long as the one before, Attempts times at most
	// (0: 5).
	After    time.Duration
	Attempts int
	// BranchExists asks the remote whether a recorded branch is there
	// (nil: proposal.RemoteBranchExists with Auth).
	BranchExists func(ctx context.Context, repoURL, branch string) (bool, error)

	tries map[string]try
	// standing are the recorded requests and branches the provider or
	// the remote said exist.
	standing map[string]bool
	// self is the controller's own username, whose started proposal
	// records are its attempts ("" until asked).
	self string
}

// try is where the proposals of one session stand.
type try struct {
	n    int
	next time.Time
	done bool
}

// EventProposed and EventNotProposed are the reasons of the Events the
// controller's proposals emit.
const (
	EventProposed    = "Proposed"
	EventNotProposed = "NotProposed"
)

// stands is whether the recorded proposal is there to merge: a record in
// anyone's own name of a pull request, or a branch, that does not exist
// stopped the controller from ever proposing the fix. A request is asked
// of the provider; a branch alone (pushed with no provider, or a request
// with no provider to ask) of the remote. Only "not found" counts against
// it: one it cannot ask about (a token it may not send there, the API or
// the remote down) is believed, as before. What exists is asked once.
//
// A proposal names the session's own branch (breakglass.ProposalBranch):
// one naming another branch (main, say, which exists) or none, with no
// request number either, is no proposal of this session.
func (p *Proposer) stands(ctx context.Context, session string, recorded *audit.Proposal) bool {
	if recorded.Branch != breakglass.ProposalBranch(session) && (recorded.Branch != "" || recorded.Number == 0) {
		return false
	}
	key := recorded.RepoURL + "#" + strconv.Itoa(recorded.Number) + "#" + recorded.Branch
	if p.standing[key] {
		return true
	}
	asking, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	exists, known := true, false
	var provider proposal.Provider
	if p.ProviderFor != nil && recorded.Number != 0 {
		provider, _ = p.ProviderFor(recorded.RepoURL)
	}
	switch {
	case provider != nil:
		// A request counts when it merges the session's branch: any
		// open request's number, recorded in one's own name, did.
		var err error
		if getter, ok := provider.(proposal.Getter); ok {
			var opened *proposal.Opened
			if opened, err = getter.Get(asking, recorded.Number); err == nil && opened.Branch != breakglass.ProposalBranch(session) {
				return false
			}
		} else {
			_, err = provider.State(asking, recorded.Number)
		}
		exists, known = !errors.Is(err, proposal.ErrNotFound), err == nil || errors.Is(err, proposal.ErrNotFound)
	case recorded.Branch != "":
		branchExists := p.BranchExists
		if branchExists == nil {
			branchExists = func(ctx context.Context, repoURL, branch string) (bool, error) {
				return proposal.RemoteBranchExists(ctx, repoURL, branch, &p.Auth)
			}
		}
		found, err := branchExists(asking, recorded.RepoURL, recorded.Branch)
		exists, known = found || err != nil, err == nil
	}
	if known && exists {
		if p.standing == nil {
			p.standing = map[string]bool{}
		}
		p.standing[key] = true
	}
	return exists
}

func (p *Proposer) after() time.Duration {
	if p.After == 0 {
		return 2 * time.Minute
	}
	return p.After
}

func (p *Proposer) attempts() int {
	if p.Attempts == 0 {
		return 5
	}
	return p.Attempts
}

// propose proposes st's fix when the session is marked, has no proposal
// and its turn has come; it returns when to look again (zero: no need).
func (c *Controller) propose(ctx context.Context, app argocd.App, st *breakglass.SessionStatus, key string) time.Time {
	p := c.Proposer
	s := st.Session
	if p == nil || !s.Propose || st.Untrusted != "" || st.Proposal != nil && p.stands(ctx, s.ID, st.Proposal) {
		return time.Time{}
	}
	if p.tries == nil {
		p.tries = map[string]try{}
	}
	was := p.tries[s.ID]
	t := p.schedule(was, s.OpenedAt, p.own(ctx, c, key, st.ProposalPushes), time.Now())
	switch {
	case t.done && !was.done:
		p.tries[s.ID] = t
		c.logf("%s: not proposing session %s's fix: %d attempts are recorded, --propose-attempts is %d", key, s.ID, t.n, p.attempts())
		c.notify(ctx, app, key, EventNotProposed, true, "session %s's fix was not proposed in Git: the audit log records %d attempt(s) by the controller; propose it with %s", s.ID, t.n, next.Propose(app.GetNamespace(), app.GetName()))
		c.Metrics.countProposal("given-up")
		return time.Time{}
	case t.done:
		return time.Time{}
	case time.Now().Before(t.next):
		p.tries[s.ID] = t
		return t.next
	}
	t.n++
	// A clone of a large repository must not hold the queue for long.
	proposing, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	proposed, err := c.Engine.Propose(proposing, breakglass.ProposeRequest{App: app.GetName(), Namespace: app.GetNamespace(), Auth: &p.Auth, ProviderFor: p.ProviderFor})
	retry := err != nil && !final(err) && t.n < p.attempts()
	switch {
	case err == nil:
		t.done = true
		where := proposed.Proposal.URL
		if where == "" {
			where = "branch " + proposed.Proposal.Branch
		}
		c.logf("%s: proposed session %s's fix in Git: %s", key, s.ID, where)
		c.notify(ctx, app, key, EventProposed, false, "session %s's fix is proposed in Git: %s", s.ID, where)
		c.Metrics.countProposal("proposed")
	case retry:
		t.next = time.Now().Add(p.backoff(t.n))
		c.logf("%s: proposing session %s's fix failed (attempt %d of %d, next at %s): %v", key, s.ID, t.n, p.attempts(), t.next.Format(time.RFC3339), err)
		c.Metrics.countProposal("failed")
	default:
		t.done = true
		c.logf("%s: not proposing session %s's fix: %v", key, s.ID, err)
		c.notify(ctx, app, key, EventNotProposed, true, "session %s's fix was not proposed in Git (%d attempt(s)): %v; propose it with %s", s.ID, t.n, err, next.Propose(app.GetNamespace(), app.GetName()))
		c.Metrics.countProposal("given-up")
	}
	p.tries[s.ID] = t
	if t.done {
		return time.Time{}
	}
	return t.next
}

// own are the times of the pushes the controller itself started. Anyone
// may record a proposal of a session; only the controller's own records
// count its attempts, so none written by someone else can make it give
// up or wait. When it cannot tell who it is, it counts only in memory.
func (p *Proposer) own(ctx context.Context, c *Controller, key string, pushes []breakglass.ProposalPush) []time.Time {
	if len(pushes) == 0 {
		return nil
	}
	if p.self == "" {
		actor, err := c.Engine.Whoami(ctx)
		if err != nil {
			c.logf("%s: counting the proposal attempts in the audit log: %v", key, err)
			return nil
		}
		p.self = actor.Username
	}
	var own []time.Time
	for _, push := range pushes {
		if push.By == p.self {
			own = append(own, push.At)
		}
	}
	return own
}

// schedule is t brought up to the log: an attempt that reached the push
// is recorded (a started breakglass.proposed), so a restarted controller
// counts it as well as its own, and waits twice as long after the last
// one (no later than now) as before it; attempts that failed before (a
// clone) only this process counts.
func (p *Proposer) schedule(t try, opened time.Time, pushes []time.Time, now time.Time) try {
	if n := len(pushes); n > t.n {
		last := pushes[n-1]
		if last.After(now) {
			last = now
		}
		t.n, t.next = n, last.Add(p.backoff(n))
	}
	if t.next.IsZero() {
		t.next = opened.Add(p.after())
	}
	if t.n >= p.attempts() {
		t.done = true
	}
	return t
}

// backoff is the wait after the nth attempt: After, doubled for each
// attempt before it until it is a day or more.
func (p *Proposer) backoff(n int) time.Duration {
	d := p.after()
	for i := 1; i < n && d < 24*time.Hour; i++ {
		d *= 2
	}
	return d
}

// notify emits an Event on app, logging one that could not be written.
func (c *Controller) notify(ctx context.Context, app argocd.App, key, reason string, warning bool, format string, args ...any) {
	if w := c.Engine.Notify(ctx, app, reason, warning, format, args...); w != "" {
		c.logf("%s: %s", key, w)
	}
}

// final is whether a proposal's failure would fail again the same way:
// the change cannot be proposed, there is nothing to propose, or a branch
// or proposal is there already.
func final(err error) bool {
	return errors.Is(err, breakglass.ErrCannotPropose) || errors.Is(err, breakglass.ErrNothingToDo) ||
		errors.Is(err, argocd.ErrConflict) || errors.Is(err, breakglass.ErrSessionMismatch) || errors.Is(err, breakglass.ErrRetargeted)
}
