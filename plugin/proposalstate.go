package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/proposal"
)

// proposalStates asks each session's pull or merge request for its state
// (open, merged, closed) with the reader's own token (GITHUB_TOKEN,
// GITLAB_TOKEN), all at once and each within a bound, and sets it on the
// session. What could not be asked is said, once, in the returned notes;
// the session then shows the request without a state.
func proposalStates(ctx context.Context, statuses []*breakglass.SessionStatus, getenv func(string) string) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var (
		mu      sync.Mutex
		notes   []string
		noToken = map[string]bool{}
		wg      sync.WaitGroup
	)
	for _, s := range statuses {
		p := s.Proposal
		if p == nil || p.Number == 0 || tokenEnv[p.Provider] == "" {
			continue
		}
		token := getenv(tokenEnv[p.Provider])
		if token == "" {
			noToken[p.Provider] = true
			continue
		}
		wg.Add(1)
		go func(s *breakglass.SessionStatus, p audit.Proposal) {
			defer wg.Done()
			state, err := proposal.StateOf(ctx, p, getenv(apiEnv[p.Provider]), token)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, proposal.ErrProviderAPI):
				notes = append(notes, fmt.Sprintf("%s: the state of %s is not known: %v: set %s to that API to show it", s.App.Name, proposalColumn(&p, ""), err, apiEnv[p.Provider]))
				return
			case err != nil:
				notes = append(notes, fmt.Sprintf("%s: the state of %s is not known: %v", s.App.Name, proposalColumn(&p, ""), err))
				return
			case state != proposal.StateOpen && state != proposal.StateMerged && state != proposal.StateClosed:
				// Printed as it is: only the states the APIs document.
				notes = append(notes, fmt.Sprintf("%s: %s answered a state it does not document", s.App.Name, p.Provider))
				return
			}
			s.ProposalState = state
		}(s, *p)
	}
	wg.Wait()
	for _, provider := range []string{"github", "gitlab"} {
		if noToken[provider] {
			notes = append(notes, fmt.Sprintf("set %s to show whether the %s requests are open, merged or closed", tokenEnv[provider], provider))
		}
	}
	return notes
}

// watchProposals sets each session's request state for --watch: asked of
// the providers at most once a minute (a provider's rate limit is per
// hour), else as last learnt.
func (o *StatusOptions) watchProposals(ctx context.Context, statuses []*breakglass.SessionStatus) {
	if o.watched != nil && time.Since(o.watchedAt) < time.Minute {
		for _, s := range statuses {
			s.ProposalState = o.watched[s.Session.ID]
		}
		return
	}
	proposalStates(ctx, statuses, os.Getenv)
	o.watched, o.watchedAt = map[string]string{}, time.Now()
	for _, s := range statuses {
		o.watched[s.Session.ID] = s.ProposalState
	}
}
