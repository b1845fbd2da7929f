package breakglass

import (
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

func TestRestoreCommand(t *testing.T) {
	if got := RestoreCommand(audit.AppRef{Namespace: "argocd", Name: "web"}); got != "kubectl gitops restore web" {
		t.Errorf("got %q", got)
	}
	if got := RestoreCommand(audit.AppRef{Namespace: "team-a", Name: "web"}); got != "kubectl gitops restore web --app-namespace team-a" {
		t.Errorf("got %q", got)
	}
}
