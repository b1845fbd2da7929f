//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

func TestBreakglassPatchSurvivesSelfHeal(t *testing.T) {
	core(t)
	deployApp(t, "bg-survive")
	ctx := context.Background()
	oncall := newUser(t, env.Oncall.Name)
	out, errOut, code := oncall.run("kubectl", "gitops", "breakglass", "bg-survive", "deployment/web",
		"--image", "web=registry.example/web:hotfix", "--reason", "5xx spike after 1.0.0", "--incident", "INC-1", "--yes")
	if code != 0 {
		t.Fatalf("breakglass: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if !strings.Contains(out, "/spec/template/spec/containers/web/image: \"registry.example/web:1.0.0\" -> \"registry.example/web:hotfix\"") {
		t.Errorf("the plan does not show the change:\n%s", out)
	}

	// Self-heal runs every second here and the app resyncs every 10s: the
	// patch must outlive several of both.
	deadline := time.Now().Add(13 * time.Second)
	for time.Now().Before(deadline) {
		if img := imageIn(ctx, t, "bg-survive"); img != "registry.example/web:hotfix" {
			t.Fatalf("self-heal reverted the break-glass patch: image is %s", img)
		}
		time.Sleep(500 * time.Millisecond)
	}

	app, err := appsClient(t).Get(ctx, "bg-survive", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	policy, _, _ := unstructured.NestedMap(app.Object, "spec", "syncPolicy")
	if autoSyncOn(policy) {
		t.Errorf("automated sync still on: %v", policy)
	}
	if want := pausedFullPolicy(); !reflect.DeepEqual(runtimeDeepCopy(policy), runtimeDeepCopy(want)) {
		t.Errorf("pause changed more than it must on Argo CD %s:\n got %v\nwant %v", testEnv.Argo.Version, policy, want)
	}
	session, err := breakglass.ParseSession(app.GetAnnotations()[breakglass.SessionAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	var saved any
	_ = json.Unmarshal(session.SavedSyncPolicy, &saved)
	if !reflect.DeepEqual(saved, runtimeDeepCopy(fullPolicy)) || session.State != breakglass.StatePatched || session.OpenedBy != "oncall" {
		t.Errorf("session %+v does not hold the exact prior policy %v", session, fullPolicy)
	}

	d, err := kubeFor(t, env.Admin.Name).AppsV1().Deployments("bg-survive").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var managers []string
	for _, mf := range d.ManagedFields {
		managers = append(managers, mf.Manager)
	}
	if !strings.Contains(strings.Join(managers, ","), argocd.FieldManager) {
		t.Errorf("managedFields do not name %s: %v", argocd.FieldManager, managers)
	}

	recs := sessionRecords(t, session.ID)
	var events []string
	for _, r := range recs {
		events = append(events, string(r.Event))
		if r.Actor.Username != "oncall" || r.Reason != "5xx spike after 1.0.0" || r.Incident != "INC-1" || r.Application.Name != "bg-survive" {
			t.Errorf("record %s lacks who/why/what: %+v", r.ID, r)
		}
	}
	// Jira is not configured for this user: the ticket is queued.
	if strings.Join(events, ",") != "breakglass.planned,breakglass.paused,breakglass.patched,ticket.queued" {
		t.Errorf("session records %v, want planned, paused, patched, ticket.queued", events)
	}
	if queued := recs[len(recs)-1]; queued.Outcome.Status != audit.StatusQueued || !strings.Contains(queued.Outcome.Error, "jira is not configured") {
		t.Errorf("queued record outcome %+v", queued.Outcome)
	}
	if !strings.Contains(errOut, "warning: ticket queued: jira is not configured: set JIRA_URL, JIRA_PROJECT") || !strings.Contains(out, "ticket queued: `kubectl gitops ticket sync` files it") {
		t.Errorf("breakglass does not say how to configure Jira:\nstdout: %s\nstderr: %s", out, errOut)
	}
	if patched := recs[len(recs)-2]; len(patched.Changes) != 1 || patched.Changes[0].After != "registry.example/web:hotfix" {
		t.Errorf("patched record changes: %+v", patched.Changes)
	}
	assertChainIntact(t, oncall)
	// A second break-glass on the same app is refused while the session is open.
	_, errOut, code = oncall.run("kubectl", "gitops", "breakglass", "bg-survive", "deployment/web", "--replicas", "3", "--reason", "again", "-y")
	if code != 1 || !strings.Contains(errOut, "a break-glass session is already open on bg-survive: session "+session.ID+" by oncall") || !strings.Contains(errOut, "add --join to patch within it") {
		t.Errorf("second breakglass: exit %d, %q", code, errOut)
	}
}

func TestBreakglassBadInputChangesNothing(t *testing.T) {
	core(t)
	before := deployApp(t, "bg-bad")
	ctx := context.Background()
	store := audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), testEnv.ArgoNamespace)
	tests := []struct {
		name string
		user string
		args []string
		code int
		want string
	}{
		{"unknown kind", env.Oncall.Name, []string{"bg-bad", "frobnicator/web", "--replicas", "3"}, 1, `the server has no resource type "frobnicator"`},
		{"target not managed", env.Oncall.Name, []string{"bg-bad", "deployment/other", "--replicas", "3"}, 1, "deployment.apps/other in namespace bg-bad is not one of application bg-bad's managed resources"},
		{"missing app", env.Oncall.Name, []string{"no-such-app", "deployment/web", "--replicas", "3"}, 1, `application not found: "no-such-app" in namespace argocd: set --app-namespace if Applications live elsewhere`},
		{"malformed patch", env.Oncall.Name, []string{"bg-bad", "deployment/web", "--patch", "{bad"}, 2, "the patch is"},
		{"json patch not an array", env.Oncall.Name, []string{"bg-bad", "deployment/web", "--type", "json", "--patch", `{"spec":{}}`}, 2, "--patch: a JSON patch is an array of operations"},
		{"missing reason", env.Oncall.Name, []string{"bg-bad", "deployment/web", "--replicas", "3", "--reason", ""}, 2, "--reason is required"},
		{"no change given", env.Oncall.Name, []string{"bg-bad", "deployment/web"}, 2, "no change given"},
		{"patch rejected by the server", env.Oncall.Name, []string{"bg-bad", "deployment/web", "--patch", `{"spec":{"replicas":"many"}}`}, 1, "the API server rejects the patch"},
		{"no rights", env.Nobody.Name, []string{"bg-bad", "deployment/web", "--replicas", "3"}, 1, "not allowed: nobody may not read application argocd/bg-bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			headBefore := headSeq(t, store)
			depBefore, _ := kubeFor(t, env.Admin.Name).AppsV1().Deployments("bg-bad").Get(ctx, "web", metav1.GetOptions{})
			args := append([]string{"gitops", "breakglass"}, tt.args...)
			if !contains(tt.args, "--reason") {
				args = append(args, "--reason", "test")
			}
			_, errOut, code := newUser(t, tt.user).run("kubectl", append(args, "--yes")...)
			if code != tt.code || !strings.HasPrefix(errOut, "error: ") || !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want exit %d and one error line containing %q", code, errOut, tt.code, tt.want)
			}
			app, _ := appsClient(t).Get(ctx, "bg-bad", metav1.GetOptions{})
			depAfter, _ := kubeFor(t, env.Admin.Name).AppsV1().Deployments("bg-bad").Get(ctx, "web", metav1.GetOptions{})
			headAfter := headSeq(t, store)
			if _, open := app.GetAnnotations()[breakglass.SessionAnnotation]; open {
				t.Errorf("a session was opened")
			}
			policy, _, _ := unstructured.NestedMap(app.Object, "spec", "syncPolicy")
			wantPolicy, _, _ := unstructured.NestedMap(before.Object, "spec", "syncPolicy")
			if !reflect.DeepEqual(policy, wantPolicy) {
				t.Errorf("sync policy changed: %v", policy)
			}
			if depAfter.ResourceVersion != depBefore.ResourceVersion {
				t.Errorf("the Deployment was written (resourceVersion %s -> %s)", depBefore.ResourceVersion, depAfter.ResourceVersion)
			}
			if headAfter != headBefore {
				t.Errorf("audit records were written: head %d -> %d", headBefore, headAfter)
			}
		})
	}
}

