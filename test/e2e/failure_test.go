//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

func TestPatchFailingAfterPauseUndoesThePause(t *testing.T) {
	core(t)
	created := deployApp(t, "bg-abort")
	ctx := context.Background()
	engine, plan := planHotfix(t, "bg-abort")
	// Between the dry run and the patch the target goes away, so the real
	// patch is rejected after the pause.
	engine.AfterPause = func(ctx context.Context) error {
		return kubeFor(t, env.Admin.Name).AppsV1().Deployments("bg-abort").Delete(ctx, "web", metav1.DeleteOptions{})
	}
	_, err := engine.Execute(ctx, plan)
	if err == nil || !strings.Contains(err.Error(), "so the pause was undone and sync is as before") {
		t.Fatalf("Execute: %v", err)
	}
	want, _, _ := unstructured.NestedMap(created.Object, "spec", "syncPolicy")
	if got := syncPolicyOf(t, "bg-abort"); !reflect.DeepEqual(got, want) {
		t.Errorf("policy after abort %v, want %v", got, want)
	}
	app, _ := appsClient(t).Get(ctx, "bg-abort", metav1.GetOptions{})
	if _, open := app.GetAnnotations()[breakglass.SessionAnnotation]; open {
		t.Errorf("session left open after abort")
	}
	var events []string
	for _, r := range allRecords(t) {
		if r.Application != nil && r.Application.Name == "bg-abort" {
			events = append(events, string(r.Event)+"/"+r.Outcome.Status)
			if r.Event == audit.EventAborted && !strings.Contains(r.Outcome.Error, "patch rejected") {
				t.Errorf("aborted record does not say why: %q", r.Outcome.Error)
			}
		}
	}
	if strings.Join(events, ",") != "breakglass.planned/started,breakglass.paused/succeeded,breakglass.aborted/started,breakglass.aborted/failed" {
		t.Errorf("records %v", events)
	}
}

var errCrash = errors.New("simulated crash")

func TestCrashAfterPauseIsExplainedAndRecoverable(t *testing.T) {
	core(t)
	created := deployApp(t, "bg-crash")
	ctx := context.Background()
	engine, plan := planHotfix(t, "bg-crash")
	engine.AfterPause = func(context.Context) error { return errCrash } // the process dies here
	if _, err := engine.Execute(ctx, plan); !errors.Is(err, errCrash) {
		t.Fatalf("Execute: %v", err)
	}

	oncall := newUser(t, env.Oncall.Name)
	_, errOut := mustRun(t, oncall, 1, "breakglass", "bg-crash", "deployment/web", "--replicas", "3", "--reason", "retry", "-y")
	if !strings.Contains(errOut, "(state paused): finish or undo it with `kubectl gitops restore bg-crash`") {
		t.Errorf("the next command does not explain the interrupted session: %q", errOut)
	}
	// The run stopped in this test's process, which is still alive, after
	// the pause that marked its patch as being sent: for all the tool can
	// tell it is still sending it, so it is not ready (a controller would
	// otherwise auto-restore every session between its pause and its
	// patch). A run whose process is gone is resolved and restored plainly
	// (TestASessionBeingOpenedIsNotCaughtUp,
	// TestBreakglassKilledAnywhereIsRecoverable); this one is forced.
	out, errOut := mustRun(t, oncall, 0, "status", "bg-crash")
	if !strings.Contains(out, "waiting") || !strings.Contains(errOut, "is being applied in session") {
		t.Errorf("status of the session left after the pause: %q %q", out, errOut)
	}
	if _, errOut := mustRun(t, oncall, 1, "restore", "bg-crash"); !strings.Contains(errOut, "is patching deployment.apps/web") || !strings.Contains(errOut, "still running") {
		t.Errorf("restore of a session whose run may still patch: %q", errOut)
	}
	mustRun(t, oncall, 0, "restore", "bg-crash", "--force", "--reason", "the break-glass crashed after the pause", "-y")
	want, _, _ := unstructured.NestedMap(created.Object, "spec", "syncPolicy")
	if got := syncPolicyOf(t, "bg-crash"); !reflect.DeepEqual(got, want) {
		t.Errorf("policy after recovery %v, want %v", got, want)
	}
	var events []string
	for _, r := range allRecords(t) {
		if r.Application != nil && r.Application.Name == "bg-crash" {
			events = append(events, string(r.Event))
		}
	}
	// Forcing resolves the run (its patch never landed: abandoned), which
	// leaves a session that never patched: restored plainly.
	if strings.Join(events, ",") != "breakglass.planned,breakglass.paused,breakglass.abandoned,breakglass.restored,breakglass.restored" {
		t.Errorf("records %v: one lost or extra", events)
	}
	assertChainIntact(t, oncall)
}

