package breakglass

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
)

// Reverted is a patched path of an open session whose live value is no
// longer the one the session patched: a manual Sync, a `kubectl apply` of
// Git's manifest, an operator, a person. Writer is the field manager that
// owns the path now, as the live object's managedFields say.
type Reverted struct {
	Target audit.Target `json:"target"`
	Path   string       `json:"path"`
	Writer string       `json:"writer,omitempty"`
	Class  drift.Class  `json:"class,omitempty"`
}

func (r Reverted) String() string {
	by := "a writer managedFields do not name"
	if r.Writer != "" {
		by = fmt.Sprintf("%s (%s)", r.Writer, r.Class)
	}
	return fmt.Sprintf("%s %s, by %s", r.Target, r.Path, by)
}

// reverted reads the live targets of s's patches and names each patched
// path that no longer holds the patched value. A path whose value the
// session keeps no digest of (a secret, free text) cannot be told and is
// not named.
func (e *Engine) reverted(ctx context.Context, app argocd.App, s *Session) ([]Reverted, error) {
	var out []Reverted
	var cluster interface {
		Object(context.Context, audit.Target) (*unstructured.Unstructured, error)
	}
	for _, p := range latestPatches(s) {
		if p.Pending {
			continue
		}
		if cluster == nil {
			c, err := e.ClusterOf(app, "")
			if err != nil {
				return nil, err
			}
			cluster = c
		}
		live, err := cluster.Object(ctx, p.Target)
		if err != nil {
			return nil, fmt.Errorf("reading the live %s: %w", p.Target, err)
		}
		for _, f := range p.Fields {
			if f.Secret || f.After == "" {
				continue
			}
			if got, _ := audit.Lookup(live.Object, f.Path); digest(got) == f.After {
				continue
			}
			r := Reverted{Target: p.Target, Path: f.Path}
			if writer, _ := drift.FieldWriter(live, f.Path); writer != "" {
				r.Writer, r.Class = writer, drift.ClassOf(drift.DefaultManagerClasses, writer)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// describeReverted is reverted in one line.
func describeReverted(reverted []Reverted) string {
	parts := make([]string, len(reverted))
	for i, r := range reverted {
		parts[i] = r.String()
	}
	return strings.Join(parts, "; ")
}

// PatchedTargets are the objects session s patched (not those still being
// sent), once each: what a revert would show on.
func PatchedTargets(s *Session) []audit.Target {
	var out []audit.Target
	for _, p := range latestPatches(s) {
		if !p.Pending {
			out = append(out, p.Target)
		}
	}
	return out
}
