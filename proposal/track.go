package proposal

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// Tracker is the provider that answers for a recorded proposal, found from
// the request's own URL, which names its project (GitHub's
// HOST/OWNER/REPO/pull/N, GitLab's HOST/GROUP/…/NAME/-/merge_requests/N).
// api is the provider's REST API, "" for the host's own: api.github.com for
// github.com, HOST/api/v3 for GitHub Enterprise, HOST/api/v4 for GitLab.
// A proposal that opened no request (a pushed branch) has no tracker.
func Tracker(p audit.Proposal, api, token string) (Provider, error) {
	if p.Number == 0 || p.URL == "" {
		return nil, fmt.Errorf("%w: the proposal opened no request", ErrProvider)
	}
	u, err := url.Parse(p.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: the proposal's URL %q is not a request's", ErrProvider, p.URL)
	}
	path := strings.Trim(u.Path, "/")
	switch p.Provider {
	case "github":
		project, ok := strings.CutSuffix(path, fmt.Sprintf("/pull/%d", p.Number))
		if !ok {
			return nil, fmt.Errorf("%w: %s is not pull request #%d's URL", ErrProvider, p.URL, p.Number)
		}
		if api == "" {
			api = u.Scheme + "://" + u.Host + "/api/v3"
			if u.Host == "github.com" {
				api = DefaultAPI("github")
			}
		}
		return NewGitHub(api, project, token)
	case "gitlab":
		project, ok := strings.CutSuffix(path, fmt.Sprintf("/-/merge_requests/%d", p.Number))
		if !ok {
			return nil, fmt.Errorf("%w: %s is not merge request !%d's URL", ErrProvider, p.URL, p.Number)
		}
		if api == "" {
			api = u.Scheme + "://" + u.Host + "/api/v4"
		}
		return NewGitLab(api, project, token)
	}
	return nil, fmt.Errorf("%w: provider %q has no requests to track", ErrProvider, p.Provider)
}

// StateOf asks the provider the state of p's request: open, merged or
// closed.
func StateOf(ctx context.Context, p audit.Proposal, api, token string) (string, error) {
	provider, err := Tracker(p, api, token)
	if err != nil {
		return "", err
	}
	return provider.State(ctx, p.Number)
}
