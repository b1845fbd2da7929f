package argocd

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestSourceSpecOfTheHydratorIsItsDrySource: with the source hydrator the
// change belongs in the dry source; the hydrated branch is generated.
func TestSourceSpecOfTheHydratorIsItsDrySource(t *testing.T) {
	app := AppOf(&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"sourceHydrator": map[string]any{
		"drySource":  map[string]any{"repoURL": "https://github.com/acme/deploy", "path": "apps/web", "targetRevision": "main", "kustomize": map[string]any{"version": "v5"}},
		"syncSource": map[string]any{"targetBranch": "env/prod", "path": "web"},
	}}}})
	s := app.SourceSpec()
	if !s.Hydrator || s.Sources != 1 || s.RepoURL != "https://github.com/acme/deploy" || s.Path != "apps/web" || s.TargetRevision != "main" || s.Declared != "Kustomize" || s.HydratedBranch != "env/prod" {
		t.Errorf("%+v", s)
	}
	s = AppOf(&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"sourceHydrator": map[string]any{}}}}).SourceSpec()
	if !s.Hydrator || s.Sources != 0 {
		t.Errorf("no dry source: %+v", s)
	}
}