func TestTwoBreakglassAtOnceOneWins(t *testing.T) {
	core(t)
	deployApp(t, "bg-race")
	oncall := newUser(t, env.Oncall.Name)
	args := [][]string{
		{"gitops", "breakglass", "bg-race", "deployment/web", "--image", "web=registry.example/web:a", "--reason", "first", "-y"},
		{"gitops", "breakglass", "bg-race", "deployment/web", "--replicas", "5", "--reason", "second", "-y"},
	}
	codes, errs := make([]int, 2), make([]string, 2)
	var wg sync.WaitGroup
	for i := range args {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i], codes[i] = oncall.run("kubectl", args[i]...)
		}(i)
	}
	wg.Wait()
	winners := 0
	for i, code := range codes {
		switch code {
		case 0:
			winners++
		case 1:
			if !strings.Contains(errs[i], "a break-glass session is already open on bg-race: session ") || !strings.Contains(errs[i], " by oncall") {
				t.Errorf("the loser does not name the holder: %q", errs[i])
			}
		default:
			t.Errorf("exit %d: %s", code, errs[i])
		}
	}
	if winners != 1 {
		t.Fatalf("%d winners, want exactly 1 (exit codes %v, stderr %q)", winners, codes, errs)
	}
	app, _ := appsClient(t).Get(context.Background(), "bg-race", metav1.GetOptions{})
	session, err := breakglass.ParseSession(app.GetAnnotations()[breakglass.SessionAnnotation])
	if err != nil || len(session.Patches) != 1 {
		t.Errorf("session after the race: %+v %v", session, err)
	}
}

func TestAutomatedSchemaIsReadFromTheAPIServer(t *testing.T) {
	apiOnly(t)
	suite(t)
	// Argo CD 3.x's CRD has automated.enabled (the pause sets it false);
	// 2.14's has automated but not enabled (the pause removes automated).
	// Finding automated at all proves the probe walks the real schema.
	found, enabled, err := engineAs(t, env.Oncall.Name).AutomatedSchema()
	if want := testEnv.Argo.Major() >= 3; err != nil || !found || enabled != want {
		t.Errorf("AutomatedSchema on Argo CD %s as oncall = found %v, enabled %v, %v; want true, %v", testEnv.Argo.Version, found, enabled, err, want)
	}
}

// TestTargetChangedBetweenPlanAndPatch: the patch carries the resourceVersion
// the plan saw. A change that leaves the patch's effect alone is re-planned
// and patched; one that makes a list index name another item is refused,
// never patched by a stale index.
func TestTargetChangedBetweenPlanAndPatch(t *testing.T) {
	core(t)
	deployApp(t, "bg-stale")
	ctx := context.Background()
	deployments := kubeFor(t, env.Admin.Name).AppsV1().Deployments("bg-stale")
	engine := engineAs(t, env.Oncall.Name)
	plan := func(patch string) *breakglass.Plan {
		p, err := engine.Plan(ctx, breakglass.Request{App: "bg-stale", Target: "deployment/web", Reason: "race",
			Patch: breakglass.PatchSpec{Type: "json", Body: patch}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Someone annotates the Deployment meanwhile: same effect, patched.
	p := plan(`[{"op":"replace","path":"/spec/replicas","value":4}]`)
	engine.AfterPause = func(ctx context.Context) error {
		_, err := deployments.Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"note":"meanwhile"}}}`), metav1.PatchOptions{})
		return err
	}
	if _, err := engine.Execute(ctx, p); err != nil {
		t.Fatalf("a harmless change meanwhile: %v", err)
	}
	if replicasIn(ctx, t, "bg-stale") != 4 {
		t.Errorf("the patch is not live")
	}
	engine.AfterPause = nil
	if _, err := engine.Restore(ctx, breakglass.RestoreRequest{App: "bg-stale", Force: true, Reason: "next case"}); err != nil {
		t.Fatal(err)
	}
	ctxBack, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	waitFor(ctxBack, t, "self-heal to put Git's replicas back", func() (bool, string) {
		r := replicasIn(ctx, t, "bg-stale")
		return r == 2, fmt.Sprint(r)
	})

	// Someone puts a sidecar first meanwhile: containers/0 now names it.
	p = plan(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"registry.example/web:hotfix"}]`)
	engine.AfterPause = func(ctx context.Context) error {
		_, err := deployments.Patch(ctx, "web", types.JSONPatchType, []byte(`[{"op":"add","path":"/spec/template/spec/containers/0","value":{"name":"sidecar","image":"registry.example/sidecar:1"}}]`), metav1.PatchOptions{})
		return err
	}
	_, err := engine.Execute(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "the target changed since the plan") {
		t.Fatalf("a change that redirects the patch: %v", err)
	}
	d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if strings.HasSuffix(c.Image, ":hotfix") {
			t.Errorf("container %s was patched by a stale index", c.Name)
		}
	}
	if a, _ := appsClient(t).Get(ctx, "bg-stale", metav1.GetOptions{}); a.GetAnnotations()[breakglass.SessionAnnotation] != "" {
		t.Errorf("the pause was not undone")
	}
}