func TestBreakglassDryRunChangesNothing(t *testing.T) {
	core(t)
	deployApp(t, "bg-dry")
	ctx := context.Background()
	store := audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), testEnv.ArgoNamespace)
	headBefore := headSeq(t, store)
	appBefore, _ := appsClient(t).Get(ctx, "bg-dry", metav1.GetOptions{})
	depBefore, _ := kubeFor(t, env.Admin.Name).AppsV1().Deployments("bg-dry").Get(ctx, "web", metav1.GetOptions{})

	out, _ := mustRun(t, newUser(t, env.Oncall.Name), 0, "breakglass", "bg-dry", "deploy/web", "--replicas", "5", "--reason", "capacity", "--dry-run")
	// The plan shows the policy the pause leaves: automated removed on 2.14,
	// automated with enabled: false on 3.x.
	paused, _ := json.Marshal(pausedFullPolicy())
	mechanism := "Pause:       remove spec.syncPolicy.automated"
	if testEnv.Argo.Major() >= 3 {
		mechanism = "Pause:       set spec.syncPolicy.automated.enabled to false"
	}
	for _, want := range []string{mechanism, "Target:      deployment.apps/web in namespace bg-dry", "/spec/replicas: 2 -> 5", "-> " + string(paused),
		"--- live\n+++ patched\n", "-  replicas: 2\n+  replicas: 5\n", "dry run: nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "managedFields") || strings.Contains(out, "resourceVersion") {
		t.Errorf("the diff shows bookkeeping fields:\n%s", out)
	}
	// A secret value in the patch reaches neither the plan nor the diff.
	const secret = "s3cr3t-value-never-printed"
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"API_TOKEN","value":"` + secret + `"}]}]}}}}`
	for _, format := range []string{"text", "json"} {
		out, _ := mustRun(t, newUser(t, env.Oncall.Name), 0, "breakglass", "bg-dry", "deploy/web", "--patch", patch, "--reason", "rotate", "--dry-run", "-o", format)
		if strings.Contains(out, secret) || !strings.Contains(out, audit.Redacted) {
			t.Errorf("-o %s dry run shows the secret or no redaction:\n%s", format, out)
		}
	}
	out, _ = mustRun(t, newUser(t, env.Oncall.Name), 0, "breakglass", "bg-dry", "deploy/web", "--replicas", "5", "--reason", "capacity", "--dry-run", "-o", "json")
	var view struct {
		Target  audit.Target   `json:"target"`
		Changes []audit.Change `json:"changes"`
	}
	if err := json.Unmarshal([]byte(out), &view); err != nil || view.Target.Name != "web" || len(view.Changes) != 1 || view.Changes[0].Path != "/spec/replicas" {
		t.Errorf("dry run -o json: %v\n%s", err, out)
	}
	appAfter, _ := appsClient(t).Get(ctx, "bg-dry", metav1.GetOptions{})
	depAfter, _ := kubeFor(t, env.Admin.Name).AppsV1().Deployments("bg-dry").Get(ctx, "web", metav1.GetOptions{})
	headAfter := headSeq(t, store)
	// The controller may rewrite the Application's status; its spec and
	// annotations must be untouched.
	if !reflect.DeepEqual(appAfter.Object["spec"], appBefore.Object["spec"]) || appAfter.GetAnnotations()[breakglass.SessionAnnotation] != "" {
		t.Errorf("dry run changed the Application")
	}
	if depAfter.ResourceVersion != depBefore.ResourceVersion || headAfter != headBefore {
		t.Errorf("dry run wrote: deployment %s -> %s, audit head %d -> %d", depBefore.ResourceVersion, depAfter.ResourceVersion, headBefore, headAfter)
	}
}

func TestBreakglassRefusesDestinationsNoContextReaches(t *testing.T) {
	core(t)
	e := environment(t)
	app := e.Application("bg-remote", env.FixtureApp, "demo", nil)
	app.Object["spec"].(map[string]any)["destination"] = map[string]any{"server": "https://prod.example.invalid:6443", "namespace": "demo"}
	if _, err := appsClient(t).Create(context.Background(), app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, errOut := mustRun(t, newUser(t, env.Oncall.Name), 1, "breakglass", "bg-remote", "deployment/web", "--replicas", "3", "--reason", "remote", "-y")
	if !strings.Contains(errOut, "application bg-remote deploys to https://prod.example.invalid:6443: no kubeconfig context reaches https://prod.example.invalid:6443: pass --target-context") {
		t.Errorf("breakglass on a remote destination: %q", errOut)
	}
}

func TestBreakglassChecksTheOwningApplicationSet(t *testing.T) {
	core(t)
	e := environment(t)
	ctx := context.Background()
	config, _ := e.RESTConfig(env.Admin.Name)
	sets := dynamic.NewForConfigOrDie(config).Resource(argocd.ApplicationSetGVR).Namespace(e.ArgoNamespace)
	set, err := sets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
		"metadata": map[string]any{"name": "web-set", "namespace": e.ArgoNamespace},
		"spec": map[string]any{
			"generators": []any{map[string]any{"list": map[string]any{"elements": []any{}}}},
			"template": map[string]any{
				"metadata": map[string]any{"name": "bg-owned"},
				"spec":     map[string]any{"project": "default", "destination": map[string]any{}, "source": map[string]any{"repoURL": e.Git.URL()}},
			},
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deployApp(t, "bg-owned")
	// Argo CD's controller writes the Application's status at any time:
	// read it again when it did so between the read and the update.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		app, err := appsClient(t).Get(ctx, "bg-owned", metav1.GetOptions{})
		if err != nil {
			return err
		}
		app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: set.GetName(), UID: set.GetUID()}})
		_, err = appsClient(t).Update(ctx, app, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	oncall := newUser(t, env.Oncall.Name)
	_, errOut := mustRun(t, oncall, 1, "breakglass", "bg-owned", "deployment/web", "--replicas", "3", "--reason", "owned", "-y")
	if !strings.Contains(errOut, "ApplicationSet argocd/web-set generates bg-owned and would re-enable its sync") ||
		!strings.Contains(errOut, "ignoreApplicationDifferences: [{jsonPointers: [/spec/syncPolicy]}]") {
		t.Errorf("breakglass under an ApplicationSet that rewrites syncPolicy: %q", errOut)
	}
	patchSet := func(patch string) {
		t.Helper()
		if _, err := sets.Patch(ctx, "web-set", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Ignoring the policy is not enough: the ApplicationSet would drop the
	// session annotation on its next reconcile.
	patchSet(`{"spec":{"ignoreApplicationDifferences":[{"jsonPointers":["/spec/syncPolicy"]}]}}`)
	_, errOut = mustRun(t, oncall, 1, "breakglass", "bg-owned", "deployment/web", "--replicas", "3", "--reason", "owned", "-y")
	if !strings.Contains(errOut, "drop its session") || !strings.Contains(errOut, "preservedFields: {annotations: [kubectl-gitops.io/session]}") {
		t.Errorf("breakglass under an ApplicationSet that drops unknown annotations: %q", errOut)
	}
	patchSet(`{"spec":{"preservedFields":{"annotations":["kubectl-gitops.io/session"]}}}`)
	mustRun(t, oncall, 0, "breakglass", "bg-owned", "deployment/web", "--replicas", "3", "--reason", "owned", "--dry-run")
	// A RollingSync ApplicationSet syncs its Applications itself.
	patchSet(`{"spec":{"strategy":{"type":"RollingSync","rollingSync":{"steps":[{"matchExpressions":[{"key":"env","operator":"In","values":["prod"]}]}]}}}}`)
	_, errOut = mustRun(t, oncall, 1, "breakglass", "bg-owned", "deployment/web", "--replicas", "3", "--reason", "owned", "--dry-run")
	if !strings.Contains(errOut, "RollingSync strategy, which starts sync operations itself") {
		t.Errorf("breakglass under a RollingSync ApplicationSet: %q", errOut)
	}
}

func TestBreakglassTerminatesARunningSync(t *testing.T) {
	core(t)
	e := environment(t)
	deployApp(t, "bg-running")
	ctx := context.Background()
	// A PreSync hook Pod never completes here (no scheduler or kubelet runs
	// it), so the sync of this commit stays Running.
	files := env.AppFiles("apps/bg-running", "bg-running", env.FixtureImage)
	// Hooks do not count toward sync status: change something that does.
	files["apps/bg-running/configmap.yaml"] = strings.Replace(files["apps/bg-running/configmap.yaml"], "greeting: hello", "greeting: hello again", 1)
	files["apps/bg-running/presync.yaml"] = `apiVersion: v1
