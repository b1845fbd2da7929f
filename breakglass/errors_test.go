package breakglass

import (
	"errors"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
)

// TestInputErrorsSayWhichInput: every input error used to be an invalid
// patch, so a bad reason was reported as one.
func TestInputErrorsSayWhichInput(t *testing.T) {
	reason := Request{App: "web", Target: "deployment/web", Patch: PatchSpec{Type: "merge", Body: `{"spec":{"replicas":3}}`}, Reason: " "}.Validate()
	if !errors.Is(reason, argocd.ErrInvalidInput) || errors.Is(reason, ErrPatchInvalid) {
		t.Errorf("a missing reason: %v is not an invalid input but a patch", reason)
	}
	if patch := inputError(InputPatch, "", "not JSON"); !errors.Is(patch, ErrPatchInvalid) {
		t.Errorf("a bad patch: %v", patch)
	}
}
