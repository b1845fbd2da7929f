//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// createAppWith is createApp with spec.source replaced by spec[key] =
// source(the commit).
func createAppWith(t *testing.T, name, key string, source func(head string) any) string {
	t.Helper()
	return createApp(t, name, func(app *unstructured.Unstructured, head string) {
		spec := app.Object["spec"].(map[string]any)
		delete(spec, "source")
		spec[key] = source(head)
	})
}

// TestMultiSourceCatchUpFollowsEachSource: an Application with several
// sources has no status.sync.revision, only status.sync.revisions. The
// ticket names the source that renders the resource and each source's
// revision; status compares per source, so the Git fix in the first
// source is seen while the second stays pinned, and restore goes ahead.
func TestMultiSourceCatchUpFollowsEachSource(t *testing.T) {
	core(t)
	e := environment(t)
	ctx := context.Background()
	const name = "ms-web"
	pinned := createAppWith(t, name, "sources", func(head string) any {
		return []any{
			map[string]any{"repoURL": e.Git.URL(), "path": "apps/" + name, "targetRevision": "HEAD"},
			// Read from by $pinned only: it renders nothing, and stays put.
			map[string]any{"repoURL": e.Git.URL(), "targetRevision": head, "ref": "pinned"},
		}
	})
	apps := appsClient(t)
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

// TestSourceHydratorTicketNamesTheDrySource: with Argo CD's source
// hydrator, the commit Argo CD syncs is rendered from a dry commit; the fix
// belongs in the dry source. The ticket says so, with the dry commit, and
// status follows the dry source until restore.
func TestSourceHydratorTicketNamesTheDrySource(t *testing.T) {
	e := environment(t)
	if e.Argo.Major() < 3 {
		t.Skipf("Argo CD %s has no source hydrator", e.Argo.Version)
	}
	ctx := context.Background()
	const name = "hy-web"
	dry := createHydrated(t, name)
	hydrated := waitHydrated(t, name, dry)
	if hydrated == dry {
		t.Fatalf("the hydrated commit is the dry one (%s): nothing was hydrated", dry)
	}

	d := startJira(t)
	token, err := e.ArgoToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oncall := newUser(t, env.Oncall.Name, jiraEnv(d.URL, jiraToken, "ARGOCD_SERVER="+e.ArgoServerAddr, "ARGOCD_AUTH_TOKEN="+token, "ARGOCD_OPTS=--plaintext")...)
	out, _ := mustRun(t, oncall, 0, "breakglass", name, "deployment/web", "--replicas", "5", "--reason", "hydrated hotfix", "-y")
	if !strings.Contains(out, "dry commit "+dry[:12]+" (hydrated as "+hydrated[:12]+")") {
		t.Errorf("the plan does not name the dry commit:\n%s", out)
	}
	issues := d.Issues()
	if len(issues) != 1 {
		t.Fatalf("%d issues filed, want 1", len(issues))
	}
	for _, want := range []string{
		"* Repository: " + jiraText(e.Git.URL()) + "\n* Path: apps/hy\\-web\n",
		"renders this dry source into branch env/hy\\-web, path hy\\-web: that branch is generated; make the change in the dry source above",
		"* Dry commit at break-glass: " + dry + " (hydrated as " + hydrated + ")",
	} {
		if !strings.Contains(issues[0].Description, want) {
			t.Errorf("the ticket lacks %q:\n%s", want, issues[0].Description)
		}
	}
	if st := statusJSON(t, oncall, name); st.Git != breakglass.GitWaiting || st.Revision != dry || st.Hydrated != hydrated {
		t.Fatalf("right after breakglass: %+v", st)
	}

	files := env.AppFiles("apps/"+name, name, env.FixtureImage)
	files["apps/"+name+"/deployment.yaml"] = strings.Replace(files["apps/"+name+"/deployment.yaml"], "replicas: 2", "replicas: 5", 1)
	fix, err := e.Git.Commit(name+": the hotfix, in the dry source", files)
	if err != nil {
		t.Fatal(err)
	}
	// status asks for a hydrate with its refresh, as Argo CD's own refresh
	// does; without it the new dry commit waits for the revision cache.
	mustRun(t, oncall, 0, "status", name, "--wait", "--timeout", "2m")
	st := statusJSON(t, oncall, name)
	if st.Git != breakglass.GitCaughtUp || st.Revision != fix || st.Hydrated == hydrated || !st.FieldLevel {
		t.Fatalf("after the fix reached the dry source: %+v", st)
	}
	out, _ = mustRun(t, oncall, 0, "restore", name, "-y")
	if !strings.Contains(out, "Git caught up at dry commit "+fix[:12]) {
		t.Errorf("restore output: %s", out)
	}
	if got := replicasIn(ctx, t, name); got != 5 {
		t.Errorf("restoring reverted the fix: %d replicas", got)
	}
}

// createHydrated creates Application name through the source hydrator: its
// dry source apps/NAME of the environment's repository at HEAD, hydrated
// into branch env/NAME. It returns the dry commit.
func createHydrated(t *testing.T, name string) string {
	t.Helper()
	e := environment(t)
	return createAppWith(t, name, "sourceHydrator", func(string) any {
		return map[string]any{
			"drySource":  map[string]any{"repoURL": e.Git.URL(), "path": "apps/" + name, "targetRevision": "HEAD"},
			"syncSource": map[string]any{"targetBranch": "env/" + name, "path": name},
		}
	})
}

// waitHydrated waits until Application name is Synced to the commit the
// hydrator rendered from dry commit dry, and returns that commit.
func waitHydrated(t *testing.T, name, dry string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	apps := appsClient(t)
	var hydrated string
	waitFor(ctx, t, name+" hydrated from "+dry+" and Synced", func() (bool, string) {
		a, err := apps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		status, _, _ := unstructured.NestedString(a.Object, "status", "sync", "status")
		gotDry, _, _ := unstructured.NestedString(a.Object, "status", "sourceHydrator", "lastSuccessfulOperation", "drySHA")
		hydrated, _, _ = unstructured.NestedString(a.Object, "status", "sourceHydrator", "lastSuccessfulOperation", "hydratedSHA")
		rev, _, _ := unstructured.NestedString(a.Object, "status", "sync", "revision")
		msg, _, _ := unstructured.NestedString(a.Object, "status", "sourceHydrator", "currentOperation", "message")
		return status == "Synced" && gotDry == dry && rev == hydrated && hydrated != "", status + " dry " + gotDry + " hydrated " + hydrated + " at " + rev + ": " + msg
	})
	return hydrated
}