kind: Pod
metadata:
  name: presync-wait
  namespace: bg-running
  annotations:
    argocd.argoproj.io/hook: PreSync
spec:
  restartPolicy: Never
  containers:
  - name: wait
    image: registry.example/wait:1
`
	if _, err := e.Git.Commit("bg-running: a hook that never finishes", files); err != nil {
		t.Fatal(err)
	}
	if _, err := appsClient(t).Patch(ctx, "bg-running", "application/merge-patch+json", []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Two minutes: on a loaded 2-core CI machine the refresh, the
	// auto-sync and the hook's creation queue behind other tests.
	ctxWait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	waitFor(ctxWait, t, "a sync stuck in its PreSync hook", func() (bool, string) {
		app, err := appsClient(t).Get(ctx, "bg-running", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return argocdPhase(app) == "Running", opState(app)
	})

	oncall := newUser(t, env.Oncall.Name)
	_, errOut := mustRun(t, oncall, 1, "breakglass", "bg-running", "deployment/web", "--replicas", "4", "--reason", "load", "--no-terminate", "-y")
	if !strings.Contains(errOut, "a sync operation is running on bg-running") {
		t.Errorf("--no-terminate: %q", errOut)
	}
	out, errOut := mustRun(t, oncall, 0, "breakglass", "bg-running", "deployment/web", "--replicas", "4", "--reason", "load", "-y")
	if !strings.Contains(out, "terminated the sync operation that started") {
		t.Errorf("breakglass did not say it terminated the sync:\nstdout: %s\nstderr: %s", out, errOut)
	}
	app, err := appsClient(t).Get(ctx, "bg-running", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if phase := argocdPhase(app); phase == "Running" || phase == "Terminating" {
		t.Errorf("the sync is still %s after breakglass returned (%s); it said:\n%s%s", phase, opState(app), out, errOut)
	}
	if n := replicasIn(ctx, t, "bg-running"); n != 4 {
		t.Errorf("replicas %d, want the patched 4", n)
	}
}

// argocdPhase is the phase of the Application's last operation.
func argocdPhase(app *unstructured.Unstructured) string {
	phase, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "phase")
	return phase
}

// opState says what a failed wait needs to know of the operation.
func opState(app *unstructured.Unstructured) string {
	msg, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "message")
	return fmt.Sprintf("phase %q: %s", argocdPhase(app), msg)
}
