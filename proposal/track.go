package proposal

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// Tracker is the provider that answers for a recorded proposal, found from
// the request's own URL, which names its project (GitHub's
// HOST/OWNER/REPO/pull/N, GitLab's HOST/GROUP/…/NAME/-/merge_requests/N).
// api is the provider's REST API, as the caller configured it; "" means
// the public service, and only for a request on github.com or gitlab.com.
// The API is never taken from the record: anyone who may append one could
// otherwise have the caller's token sent to a host of their choosing.
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
			if u.Host != "github.com" {
				return nil, fmt.Errorf("%s is not on github.com, and %w (https://%s/api/v3 for GitHub Enterprise)", p.URL, ErrProviderAPI, u.Host)
			}
			api = DefaultAPI("github")
		}
		return NewGitHub(api, project, token)
	case "gitlab":
		project, ok := strings.CutSuffix(path, fmt.Sprintf("/-/merge_requests/%d", p.Number))
		if !ok {
			return nil, fmt.Errorf("%w: %s is not merge request !%d's URL", ErrProvider, p.URL, p.Number)
		}
		if api == "" {
			if u.Host != "gitlab.com" {
				return nil, fmt.Errorf("%s is not on gitlab.com, and %w (https://%s/api/v4)", p.URL, ErrProviderAPI, u.Host)
			}
			api = DefaultAPI("gitlab")
		}
		return NewGitLab(api, project, token)
	}
	return nil, fmt.Errorf("%w: provider %q has no requests to track", ErrProvider, p.Provider)
}

// ErrProviderAPI is a request whose provider API the caller must name:
// one not on the public service.
var ErrProviderAPI = errors.New("no Git provider API is configured for it")

// StateOf asks the provider the state of p's request: open, merged or
// closed.
func StateOf(ctx context.Context, p audit.Proposal, api, token string) (string, error) {
	provider, err := Tracker(p, api, token)
	if err != nil {
		return "", err
	}
	return provider.State(ctx, p.Number)
}
