package breakglass

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestAdviceNamesTheAppNamespace: the restore an error tells the user to
// run, exactly when they must run it, used to drop --app-namespace, so it
// failed for an Application outside argocd.
func TestAdviceNamesTheAppNamespace(t *testing.T) {
	app := argocd.AppOf(&unstructured.Unstructured{Object: map[string]any{}})
	app.SetNamespace("team-a")
	app.SetName("web")
	app.SetAnnotations(map[string]string{SessionAnnotation: `{"id":"s","state":"pausing","openedBy":"oncall"}`})
	_, err := joinable(app, Request{App: "web"})
	if err == nil || !strings.Contains(err.Error(), "`kubectl gitops restore web --app-namespace team-a`") {
		t.Errorf("joinable: %v", err)
	}
}

func TestCheckSizeRefusesWhatCannotBeStored(t *testing.T) {
	big := strings.Repeat("x", MaxRecordBytes)
	p := &Plan{Target: deployment, PatchType: "merge", PatchRedacted: `{"metadata":{"annotations":{"a":"` + big + `"}}}`,
		Changes: []audit.Change{{Path: "/metadata/annotations/a", After: big}},
		fields:  []PatchedField{{Path: "/metadata/annotations/a", After: digest(big)}}}
	if err := p.checkSize(); !errors.Is(err, ErrPatchInvalid) || !strings.Contains(err.Error(), "too large to record") {
		t.Errorf("an oversized record: %v", err)
	}
	var many []PatchedField
	for i := 0; i < 2000; i++ {
		many = append(many, PatchedField{Path: "/metadata/labels/l" + strings.Repeat("x", 20), After: digest(i)})
	}
	p = &Plan{Target: deployment, PatchRedacted: "{}", fields: many}
	if err := p.checkSize(); !errors.Is(err, ErrPatchInvalid) || !strings.Contains(err.Error(), "session annotation") {
		t.Errorf("a session too large: %v", err)
	}
	p = &Plan{Target: deployment, PatchRedacted: `{"spec":{"replicas":3}}`, fields: []PatchedField{{Path: "/spec/replicas", After: digest(3)}}}
	if err := p.checkSize(); err != nil {
		t.Errorf("a small patch: %v", err)
	}
}
