//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

func driftJSON(t *testing.T, u *user, args ...string) []drift.Report {
	t.Helper()
	out, errOut, _ := u.run("kubectl", append([]string{"gitops", "drift", "-o", "json"}, args...)...)
	var reports []drift.Report
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("drift -o json: %v\n%s\n%s", err, out, errOut)
	}
	return reports
}

func driftedField(reports []drift.Report, kind, path string) *drift.Field {
	for _, r := range reports {
		for i, f := range r.Fields {
			if f.Resource.Kind == kind && f.Path == path {
				return &r.Fields[i]
			}
		}
	}
	return nil
}

// TestDriftNamesWhoChangedLiveStateAndWhatToDo: on an Application that
// does not self-heal, a person's kubectl scale and set image and an
// operator's write drift three fields. drift finds each through Argo CD's
// own comparison, names the manager from managedFields, classes it and
// says what to do; without the API it still names the drifted resources;
// --exit-code says whether anything drifted; a break-glass patch is
// linked to its session.
func TestDriftNamesWhoChangedLiveStateAndWhatToDo(t *testing.T) {
	ctx := context.Background()
	const name = "dr-web"
	createApp(t, name, func(app *unstructured.Unstructured, _ string) {
		app.Object["spec"].(map[string]any)["syncPolicy"] = map[string]any{"automated": map[string]any{"prune": true}} // no self-heal
		app.SetLabels(map[string]string{drift.OwnerLabel: "team-payments"})
	})
	waitSynced(t, name, "")
	kube := kubeFor(t, env.Admin.Name)
	ctxWait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	admin, oncall := argoAdmin(t), argoUser(t)
	if _, code := runCode(oncall, "drift", name, "--exit-code"); code != 0 {
		t.Fatalf("drift --exit-code on a synced Application: exit %d, want 0", code)
	}
	plain := newUser(t, env.Oncall.Name)
	person := newUser(t, env.Admin.Name)
	person.kubectl("-n", name, "scale", "deployment", "web", "--replicas", "5")
	person.kubectl("-n", name, "set", "image", "deployment/web", "web=registry.example/web:manual")
	if _, err := kube.CoreV1().ConfigMaps(name).Patch(ctx, "web-config", types.MergePatchType, []byte(`{"data":{"greeting":"hi"}}`), metav1.PatchOptions{FieldManager: "my-operator"}); err != nil {
		t.Fatal(err)
	}
	// Argo CD's view catches up with each write in turn: wait until its
	// comparison has all three.
	var reports []drift.Report
	waitFor(ctxWait, t, "Argo CD to see the three writes", func() (bool, string) {
		reports = driftJSON(t, admin, name)
		return len(reports) == 1 && len(reports[0].Fields) == 3, jsonText(reports)
	})
	if len(reports) != 1 || reports[0].Mode != "field" {
		t.Fatalf("reports %+v, want one in field mode", reports)
	}
	replicas := driftedField(reports, "Deployment", "/spec/replicas")
	if replicas == nil || !strings.HasPrefix(replicas.Manager, "kubectl") || replicas.Class != drift.Manual ||
		jsonText(replicas.Live) != "5" || jsonText(replicas.Git) != "2" || replicas.Owner != "team-payments" || replicas.SelfHeal ||
		!strings.Contains(replicas.Response, "does not self-heal") || !strings.Contains(replicas.Response, "move it into Git: set /spec/replicas to 5 in apps/dr-web") {
		d, _ := kube.AppsV1().Deployments(name).Get(ctx, "web", metav1.GetOptions{})
		mf, _ := json.Marshal(d.ManagedFields)
		t.Errorf("replicas: %+v\nmanagedFields: %s", replicas, mf)
	}
	image := driftedField(reports, "Deployment", "/spec/template/spec/containers/web/image")
	// The scale subresource records no time; kubectl set image does. The
	// source is plain manifests (Directory): the advice is the ticket's, to
	// set the image there, not a kustomize line.
	if image == nil || image.Manager != "kubectl-set" || image.Since == nil || image.Class != drift.Manual ||
		!strings.Contains(image.Response, "set container web's image to registry.example/web:manual in apps/dr-web") {
		t.Errorf("image: %+v", image)
	}
	greeting := driftedField(reports, "ConfigMap", "/data/greeting")
	if greeting == nil || greeting.Manager != "my-operator" || greeting.Class != drift.Controller ||
		!strings.Contains(greeting.Response, `managedFieldsManagers: ["my-operator"]`) {
		cm, _ := kube.CoreV1().ConfigMaps(name).Get(ctx, "web-config", metav1.GetOptions{})
		mf, _ := json.Marshal(cm.ManagedFields)
		t.Errorf("greeting: %+v\nmanagedFields: %s", greeting, mf)
	}
	if n := len(reports[0].Fields); n != 3 {
		t.Errorf("%d drifted fields, want 3: %+v", n, reports[0].Fields)
	}

	// The manager table takes additions from the command line.
	if g := driftedField(driftJSON(t, admin, name, "--manager-class", "my-operator=pipeline"), "ConfigMap", "/data/greeting"); g == nil || g.Class != drift.Pipeline {
		t.Errorf("--manager-class: %+v", g)
	}
	// An on-call who may read only the Deployments there (the team role
	// swapped for a narrower one) cannot read the ConfigMap: that field's
	// writer is unknown, said so, never guessed.
	narrowTeamRole(t, name, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}})
	limited := driftJSON(t, oncall, name)
	if g := driftedField(limited, "ConfigMap", "/data/greeting"); g == nil || g.Class != drift.Unknown || len(limited[0].Notes) == 0 || !strings.Contains(limited[0].Notes[0], "forbidden") {
		t.Errorf("a live object the user may not read: %+v %v", g, limited[0].Notes)
	}
	// Without the Argo CD API: the drifted resources, by their last writer.
	noAPI := driftJSON(t, plain, name)
	if len(noAPI) != 1 || noAPI[0].Mode != "resource" || len(noAPI[0].Fields) != 2 {
		t.Errorf("without the API: %+v", noAPI)
	}
	out, code := runCode(oncall, "drift", name, "--exit-code")
	if code != 1 || !strings.Contains(out, "APP") || !strings.Contains(out, "deployment.apps/web") || !strings.Contains(out, "team-payments") {
		t.Errorf("drift --exit-code with drift: exit %d\n%s", code, out)
	}
	if _, code := runCode(admin, "drift", "no-such-app", "--exit-code"); code != 3 {
		t.Errorf("drift --exit-code of a missing Application: exit %d, want 3", code)
	}

	// A break-glass patch is drift too: linked to its session.
	deployApp(t, "dr-bg")
	mustRun(t, oncall, 0, "breakglass", "dr-bg", "deployment/web", "--replicas", "4", "--reason", "drift test", "-y")
	bg := driftedField(driftJSON(t, oncall, "dr-bg"), "Deployment", "/spec/replicas")
	session := sessionOf(t, "dr-bg")
	if bg == nil || bg.Class != drift.BreakGlass || bg.Session != session.ID || !strings.Contains(bg.Response, "kubectl gitops restore dr-bg") {
		t.Errorf("break-glass drift: %+v (session %s)", bg, session.ID)
	}
	mustRun(t, oncall, 0, "restore", "dr-bg", "--force", "--reason", "test over", "-y")
}

// runCode runs kubectl gitops ARGS and returns stdout and the exit code.
func runCode(u *user, args ...string) (string, int) {
	out, _, code := u.run("kubectl", append([]string{"gitops"}, args...)...)
	return out, code
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// argoAdmin is the cluster admin with the Argo CD API configured.
func argoAdmin(t *testing.T) *user { t.Helper(); return argoAs(t, env.Admin.Name) }

// narrowTeamRole swaps on-call's team role in namespace ns for a Role of
// rules alone.
func narrowTeamRole(t *testing.T, ns string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	kube := kubeFor(t, env.Admin.Name)
	if err := kube.RbacV1().RoleBindings(ns).Delete(ctx, env.OncallTeamRole, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "oncall-narrow", Namespace: ns}, Rules: rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "oncall-narrow", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: env.Oncall.Groups[0]}}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
