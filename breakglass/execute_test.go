package breakglass

import (
	"errors"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestNoOtherSyncGuardsThePatch: the last write before the patch refuses
// an Application on which a sync runs that the break-glass did not
// terminate (it would apply Git over the fix), and accepts the one it
// terminated while it winds down.
func TestNoOtherSyncGuardsThePatch(t *testing.T) {
	app := func(phase, started string) argocd.App {
		a := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "web"}}}
		if phase != "" {
			a.Object["operation"] = map[string]any{"sync": map[string]any{}}
			a.Object["status"] = map[string]any{"operationState": map[string]any{"phase": phase, "startedAt": started}}
		}
		return argocd.AppOf(a)
	}
	tests := []struct {
		name, phase, started, terminated string
		refused                          bool
	}{
		{"no sync", "", "", "", false},
		{"a sync started meanwhile", "Running", "2026-12-03T08:00:01Z", "", true},
		{"the terminated sync winding down", "Terminating", "2026-12-03T08:00:00Z", "2026-12-03T08:00:00Z", false},
		{"another sync after the terminated one", "Running", "2026-12-03T08:00:05Z", "2026-12-03T08:00:00Z", true},
	}
	for _, tt := range tests {
		err := noOtherSync("web", tt.terminated)(app(tt.phase, tt.started))
		if (err != nil) != tt.refused || (err != nil && !errors.Is(err, argocd.ErrConflict)) {
			t.Errorf("%s: %v, want refused=%v", tt.name, err, tt.refused)
		}
	}
}
