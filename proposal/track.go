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
	kind, known := trackers[p.Provider]
	if !known {
		return nil, fmt.Errorf("%w: provider %q has no requests to track", ErrProvider, p.Provider)
	}
	project, ok := strings.CutSuffix(strings.Trim(u.Path, "/"), fmt.Sprintf(kind.suffix, p.Number))
	if !ok {
		return nil, fmt.Errorf("%w: %s is not %s's URL", ErrProvider, p.URL, fmt.Sprintf(kind.what, p.Number))
	}
	if api == "" {
		if u.Host != kind.host {
			return nil, fmt.Errorf("%s is not on %s, and %w (%s)", p.URL, kind.host, ErrProviderAPI, fmt.Sprintf(kind.apiHint, u.Host))
		}
		api = DefaultAPI(p.Provider)
	}
	return kind.open(api, project, token)
}

// trackers are how each provider's request URLs read.
var trackers = map[string]struct {
	// suffix ends a request's URL path after its project; what names it.
	suffix, what string
	// host is the public service; apiHint where another host's API is.
	host, apiHint string
	open          func(api, project, token string) (Provider, error)
}{
	"github": {"/pull/%d", "pull request #%d", "github.com", "https://%s/api/v3 for GitHub Enterprise",
		func(api, project, token string) (Provider, error) { return NewGitHub(api, project, token) }},
	"gitlab": {"/-/merge_requests/%d", "merge request !%d", "gitlab.com", "https://%s/api/v4",
		func(api, project, token string) (Provider, error) { return NewGitLab(api, project, token) }},
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
