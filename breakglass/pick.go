package breakglass

import (
	"context"
	"fmt"
	"sort"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// Candidate is an Application a break-glass may start from, for a picker.
type Candidate struct {
	Name    string
	Project string
	Sync    string
	Health  string
	// Session is the id of the open session, "" when none is open.
	Session string
}

// Candidates lists the Applications of the engine's namespace by name.
func (e *Engine) Candidates(ctx context.Context) ([]Candidate, error) {
	apps, err := e.Apps(ctx, argocd.AppQuery{Namespace: e.AppNamespace})
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, 0, len(apps))
	for _, a := range apps {
		c := Candidate{Name: a.GetName()}
		c.Project = a.Project()
		c.Sync = a.SyncStatus()
		c.Health = a.Health()
		if s, err := SessionOf(a); err == nil {
			c.Session = s.ID
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ManagedResource is one of an Application's resources as Argo CD last
// reported it.
type ManagedResource struct {
	Target audit.Target
	Sync   string
	Health string
}

// Arg spells the resource as breakglass's TARGET argument.
func (r ManagedResource) Arg() string { return r.Target.String() }

// ManagedResources lists app's resources from its status.
func (e *Engine) ManagedResources(ctx context.Context, app string) ([]ManagedResource, error) {
	a, err := e.App(ctx, e.Ref(app))
	if err != nil {
		return nil, err
	}
	var out []ManagedResource
	for _, r := range a.StatusResources() {
		out = append(out, ManagedResource{Target: r.Target, Sync: r.Status, Health: r.Health})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: application %s reports no managed resources yet", argocd.ErrNotFound, app)
	}
	return out, nil
}
