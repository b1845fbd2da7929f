//go:build e2e

package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// TestSelfHealRevertsLivePatch is the problem kubectl gitops exists for: a
// hand-made patch of a self-healing Application's Deployment is reverted by
// the real application controller.
func TestSelfHealRevertsLivePatch(t *testing.T) {
	core(t)
	e := environment(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	apps := appsClient(t)
	kube := kubeFor(t, env.Admin.Name)

	app := e.Application("smoke", env.FixtureApp, env.DemoNamespace, map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}})
	if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	head, err := e.Git.Head()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the Application to be Synced at the fixture's head", func() (bool, string) {
		a, err := apps.Get(ctx, "smoke", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		status, _, _ := unstructured.NestedString(a.Object, "status", "sync", "status")
		revision, _, _ := unstructured.NestedString(a.Object, "status", "sync", "revision")
		return status == "Synced" && revision == head, status + " at " + revision
	})
	if got := deploymentImage(ctx, t, kube); got != env.FixtureImage {
		t.Fatalf("synced Deployment runs %q, want the fixture's %q", got, env.FixtureImage)
	}

	oncall := newUser(t, env.Oncall.Name)
	patchedAt := time.Now()
	oncall.kubectl("-n", env.DemoNamespace, "patch", "deployment", "web", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"registry.example/web:hotfix"}]`)

	waitFor(ctx, t, "self-heal to revert the hand-made patch", func() (bool, string) {
		img := deploymentImage(ctx, t, kube)
		return img == env.FixtureImage, "image " + img
	})
	a, err := apps.Get(ctx, "smoke", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	op, _, _ := unstructured.NestedMap(a.Object, "status", "operationState")
	started, _, _ := unstructured.NestedString(op, "startedAt")
	at, err := time.Parse(time.RFC3339, started)
	if err != nil || at.Before(patchedAt.Truncate(time.Second)) {
		t.Fatalf("no sync operation started after the patch; the revert was not Argo CD's: %v", op)
	}
	if automated, _, _ := unstructured.NestedBool(op, "operation", "initiatedBy", "automated"); !automated {
		t.Errorf("the reverting sync was not automated: %v", op["operation"])
	}
}

// TestVersionThroughKubectl runs the plugin through kubectl's own plugin
// discovery and checks it reaches both servers.
func TestVersionThroughKubectl(t *testing.T) {
	core(t)
	e := environment(t)
	u := newUser(t, env.Auditor.Name, "ARGOCD_SERVER="+e.ArgoServerAddr, "ARGOCD_OPTS=--plaintext")

	if list := u.kubectl("plugin", "list"); !strings.Contains(list, "kubectl-gitops") {
		t.Fatalf("kubectl plugin list does not show kubectl-gitops:\n%s", list)
	}
	out := u.kubectl("gitops", "version")
	for _, want := range []string{"Client:      " + testVersion, "Kubernetes:  v1.35.4", "Argo CD:     v" + testEnv.Argo.Version} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl gitops version output lacks %q:\n%s", want, out)
		}
	}
	js := u.kubectl("gitops", "version", "-o", "json")
	if !strings.Contains(js, `"version": "`+testVersion+`"`) || !strings.Contains(js, `"version": "v1.35.4"`) {
		t.Errorf("kubectl gitops version -o json:\n%s", js)
	}

	nobody := newUser(t, env.Nobody.Name)
	if _, errOut, code := nobody.run("kubectl", "gitops", "version", "--kubeconfig", "/nonexistent"); code != 1 || !strings.HasPrefix(errOut, "error: ") {
		t.Errorf("unreachable server: exit %d, stderr %q; want exit 1 and one error line", code, errOut)
	}
}

// TestCompletionThroughKubectl asks kubectl for completions as a shell's
// TAB does: Application names, then the Application's managed resources;
// restore offers only Applications with an open session.
func TestCompletionThroughKubectl(t *testing.T) {
	deployApp(t, "cmp-web")
	oncall := newUser(t, env.Oncall.Name)
	complete := func(words ...string) string {
		t.Helper()
		out, errOut, code := oncall.run("kubectl", append([]string{"__complete", "gitops"}, words...)...)
		if code != 0 {
			t.Fatalf("kubectl __complete gitops %s: exit %d: %s", strings.Join(words, " "), code, errOut)
		}
		return out
	}
	if out := complete("breakglass", "cmp-"); !strings.Contains(out, "cmp-web\tproject default, Synced\n") || strings.Contains(out, "bg-") {
		t.Errorf("breakglass APP completion:\n%s", out)
	}
	out := complete("breakglass", "cmp-web", "")
	for _, want := range []string{"deployment.apps/web\tnamespace cmp-web, Synced\n", "configmap/web-config\tnamespace cmp-web, Synced\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("breakglass TARGET completion lacks %q:\n%s", want, out)
		}
	}
	if out := complete("breakglass", "cmp-web", "deployment"); strings.Contains(out, "configmap/") {
		t.Errorf("TARGET completion ignores the typed prefix:\n%s", out)
	}
	if out := complete("restore", "cmp-"); strings.Contains(out, "cmp-web") {
		t.Errorf("restore offers an Application with no open session:\n%s", out)
	}
	mustRun(t, oncall, 0, "breakglass", "cmp-web", "deployment/web", "--replicas", "3", "--reason", "completion", "-y")
	for _, command := range []string{"restore", "status"} {
		if out := complete(command, "cmp-"); !regexp.MustCompile(`cmp-web\tproject default, \w+, session \S+ open\n`).MatchString(out) {
			t.Errorf("%s completion does not offer the open session:\n%s", command, out)
		}
	}
	mustRun(t, oncall, 0, "restore", "cmp-web", "--force", "--reason", "test over", "-y")
}
