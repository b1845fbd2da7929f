package breakglass

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestAdviceNamesTheAppNamespace: the restore an error tells the user to
// run, exactly when they must run it, used to drop --app-namespace, so it
// failed for an Application outside argocd.
func TestAdviceNamesTheAppNamespace(t *testing.T) {
	app := &unstructured.Unstructured{Object: map[string]any{}}
	app.SetNamespace("team-a")
	app.SetName("web")
	app.SetAnnotations(map[string]string{SessionAnnotation: `{"id":"s","state":"pausing","openedBy":"oncall"}`})
	_, err := joinable(app, Request{App: "web"})
	if err == nil || !strings.Contains(err.Error(), "`kubectl gitops restore web --app-namespace team-a`") {
		t.Errorf("joinable: %v", err)
	}
}

// TestInputErrorsSayWhichInput: every input error used to be an invalid
// patch, so a bad reason was reported as one.
func TestInputErrorsSayWhichInput(t *testing.T) {
	reason := Request{App: "web", Target: "deployment/web", Patch: PatchSpec{Type: "merge", Body: `{"spec":{"replicas":3}}`}, Reason: " "}.Validate()
	if !errors.Is(reason, ErrInvalidInput) || errors.Is(reason, ErrPatchInvalid) {
		t.Errorf("a missing reason: %v is not an invalid input but a patch", reason)
	}
	if patch := inputError(InputPatch, "", "not JSON"); !errors.Is(patch, ErrPatchInvalid) {
		t.Errorf("a bad patch: %v", patch)
	}
}
