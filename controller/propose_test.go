package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/proposal"
)

// TestProposerCountsThePushesTheLogRecords: the attempts a controller
// made are counted from the log's started breakglass.proposed records, so
// a restart (an empty tries map) neither starts the count again nor
// forgets the backoff; attempts that failed before any push only the
// process that made them counts.
func TestProposerCountsThePushesTheLogRecords(t *testing.T) {
	opened := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	p := &Proposer{After: time.Minute, Attempts: 3}
	at := func(minutes ...int) []time.Time {
		var ts []time.Time
		for _, m := range minutes {
			ts = append(ts, opened.Add(time.Duration(m)*time.Minute))
		}
		return ts
	}
	for name, tc := range map[string]struct {
		was    try
		pushes []time.Time
		want   try
	}{
		"nothing yet: the break-glass run's turn first":               {try{}, nil, try{next: opened.Add(time.Minute)}},
		"restarted after two pushes: the third waits twice as long":   {try{}, at(1, 2), try{n: 2, next: opened.Add(4 * time.Minute)}},
		"restarted after the last push: given up":                     {try{}, at(1, 2, 4), try{n: 3, next: opened.Add(8 * time.Minute), done: true}},
		"this process's clones that failed before any push count too": {try{n: 2, next: opened.Add(5 * time.Minute)}, at(1), try{n: 2, next: opened.Add(5 * time.Minute)}},
		"another replica's push since this process's last attempt":    {try{n: 1, next: opened.Add(2 * time.Minute)}, at(1, 3), try{n: 2, next: opened.Add(5 * time.Minute)}},
		"a push recorded as in the future waits from now":             {try{}, at(1, 600), try{n: 2, next: opened.Add(62 * time.Minute)}},
	} {
		if got := p.schedule(tc.was, opened, tc.pushes, opened.Add(time.Hour)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}

// TestProposerCountsOnlyItsOwnPushes: anyone may record a proposal of a
// session, but records written by someone else neither count as the
// controller's attempts nor hold it back.
func TestProposerCountsOnlyItsOwnPushes(t *testing.T) {
	now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	p := &Proposer{self: "system:serviceaccount:argocd:kubectl-gitops-controller"}
	pushes := []breakglass.ProposalPush{
		{At: now, By: "mallory"},
		{At: now.Add(time.Minute), By: p.self},
		{At: now.Add(24 * time.Hour), By: "mallory"},
	}
	got := p.own(context.Background(), nil, "argocd/web", pushes)
	if len(got) != 1 || !got[0].Equal(now.Add(time.Minute)) {
		t.Errorf("own pushes %v, want only the controller's", got)
	}
}

// TestBackoffIsBounded: the wait doubles per attempt, up to a day, and
// never overflows into an immediate retry however many attempts are set.
func TestBackoffIsBounded(t *testing.T) {
	p := &Proposer{After: 2 * time.Minute}
	for n, want := range map[int]time.Duration{1: 2 * time.Minute, 2: 4 * time.Minute, 5: 32 * time.Minute, 11: 2048 * time.Minute, 40: 2048 * time.Minute, 1000: 2048 * time.Minute} {
		if got := p.backoff(n); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
}

// fakeProvider answers State from states, 404 for a request it lacks.
type fakeProvider struct {
	states map[int]string
	asked  int
}

func (f *fakeProvider) Name() string { return "github" }
func (f *fakeProvider) Open(context.Context, proposal.Request) (*proposal.Opened, error) {
	return nil, errors.New("not asked for")
}
func (f *fakeProvider) State(_ context.Context, n int) (string, error) {
	f.asked++
	if s, ok := f.states[n]; ok {
		return s, nil
	}
	return "", fmt.Errorf("%w: GET pulls/%d: 404 Not Found (%w)", proposal.ErrProvider, n, proposal.ErrNotFound)
}

// TestARecordedProposalCountsWhenItExists: a breakglass.proposed record
// of a pull request that does not exist (anyone's in their own name)
// stopped the controller from ever proposing the fix; the provider's 404
// does not. One it cannot ask about is believed, and one that exists is
// asked about once.
func TestARecordedProposalCountsWhenItExists(t *testing.T) {
	provider := &fakeProvider{states: map[int]string{7: proposal.StateOpen}}
	p := &Proposer{ProviderFor: func(string) (proposal.Provider, error) { return provider, nil }}
	ctx := context.Background()
	if p.stands(ctx, "s1", &audit.Proposal{RepoURL: "https://github.com/org/deploy.git", Number: 99}) {
		t.Error("a recorded pull request the provider does not have stands")
	}
	for i := 0; i < 3; i++ {
		if !p.stands(ctx, "s1", &audit.Proposal{RepoURL: "https://github.com/org/deploy.git", Number: 7}) {
			t.Error("an open pull request does not stand")
		}
	}
	if provider.asked != 2 {
		t.Errorf("the provider was asked %d times, want once for each request", provider.asked)
	}
	if !(&Proposer{}).stands(ctx, "s1", &audit.Proposal{Number: 99}) {
		t.Error("a request with nothing to ask about it is not believed")
	}
}

// branchProvider is fakeProvider that reads a request whole, with the
// branch it merges.
type branchProvider struct {
	fakeProvider
	branches map[int]string
}

func (b *branchProvider) Get(ctx context.Context, n int) (*proposal.Opened, error) {
	state, err := b.State(ctx, n)
	if err != nil {
		return nil, err
	}
	return &proposal.Opened{Number: n, State: state, Branch: b.branches[n]}, nil
}

// TestARecordedRequestCountsWhenItMergesTheSessionsBranch (review of issue
// 49, item 2): any open request's number, recorded in one's own name as
// the session's proposal, stopped the controller from proposing the fix.
// A request counts when it merges the session's own branch.
func TestARecordedRequestCountsWhenItMergesTheSessionsBranch(t *testing.T) {
	provider := &branchProvider{fakeProvider: fakeProvider{states: map[int]string{7: proposal.StateOpen, 8: proposal.StateOpen}},
		branches: map[int]string{7: "kubectl-gitops/s1", 8: "feature/unrelated"}}
	p := &Proposer{ProviderFor: func(string) (proposal.Provider, error) { return provider, nil }}
	ctx := context.Background()
	if !p.stands(ctx, "s1", &audit.Proposal{RepoURL: "https://github.com/org/deploy.git", Number: 7, Branch: "kubectl-gitops/s1"}) {
		t.Error("the session's own request does not stand")
	}
	if p.stands(ctx, "s1", &audit.Proposal{RepoURL: "https://github.com/org/deploy.git", Number: 8, Branch: "kubectl-gitops/s1"}) {
		t.Error("an unrelated open request, recorded as the session's, stands")
	}
}

// TestARecordedBranchCountsWhenItExists (issue 49, item 2): a proposal
// recorded as a branch alone (pushed with no provider) counted whether or
// not the branch was ever pushed, so a record in anyone's own name stopped
// the controller from proposing. The remote is asked: a branch it lacks
// does not count; one it has is asked about once; one it cannot be asked
// about (the remote down, a token it may not send there) is believed.
func TestARecordedBranchCountsWhenItExists(t *testing.T) {
	asked := 0
	remote := map[string]bool{"kubectl-gitops/real": true}
	p := &Proposer{BranchExists: func(_ context.Context, repoURL, branch string) (bool, error) {
		asked++
		if branch == "kubectl-gitops/unreachable" {
			return false, errors.New("ls-remote: connection refused")
		}
		return remote[branch], nil
	}}
	ctx := context.Background()
	if p.stands(ctx, "s1", &audit.Proposal{RepoURL: "https://github.com/org/deploy.git", Branch: "kubectl-gitops/s1"}) {
		t.Error("a recorded branch the remote does not have stands")
	}
	for i := 0; i < 3; i++ {
		if !p.stands(ctx, "real", &audit.Proposal{RepoURL: "https://github.com/org/deploy.git", Branch: "kubectl-gitops/real"}) {
			t.Error("a pushed branch does not stand")
		}
	}
	if !p.stands(ctx, "unreachable", &audit.Proposal{RepoURL: "https://github.com/org/deploy.git", Branch: "kubectl-gitops/unreachable"}) {
		t.Error("a branch the remote could not be asked about is not believed")
	}
	if asked != 3 {
		t.Errorf("the remote was asked %d times, want once per branch of the session's name", asked)
	}
	// Another branch (which exists), or neither a branch nor a request,
	// is no proposal of the session.
	remote["main"] = true
	if p.stands(ctx, "s2", &audit.Proposal{RepoURL: "https://github.com/org/deploy.git", Branch: "main"}) ||
		p.stands(ctx, "s2", &audit.Proposal{RepoURL: "https://github.com/org/deploy.git"}) {
		t.Error("a proposal naming another branch, or nothing, stands")
	}
	// A request recorded with no provider to ask is checked by its branch.
	if p.stands(ctx, "s1", &audit.Proposal{RepoURL: "https://github.com/org/deploy.git", Number: 12, Branch: "kubectl-gitops/s1"}) {
		t.Error("a request with no provider, whose branch was never pushed, stands")
	}
}
