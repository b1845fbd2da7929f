package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// jiraText is text as the ticket escapes it in Jira markup.
func jiraText(s string) string { return strings.ReplaceAll(s, "-", `\-`) }

// TestMultiSourceCatchUpFollowsEachSource: an Application with several
// sources has no status.sync.revision, only status.sync.revisions. The
// ticket names the source that renders the resource and each source's
// revision; status compares per source, so the Git fix in the first
// source is seen while the second stays pinned, and restore goes ahead.
func TestMultiSourceCatchUpFollowsEachSource(t *testing.T) {
	e := environment(t)
	ctx := context.Background()
	const name = "ms-web"
	pinned, err := e.Git.Commit("add "+name, env.AppFiles("apps/"+name, name, env.FixtureImage))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubeFor(t, env.Admin.Name).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app := e.Application(name, "apps/"+name, name, runtimeCopy(fullPolicy))
	spec := app.Object["spec"].(map[string]any)
	delete(spec, "source")
	spec["sources"] = []any{
		map[string]any{"repoURL": e.Git.URL(), "path": "apps/" + name, "targetRevision": "HEAD"},
		// Read from by $pinned only: it renders nothing, and stays put.
		map[string]any{"repoURL": e.Git.URL(), "targetRevision": pinned, "ref": "pinned"},
	}
	apps := appsClient(t)
	if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctxWait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	waitFor(ctxWait, t, name+" Synced at both sources' revisions", func() (bool, string) {
		a, err := apps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		status, _, _ := unstructured.NestedString(a.Object, "status", "sync", "status")
		revs, _, _ := unstructured.NestedStringSlice(a.Object, "status", "sync", "revisions")
		return status == "Synced" && len(revs) == 2 && revs[0] == pinned && revs[1] == pinned, status + " at " + strings.Join(revs, ",")
	})

	d := startJira(t)
	token, err := e.ArgoToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oncall := newUser(t, env.Oncall.Name, jiraEnv(d.URL, jiraToken, "ARGOCD_SERVER="+e.ArgoServerAddr, "ARGOCD_AUTH_TOKEN="+token, "ARGOCD_OPTS=--plaintext")...)
	out, _ := mustRun(t, oncall, 0, "breakglass", name, "deployment/web", "--image", "web=registry.example/web:hotfix", "--reason", "multi-source hotfix", "-y")
	if !strings.Contains(out, "revisions "+pinned[:12]+","+pinned[:12]) {
		t.Errorf("the plan does not show both sources' revisions:\n%s", out)
	}
	issues := d.Issues()
	if len(issues) != 1 {
		t.Fatalf("%d issues filed, want 1", len(issues))
	}
	for _, want := range []string{
		"* Source 1: repository " + jiraText(e.Git.URL()) + "\n* Path: apps/ms\\-web\n",
		"* Revision of source 1 at break-glass: " + pinned,
		"* Revision of source 2 at break-glass: " + pinned,
	} {
		if !strings.Contains(issues[0].Description, want) {
			t.Errorf("the ticket lacks %q:\n%s", want, issues[0].Description)
		}
	}

	if st := statusJSON(t, oncall, name); st.Git != breakglass.GitWaiting || !st.FieldLevel || len(st.Revisions) != 2 {
		t.Fatalf("right after breakglass: %+v", st)
	}
	fix, err := e.Git.Commit(name+": the hotfix", env.AppFiles("apps/"+name, name, "registry.example/web:hotfix"))
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, oncall, 0, "status", name, "--wait", "--timeout", "2m")
	st := statusJSON(t, oncall, name)
	if st.Git != breakglass.GitCaughtUp || !st.FieldLevel || len(st.Revisions) != 2 || st.Revisions[0] != fix || st.Revisions[1] != pinned {
		t.Fatalf("after the fix reached the first source: %+v", st)
	}
	out, _ = mustRun(t, oncall, 0, "restore", name, "-y")
	if !strings.Contains(out, "Git caught up at revisions "+fix[:12]+","+pinned[:12]) {
		t.Errorf("restore output: %s", out)
	}
	if img := imageIn(ctx, t, name); img != "registry.example/web:hotfix" {
		t.Errorf("restoring reverted the fix: %s", img)
	}
}
