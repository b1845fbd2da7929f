//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// TestHoldKeepsTheFixThroughAManualSync: with the hold (--hold app, the
// default where the Argo CD API is configured), a colleague's Sync through
// argocd-server, with default options and with Replace=true, keeps the
// live fix; a Sync that leaves out the held option reverts it, and status
// says REVERTED; caught-up is never reported while Git lacks the value,
// with or without the API; the close puts the Application's own
// ignoreDifferences and sync options back exactly.
func TestHoldKeepsTheFixThroughAManualSync(t *testing.T) {
	core(t)
	e := environment(t)
	ctx := context.Background()
	own := []any{map[string]any{"kind": "ConfigMap", "name": "unrelated", "jsonPointers": []any{"/data/x"}}}
	head := createApp(t, "bg-hold", func(app *unstructured.Unstructured, _ string) {
		if err := unstructured.SetNestedSlice(app.Object, own, "spec", "ignoreDifferences"); err != nil {
			t.Fatal(err)
		}
	})
	created := waitSynced(t, "bg-hold", head)
	specJSON := func(app *unstructured.Unstructured, field string) string {
		b, _ := json.Marshal(app.Object["spec"].(map[string]any)[field])
		return string(b)
	}
	oncall := argoUser(t)
	out, _ := mustRun(t, oncall, 0, "breakglass", "bg-hold", "deployment/web", "--image", "web=registry.example/web:hotfix", "--reason", "bad release", "-y")
	if !strings.Contains(out, "Hold:        app: the patched fields are held through every sync") {
		t.Errorf("the plan does not say how the fix is held:\n%s", out)
	}
	app, err := appsClient(t).Get(ctx, "bg-hold", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entries, _, _ := unstructured.NestedSlice(app.Object, "spec", "ignoreDifferences")
	options, _, _ := unstructured.NestedStringSlice(app.Object, "spec", "syncPolicy", "syncOptions")
	if len(entries) != 2 || !contains(options, breakglass.RespectIgnoreDifferences) {
		t.Fatalf("the hold is not in place: ignoreDifferences %v, syncOptions %v", entries, options)
	}
	if held, _ := json.Marshal(entries[1]); !strings.Contains(string(held), `select(.name == \"web\") | .image`) || !strings.Contains(string(held), `"name":"web"`) {
		t.Errorf("held entry %s", held)
	}

	// A colleague presses Sync: default options, then Replace=true.
	for _, body := range []string{`{}`, `{"syncOptions":{"items":["Replace=true","RespectIgnoreDifferences=true"]}}`, `{"syncOptions":{"items":["ServerSideApply=true","RespectIgnoreDifferences=true"]}}`} {
		argoSync(t, "bg-hold", body)
		if img := imageIn(ctx, t, "bg-hold"); img != "registry.example/web:hotfix" {
			t.Fatalf("a manual Sync (%s) reverted the held fix: image %s", body, img)
		}
	}
	// Held paths are out of Argo CD's compare, so it reports Synced; Git
	// still has 1.0.0: caught-up must not be reported, with the API or without.
	if st := statusJSON(t, oncall, "bg-hold"); st.Git != breakglass.GitWaiting || st.Ready || len(st.Reverted) > 0 {
		t.Fatalf("with the fix held and Git behind: %+v", st)
	}
	plain := newUser(t, env.Oncall.Name)
	if _, err := e.Git.Commit("bg-hold: unrelated", map[string]string{"apps/bg-hold/NOTES": "x\n"}); err != nil {
		t.Fatal(err)
	}
	if st := statusJSON(t, plain, "bg-hold"); st.Git != breakglass.GitWaiting || st.Ready || !strings.Contains(st.Targets[0].Detail, "the hold keeps the patched fields out of Argo CD's compare") {
		t.Fatalf("without the API, Git moved but lacking the fix: %+v", st.Targets)
	}
	mustRun(t, plain, 1, "restore", "bg-hold")

	// A Sync that leaves the held option out is not held: status names it.
	argoSync(t, "bg-hold", `{"syncOptions":{"items":["Replace=true"]}}`)
	if img := imageIn(ctx, t, "bg-hold"); img != env.FixtureImage {
		t.Fatalf("a Sync without the held option kept %s: the test proves nothing", img)
	}
	st := statusJSON(t, oncall, "bg-hold")
	if len(st.Reverted) != 1 || st.Reverted[0].Path != "/spec/template/spec/containers/web/image" || st.Ready {
		t.Fatalf("status after the fix was reverted: %+v", st)
	}
	// Patch it again within the session: the hold stays as it is.
	mustRun(t, oncall, 0, "breakglass", "bg-hold", "deployment/web", "--image", "web=registry.example/web:hotfix", "--reason", "again", "--join", "-y")
	argoSync(t, "bg-hold", `{}`)
	if img := imageIn(ctx, t, "bg-hold"); img != "registry.example/web:hotfix" {
		t.Fatalf("a manual Sync after the join reverted the fix: image %s", img)
	}

	fix, err := e.Git.Commit("bg-hold: the hotfix", env.AppFiles("apps/bg-hold", "bg-hold", "registry.example/web:hotfix"))
	if err != nil {
		t.Fatal(err)
	}
	if st := statusJSON(t, plain, "bg-hold"); st.Ready {
		t.Errorf("without the API the held session was called ready: %+v", st)
	}
	mustRun(t, oncall, 0, "status", "bg-hold", "--wait", "--timeout", "2m")
	out, _ = mustRun(t, oncall, 0, "restore", "bg-hold")
	if !strings.Contains(out, "Git caught up at revision "+fix[:12]) {
		t.Errorf("restore: %s", out)
	}
	app, err = appsClient(t).Get(ctx, "bg-hold", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"ignoreDifferences", "syncPolicy"} {
		if got, want := specJSON(app, field), specJSON(created, field); got != want {
			t.Errorf("restored spec.%s\n %s\nis not the Application's own\n %s", field, got, want)
		}
	}
	var planned bool
	for _, r := range allRecords(t) {
		if r.Application != nil && r.Application.Name == "bg-hold" && r.Event == "breakglass.planned" && r.Hold != nil {
			planned = planned || (r.Hold.Mode == breakglass.HoldApp && fmt.Sprint(r.Hold.IgnoreDifferences) == fmt.Sprint(own))
		}
	}
	if !planned {
		t.Errorf("no planned record holds the hold and the Application's own ignoreDifferences")
	}
}

// TestHoldMovesAreTheOnlyOnes: the admission policy lets the on-call role
// change spec.ignoreDifferences and the held sync option only as a session
// holds and releases its fields.
func TestHoldMovesAreTheOnlyOnes(t *testing.T) {
	deployApp(t, "bg-holdrule")
	oncall := argoUser(t)
	entry := `{"kind":"Deployment","name":"web","namespace":"bg-holdrule","jqPathExpressions":[".spec.replicas"]}`
	// No session: neither an entry nor the option.
	for _, patch := range []string{
		`{"spec":{"ignoreDifferences":[` + entry + `]}}`,
		`{"spec":{"syncPolicy":{"syncOptions":["ApplyOutOfSyncOnly=true","Validate=true","RespectIgnoreDifferences=true"]}}}`,
	} {
		_, errOut, code := oncall.run("kubectl", "patch", "application.argoproj.io", "bg-holdrule", "-n", "argocd", "--type=merge", "-p", patch)
		if code == 0 || !strings.Contains(errOut, "denied request") {
			t.Errorf("without a session, %s: exit %d %s", patch, code, errOut)
		}
	}
	mustRun(t, oncall, 0, "breakglass", "bg-holdrule", "deployment/web", "--replicas", "3", "--reason", "load", "-y")
	// Within it: not an entry of another shape, not another option.
	for _, patch := range []string{
		`{"spec":{"ignoreDifferences":[{"kind":"ConfigMap","name":"x","jqPathExpressions":[".data"]},{"group":"*","kind":"*","jsonPointers":["/spec"]}]}}`,
		`{"spec":{"syncPolicy":{"syncOptions":["ApplyOutOfSyncOnly=true","Validate=true","RespectIgnoreDifferences=true","Replace=true"]}}}`,
		`{"spec":{"ignoreDifferences":null}}`,
	} {
		_, errOut, code := oncall.run("kubectl", "patch", "application.argoproj.io", "bg-holdrule", "-n", "argocd", "--type=merge", "-p", patch)
		if code == 0 || !strings.Contains(errOut, "denied request") {
			t.Errorf("within the session, %s: exit %d %s", patch, code, errOut)
		}
	}
	mustRun(t, oncall, 0, "restore", "bg-holdrule", "--force", "--reason", "test over", "-y")
}

// argoSync syncs app through argocd-server as a colleague with Argo CD
// sync rights would (the UI's Sync button posts the same), with body as
// the request, and waits for the sync to finish. On-call's own Argo CD
// account is read-only: this needs Argo CD's admin.
func argoSync(t *testing.T, app, body string) {
	t.Helper()
	ctx := context.Background()
	var before string
	if a, err := appsClient(t).Get(ctx, app, metav1.GetOptions{}); err == nil {
		before, _, _ = unstructured.NestedString(a.Object, "status", "operationState", "startedAt")
	}
	// startedAt has seconds only: a sync started in the second the last
	// one did would look like it, and the wait below would never end.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	if err := testEnv.ArgoAdmin(ctx, http.MethodPost, "/api/v1/applications/"+app+"/sync", []byte(body)); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	waitFor(wait, t, "the manual sync of "+app+" to finish", func() (bool, string) {
		a, err := appsClient(t).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		started, _, _ := unstructured.NestedString(a.Object, "status", "operationState", "startedAt")
		phase, _, _ := unstructured.NestedString(a.Object, "status", "operationState", "phase")
		_, running := a.Object["operation"]
		return started != before && !running && (phase == "Succeeded" || phase == "Failed" || phase == "Error"), phase + " started " + started
	})
}

