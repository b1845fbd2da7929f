package proposal

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/test/gitdouble"
)

// TestTrackerFindsTheProjectInTheRequestsURL: the request's URL names
// its project, whatever --project said when it was opened; the API is the
// one configured, or the public service's for a request there, never a
// host the record names.
func TestTrackerFindsTheProjectInTheRequestsURL(t *testing.T) {
	for _, tc := range []struct {
		p            audit.Proposal
		api, wantAPI string
		wantProject  string
	}{
		{audit.Proposal{Provider: "github", Number: 12, URL: "https://github.com/acme/deploy/pull/12"}, "", "https://api.github.com", "acme/deploy"},
		{audit.Proposal{Provider: "github", Number: 3, URL: "https://ghe.example/ops/deploy/pull/3"}, "http://127.0.0.1:9/", "http://127.0.0.1:9", "ops/deploy"},
		{audit.Proposal{Provider: "gitlab", Number: 7, URL: "https://gitlab.com/acme/platform/deploy/-/merge_requests/7"}, "", "https://gitlab.com/api/v4", "acme/platform/deploy"},
		{audit.Proposal{Provider: "gitlab", Number: 7, URL: "https://git.example/ops/deploy/-/merge_requests/7"}, "https://git.example/api/v4", "https://git.example/api/v4", "ops/deploy"},
	} {
		p, err := Tracker(tc.p, tc.api, "t")
		if err != nil {
			t.Errorf("%s: %v", tc.p.URL, err)
			continue
		}
		var api, project string
		switch p := p.(type) {
		case *GitHub:
			api, project = p.base, p.owner+"/"+p.repo
		case *GitLab:
			api, project = p.base, p.project
		}
		if api != tc.wantAPI || project != tc.wantProject {
			t.Errorf("%s: API %s, project %s; want %s, %s", tc.p.URL, api, project, tc.wantAPI, tc.wantProject)
		}
	}
	// A record names a host of its writer's choosing: with no API
	// configured, the token goes to the public service or nowhere.
	for _, p := range []audit.Proposal{
		{Provider: "github", Number: 3, URL: "https://attacker.example/ops/deploy/pull/3"},
		{Provider: "gitlab", Number: 7, URL: "https://attacker.example/ops/deploy/-/merge_requests/7"},
	} {
		if _, err := Tracker(p, "", "t"); !errors.Is(err, ErrProviderAPI) {
			t.Errorf("%s with no API configured: %v, want ErrProviderAPI", p.URL, err)
		}
	}
	for _, p := range []audit.Proposal{
		{Provider: "none", Branch: "kubectl-gitops/s1"},
		{Provider: "github", Number: 12, URL: "https://github.com/acme/deploy/pull/13"},
		{Provider: "gitlab", Number: 7, URL: "https://gitlab.com/acme/deploy/merge_requests/7"},
		{Provider: "bitbucket", Number: 1, URL: "https://bitbucket.org/a/b/pull-requests/1"},
	} {
		if _, err := Tracker(p, "", "t"); !errors.Is(err, ErrProvider) {
			t.Errorf("%+v: %v, want a refusal", p, err)
		}
	}
}

// TestStateOfAsksTheProvider: the state comes from the provider's API,
// for the request the proposal names.
func TestStateOfAsksTheProvider(t *testing.T) {
	for _, kind := range []gitdouble.Kind{gitdouble.GitHub, gitdouble.GitLab} {
		double := gitdouble.Start(t, gitdouble.Options{Kind: kind, Project: "acme/web", Token: "t0ken", PageSize: 2})
		open := "open"
		if kind == gitdouble.GitLab {
			open = "opened"
		}
		n := double.Add(gitdouble.Change{Title: "fix", Head: "kubectl-gitops/s1", Base: "main", State: open})
		p := audit.Proposal{Provider: string(kind), Number: n, URL: webURL(kind, n)}
		ctx := context.Background()
		if state, err := StateOf(ctx, p, double.API(), "t0ken"); err != nil || state != StateOpen {
			t.Errorf("%s: %q %v, want open", kind, state, err)
		}
		double.Merge(n)
		if state, err := StateOf(ctx, p, double.API(), "t0ken"); err != nil || state != StateMerged {
			t.Errorf("%s after merge: %q %v, want merged", kind, state, err)
		}
		// A request the provider does not have is its 404, told apart
		// (a recorded proposal of one does not stand).
		gone := p
		gone.Number, gone.URL = n+100, webURL(kind, n+100)
		if _, err := StateOf(ctx, gone, double.API(), "t0ken"); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s, a request it does not have: %v, want ErrNotFound", kind, err)
		}
		double.Close()
	}
}

func webURL(kind gitdouble.Kind, n int) string {
	if kind == gitdouble.GitLab {
		return fmt.Sprintf("https://git.example/acme/web/-/merge_requests/%d", n)
	}
	return fmt.Sprintf("https://git.example/acme/web/pull/%d", n)
}
