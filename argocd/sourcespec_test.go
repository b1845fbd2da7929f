package argocd

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func specApp(spec map[string]any) App {
	return AppOf(&unstructured.Unstructured{Object: map[string]any{"spec": spec}})
}

// TestSourceSpecsOfTheHydratorIsItsDrySource: with the source hydrator the
// change belongs in the dry source; the hydrated branch is generated.
func TestSourceSpecsOfTheHydratorIsItsDrySource(t *testing.T) {
	specs := specApp(map[string]any{"sourceHydrator": map[string]any{
		"drySource":  map[string]any{"repoURL": "https://github.com/acme/deploy", "path": "apps/web", "targetRevision": "main", "kustomize": map[string]any{"version": "v5"}},
		"syncSource": map[string]any{"targetBranch": "env/prod", "path": "web"},
	}}).SourceSpecs()
	if len(specs) != 1 {
		t.Fatalf("%+v", specs)
	}
	if s := specs[0]; s.RepoURL != "https://github.com/acme/deploy" || s.Path != "apps/web" || s.TargetRevision != "main" || s.Declared != "Kustomize" {
		t.Errorf("%+v", s)
	}
	if specs := specApp(map[string]any{"sourceHydrator": map[string]any{}}).SourceSpecs(); len(specs) != 0 {
		t.Errorf("no dry source: %+v", specs)
	}
}

// TestSourceSpecsOfSeveralSources: each source that renders, in its
// place; a ref that only lends its files renders nothing.
func TestSourceSpecsOfSeveralSources(t *testing.T) {
	specs := specApp(map[string]any{"sources": []any{
		map[string]any{"repoURL": "https://github.com/acme/values", "targetRevision": "main", "ref": "values"},
		map[string]any{"repoURL": "https://github.com/acme/deploy", "path": "apps/web", "targetRevision": "HEAD"},
		map[string]any{"repoURL": "https://charts.example", "chart": "redis", "targetRevision": "1.2.3", "helm": map[string]any{"valueFiles": []any{"$values/redis.yaml"}}},
	}}).SourceSpecs()
	if len(specs) != 2 || specs[0].Position != 2 || specs[0].Path != "apps/web" || specs[1].Position != 3 || specs[1].Chart != "redis" || specs[1].Declared != "Helm" || specs[1].Helm.ValueFiles[0] != "$values/redis.yaml" {
		t.Errorf("%+v", specs)
	}
	if specs := specApp(map[string]any{}).SourceSpecs(); len(specs) != 0 {
		t.Errorf("no source: %+v", specs)
	}
}