// TestJoinsAtOnceKeepEveryPatch: session writes apply to the session as it
// is now, so concurrent --join patches never drop each other's patch.
func TestJoinsAtOnceKeepEveryPatch(t *testing.T) {
	core(t)
	deployApp(t, "bg-joins")
	oncall := newUser(t, env.Oncall.Name)
	mustRun(t, oncall, 0, "breakglass", "bg-joins", "deployment/web", "--replicas", "3", "--reason", "first", "-y")
	patches := []string{
		`{"metadata":{"annotations":{"one":"1"}}}`, `{"metadata":{"annotations":{"two":"2"}}}`, `{"metadata":{"annotations":{"three":"3"}}}`,
	}
	var wg sync.WaitGroup
	codes := make([]int, len(patches))
	for i, patch := range patches {
		wg.Add(1)
		go func(i int, patch string) {
			defer wg.Done()
			_, _, codes[i] = oncall.run("kubectl", "gitops", "breakglass", "bg-joins", "deployment/web", "--patch", patch, "--reason", "join", "--join", "-y")
		}(i, patch)
	}
	wg.Wait()
	s := sessionOf(t, "bg-joins")
	joined := 0
	for _, c := range codes {
		if c == 0 {
			joined++
		}
	}
	if len(s.Patches) != 1+joined || joined == 0 {
		t.Errorf("%d joins succeeded but the session holds %d patches (exit codes %v)", joined, len(s.Patches), codes)
	}
	for _, p := range s.Patches {
		if p.Pending {
			t.Errorf("patch %s left pending", p.ID)
		}
	}
	mustRun(t, oncall, 0, "restore", "bg-joins", "--force", "--reason", "cleanup", "-y")
}

// TestJoinAfterRestorePatchesNothing: a --join planned before a restore
// that then closed the session must not patch an Application whose sync is
// back on (self-heal would revert it at once).
func TestJoinAfterRestorePatchesNothing(t *testing.T) {
	core(t)
	deployApp(t, "bg-late")
	ctx := context.Background()
	oncall := newUser(t, env.Oncall.Name)
	mustRun(t, oncall, 0, "breakglass", "bg-late", "deployment/web", "--replicas", "3", "--reason", "first", "-y")
	engine := engineAs(t, env.Oncall.Name)
	plan, err := engine.Plan(ctx, breakglass.Request{App: "bg-late", Target: "deployment/web", Reason: "late", Join: true,
		Patch: breakglass.PatchSpec{Type: "merge", Body: `{"metadata":{"annotations":{"late":"yes"}}}`}})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, oncall, 0, "restore", "bg-late", "--force", "--reason", "done", "-y")
	if _, err := engine.Execute(ctx, plan); err == nil || !strings.Contains(err.Error(), "closed or replaced") {
		t.Fatalf("a join after the restore: %v", err)
	}
	d, err := kubeFor(t, env.Admin.Name).AppsV1().Deployments("bg-late").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || d.Annotations["late"] != "" {
		t.Errorf("the late join patched the target: %v %v", d.Annotations, err)
	}
}

// TestPauseThatDidNotTakeIsUndone: a schema answer kept in the user's
// cache that is wrong for this API server (a 3.1 answer on 2.14, whose
// Application schema prunes automated.enabled) makes the pause write leave
// automated sync on. The break-glass sees it in the write's answer, undoes
// the session and patches nothing.
func TestPauseThatDidNotTakeIsUndone(t *testing.T) {
	core(t)
	if testEnv.Argo.Major() >= 3 {
		t.Skip("the wrong answer is 3.1's on a 2.x schema")
	}
	created := deployApp(t, "bg-untaken")
	home := t.TempDir()
	oncall := newUser(t, env.Oncall.Name, "HOME="+home)
	config, err := testEnv.RESTConfig(env.Oncall.Name)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := kubeFor(t, env.Oncall.Name).Discovery().OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	gv, ok := paths["apis/argoproj.io/v1alpha1"]
	if !ok {
		t.Fatal("no OpenAPI schema for argoproj.io/v1alpha1")
	}
	// Where the plugin keeps the answer (plugin serverCacheDir, argocd schemaCache).
	server := sha256.Sum256([]byte(config.Host))
	doc := sha256.Sum256([]byte(gv.ServerRelativeURL()))
	file := filepath.Join(home, ".kube", "cache", "kubectl-gitops", hex.EncodeToString(server[:8]), "schema", hex.EncodeToString(doc[:16])+".json")
	if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(`{"found":true,"enabled":true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut := mustRun(t, oncall, 1, "breakglass", "bg-untaken", "deployment/web", "--replicas", "4", "--reason", "wrong schema answer", "-y")
	if !strings.Contains(errOut, "automated sync is still on after the write") {
		t.Errorf("the pause that did not take was not named: %q", errOut)
	}
	want, _, _ := unstructured.NestedMap(created.Object, "spec", "syncPolicy")
	if got := syncPolicyOf(t, "bg-untaken"); !reflect.DeepEqual(got, want) {
		t.Errorf("sync policy %v, want %v", got, want)
	}
	if _, open := appAnnotations(t, "bg-untaken")[breakglass.SessionAnnotation]; open {
		t.Errorf("the session was left open: %q", errOut)
	}
	if r := replicasIn(context.Background(), t, "bg-untaken"); r == 4 {
		t.Error("the Deployment was patched")
	}
}
