package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/gitdouble"
)

// TestStatusAsksTheRequestsState: each session's pull request is asked
// for its state with the reader's token, at the API GITHUB_API_URL names;
// without a token, or when the provider cannot say, status says so and
// shows the request without a state.
func TestStatusAsksTheRequestsState(t *testing.T) {
	double := gitdouble.Start(t, gitdouble.Options{Kind: gitdouble.GitHub, Project: "acme/deploy", Token: "t0ken", PageSize: 2})
	defer double.Close()
	open := double.Add(gitdouble.Change{Title: "a", Head: "kubectl-gitops/s1", Base: "main", State: "open"})
	merged := double.Add(gitdouble.Change{Title: "b", Head: "kubectl-gitops/s2", Base: "main", State: "open"})
	double.Merge(merged)
	pr := func(n int) *audit.Proposal {
		return &audit.Proposal{Provider: "github", Number: n, Branch: fmt.Sprintf("kubectl-gitops/s%d", n), URL: fmt.Sprintf("https://github.com/acme/deploy/pull/%d", n)}
	}
	sessions := func() []*breakglass.SessionStatus {
		return []*breakglass.SessionStatus{
			{App: audit.AppRef{Name: "a"}, Proposal: pr(open)},
			{App: audit.AppRef{Name: "b"}, Proposal: pr(merged)},
			{App: audit.AppRef{Name: "c"}, Proposal: pr(99)},
			{App: audit.AppRef{Name: "d"}, Proposal: &audit.Proposal{Provider: "none", Branch: "kubectl-gitops/s4"}},
			{App: audit.AppRef{Name: "e"}},
		}
	}
	env := map[string]string{githubTokenEnv: "t0ken", githubAPIEnv: double.API()}
	statuses := sessions()
	notes := proposalStates(context.Background(), statuses, func(k string) string { return env[k] })
	var got []string
	for _, s := range statuses {
		got = append(got, proposalColumn(s.Proposal, s.ProposalState))
	}
	if want := "PR #1 open|PR #2 merged|PR #99|branch kubectl-gitops/s4|-"; strings.Join(got, "|") != want {
		t.Errorf("columns %q, want %q", strings.Join(got, "|"), want)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "c: the state of PR #99 is not known") || strings.Contains(notes[0], "t0ken") {
		t.Errorf("notes: %q", notes)
	}

	statuses = sessions()
	notes = proposalStates(context.Background(), statuses, func(string) string { return "" })
	if statuses[0].ProposalState != "" || len(notes) != 1 || !strings.Contains(notes[0], "set GITHUB_TOKEN to show whether") {
		t.Errorf("without a token: state %q, notes %q", statuses[0].ProposalState, notes)
	}
	// A record may name any host: with no API configured the token goes
	// to none but the public service's.
	statuses = []*breakglass.SessionStatus{{App: audit.AppRef{Name: "f"}, Proposal: &audit.Proposal{Provider: "github", Number: 5, URL: double.URL + "/acme/deploy/pull/5"}}}
	notes = proposalStates(context.Background(), statuses, func(k string) string { return map[string]string{githubTokenEnv: "t0ken"}[k] })
	if statuses[0].ProposalState != "" || len(notes) != 1 || !strings.Contains(notes[0], "set GITHUB_API_URL to that API") {
		t.Errorf("a request on another host, no API configured: state %q, notes %q", statuses[0].ProposalState, notes)
	}
	if n := len(double.Requests()); n != 3 {
		t.Errorf("the provider was asked %d times, want 3 (once per request, none without a token)", n)
	}
}

// TestWatchAsksTheProviderOnceAMinute: status --watch looks every 3
// seconds; the provider is asked at most once a minute, and the state
// learnt is shown meanwhile.
func TestWatchAsksTheProviderOnceAMinute(t *testing.T) {
	double := gitdouble.Start(t, gitdouble.Options{Kind: gitdouble.GitHub, Project: "acme/deploy", Token: "t0ken", PageSize: 2})
	defer double.Close()
	n := double.Add(gitdouble.Change{Title: "a", Head: "kubectl-gitops/s1", Base: "main", State: "open"})
	t.Setenv(githubTokenEnv, "t0ken")
	t.Setenv(githubAPIEnv, double.API())
	o := &StatusOptions{}
	for i := range 3 {
		statuses := []*breakglass.SessionStatus{{App: audit.AppRef{Name: "a"}, Session: &breakglass.Session{ID: "s1"},
			Proposal: &audit.Proposal{Provider: "github", Number: n, URL: fmt.Sprintf("https://github.com/acme/deploy/pull/%d", n)}}}
		o.watchProposals(context.Background(), statuses)
		if statuses[0].ProposalState != "open" {
			t.Errorf("look %d: state %q, want open", i, statuses[0].ProposalState)
		}
	}
	if got := len(double.Requests()); got != 1 {
		t.Errorf("the provider was asked %d times in three looks, want once", got)
	}
}