// TestHoldFieldsKeepsDeployingTheRest: --hold fields leaves automated sync
// on; another resource and another field of the patched one, changed in
// Git during the session, deploy while the held field keeps the fix;
// restore goes ahead once Git holds the value, and sync never stopped.
func TestHoldFieldsKeepsDeployingTheRest(t *testing.T) {
	core(t)
	e := environment(t)
	created := deployApp(t, "bg-holdfields")
	ctx := context.Background()
	oncall := argoUser(t)
	// Without the Argo CD API, nothing could say caught up: refused.
	if _, errOut, code := newUser(t, env.Oncall.Name).run("kubectl", "gitops", "breakglass", "bg-holdfields", "deployment/web", "--image", "web=registry.example/web:hotfix", "--reason", "bad release", "--hold", "fields", "-y"); code != 1 || !strings.Contains(errOut, "--hold fields leaves automated sync on") {
		t.Fatalf("--hold fields without the API: exit %d %s", code, errOut)
	}
	out, _ := mustRun(t, oncall, 0, "breakglass", "bg-holdfields", "deployment/web", "--image", "web=registry.example/web:hotfix", "--reason", "bad release", "--hold", "fields", "-y")
	if !strings.Contains(out, "automated sync stays on") {
		t.Errorf("breakglass output: %s", out)
	}
	if policy := syncPolicyOf(t, "bg-holdfields"); !autoSyncOn(policy) {
		t.Fatalf("--hold fields paused sync: %v", policy)
	}
	files := env.AppFiles("apps/bg-holdfields", "bg-holdfields", env.FixtureImage)
	files["apps/bg-holdfields/configmap.yaml"] = strings.Replace(files["apps/bg-holdfields/configmap.yaml"], "greeting: hello", "greeting: bonjour", 1)
	files["apps/bg-holdfields/deployment.yaml"] = strings.Replace(files["apps/bg-holdfields/deployment.yaml"], "replicas: 2", "replicas: 3", 1)
	if _, err := e.Git.Commit("bg-holdfields: the rest moves on", files); err != nil {
		t.Fatal(err)
	}
	admin := kubeFor(t, env.Admin.Name)
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	waitFor(wait, t, "Git's other changes to deploy during the session", func() (bool, string) {
		// status asks Argo CD to refresh, as a Git webhook would.
		oncall.run("kubectl", "gitops", "status", "bg-holdfields")
		cm, err := admin.CoreV1().ConfigMaps("bg-holdfields").Get(ctx, "web-config", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		replicas := replicasIn(ctx, t, "bg-holdfields")
		return cm.Data["greeting"] == "bonjour" && replicas == 3, fmt.Sprintf("greeting %s, replicas %d", cm.Data["greeting"], replicas)
	})
	if img := imageIn(ctx, t, "bg-holdfields"); img != "registry.example/web:hotfix" {
		t.Fatalf("automated sync reverted the held field: image %s", img)
	}
	if st := statusJSON(t, oncall, "bg-holdfields"); st.Git != breakglass.GitWaiting || st.Ready || st.SyncReenabled {
		t.Fatalf("status with Git behind at the held field: %+v", st)
	}

	files["apps/bg-holdfields/deployment.yaml"] = strings.Replace(files["apps/bg-holdfields/deployment.yaml"], env.FixtureImage, "registry.example/web:hotfix", 1)
	if _, err := e.Git.Commit("bg-holdfields: the hotfix", files); err != nil {
		t.Fatal(err)
	}
	mustRun(t, oncall, 0, "status", "bg-holdfields", "--wait", "--timeout", "2m")
	mustRun(t, oncall, 0, "restore", "bg-holdfields")
	app, err := appsClient(t).Get(ctx, "bg-holdfields", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"ignoreDifferences", "syncPolicy"} {
		got, _ := json.Marshal(app.Object["spec"].(map[string]any)[field])
		want, _ := json.Marshal(created.Object["spec"].(map[string]any)[field])
		if string(got) != string(want) {
			t.Errorf("restored spec.%s\n %s\nis not the Application's own\n %s", field, got, want)
		}
	}
	if img := imageIn(ctx, t, "bg-holdfields"); img != "registry.example/web:hotfix" {
		t.Errorf("after restore: image %s", img)
	}
}
