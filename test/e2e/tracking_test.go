//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// The tests here change argocd-cm's tracking settings, which the
// controller applies to every Application; each puts them back when it
// ends (setTracking), so no test depends on the order tests run in (the
// suite runs shuffled).

// setTracking writes settings into argocd-cm and puts back what was there
// when the test ends; "" removes a key.
func setTracking(t *testing.T, settings map[string]string) {
	t.Helper()
	e := environment(t)
	patch := func(values map[string]string) {
		data := map[string]any{}
		for k, v := range values {
			if v == "" {
				data[k] = nil
			} else {
				data[k] = v
			}
		}
		body, _ := json.Marshal(map[string]any{"data": data})
		if _, err := kubeFor(t, env.Admin.Name).CoreV1().ConfigMaps(e.ArgoNamespace).Patch(context.Background(), "argocd-cm", types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm, err := kubeFor(t, env.Admin.Name).CoreV1().ConfigMaps(e.ArgoNamespace).Get(context.Background(), "argocd-cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	undo := map[string]string{}
	for k := range settings {
		undo[k] = cm.Data[k] // "" (absent) is removed again
	}
	patch(settings)
	t.Cleanup(func() { patch(undo) })
}

// appOfApps commits a child Application deploying apps/CHILD and a parent
// path holding it, creates the parent (self-healing, in parentNamespace,
// project project) and waits until the child exists, carries what
// tracked says the controller wrote, and has synced its Deployment.
func appOfApps(t *testing.T, parentNamespace, project, child string, tracked func(*unstructured.Unstructured) bool) (parent, childApp *unstructured.Unstructured) {
	t.Helper()
	return appOfAppsIn(t, parentNamespace, environment(t).ArgoNamespace, project, child, tracked)
}

// appOfAppsIn is appOfApps with the child Application in childNamespace.
func appOfAppsIn(t *testing.T, parentNamespace, childNamespace, project, child string, tracked func(*unstructured.Unstructured) bool) (parent, childApp *unstructured.Unstructured) {
	t.Helper()
	e := environment(t)
	ctx := context.Background()
	files := env.AppFiles("apps/"+child, child, env.FixtureImage)
	files["apps/"+child+"-parent/child.yaml"] = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: ` + child + `
  namespace: ` + childNamespace + `
spec:
  project: default
  source:
    repoURL: ` + e.Git.URL() + `
    path: apps/` + child + `
    targetRevision: HEAD
  destination:
    server: https://kubernetes.default.svc
    namespace: ` + child + `
  syncPolicy:
    automated:
      prune: true
      selfHeal: true
`
	if _, err := e.Git.Commit("app of apps "+child, files); err != nil {
		t.Fatal(err)
	}
	kube := kubeFor(t, env.Admin.Name)
	for _, ns := range []string{child, parentNamespace, childNamespace} {
		if ns == e.ArgoNamespace {
			continue // Argo CD's: Applications live there, never a team's workloads
		}
		if err := env.TeamNamespace(ctx, kube, ns); err != nil {
			t.Fatal(err)
		}
	}
	parent = e.Application(child+"-parent", "apps/"+child+"-parent", e.ArgoNamespace, runtimeCopy(fullPolicy))
	parent.SetNamespace(parentNamespace)
	_ = unstructured.SetNestedField(parent.Object, project, "spec", "project")
	dyn := kubeDynamic(t).Resource(argocd.ApplicationGVR).Namespace(childNamespace)
	if _, err := kubeDynamic(t).Resource(argocd.ApplicationGVR).Namespace(parentNamespace).Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctxWait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	waitFor(ctxWait, t, "the parent to create "+child+" with its tracking and managed resources", func() (bool, string) {
		a, err := dyn.Get(ctx, child, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		childApp = a
		res, _, _ := unstructured.NestedSlice(a.Object, "status", "resources")
		sync, _, _ := unstructured.NestedString(a.Object, "status", "sync", "status")
		_, err = kube.AppsV1().Deployments(child).Get(ctx, "web", metav1.GetOptions{})
		return tracked(a) && len(res) > 0 && sync == "Synced" && err == nil, sync + " " + fmtMeta(a)
	})
	return parent, childApp
}

// fmtMeta is an Application's labels and annotations, for a failure message.
func fmtMeta(a *unstructured.Unstructured) string {
	b, _ := json.Marshal(map[string]any{"labels": a.GetLabels(), "annotations": a.GetAnnotations()})
	return string(b)
}

func trackingID(a *unstructured.Unstructured) string {
	return a.GetAnnotations()["argocd.argoproj.io/tracking-id"]
}

// trackedBy is whether a carries the tracking Argo CD's default method
// writes for parent (qualified NAMESPACE_NAME outside Argo CD's
// namespace): the tracking id on 3.x, the instance label on 2.x.
func trackedBy(a *unstructured.Unstructured, parent string) bool {
	if testEnv.Argo.Major() < 3 {
		return a.GetLabels()["app.kubernetes.io/instance"] == parent
	}
	return strings.HasPrefix(trackingID(a), parent+":")
}

// untracked is whether a carries no tracking at all.
func untracked(a *unstructured.Unstructured) bool {
	return trackingID(a) == "" && a.GetLabels()["app.kubernetes.io/instance"] == ""
}

// TestParentsUnderEveryTrackingMethod: for each tracking setting of
// argocd-cm, the real controller tracks the child Application its own way,
// and breakglass finds the self-healing parent from what it wrote.
func TestParentsUnderEveryTrackingMethod(t *testing.T) {
	core(t)
	e := environment(t)
	oncall := newUser(t, env.Oncall.Name)
	cases := []struct {
		name     string
		settings map[string]string
		child    string
		tracked  func(*unstructured.Unstructured) bool
	}{
		{"annotation+label", map[string]string{"application.resourceTrackingMethod": "annotation+label"}, "trk-al",
			func(a *unstructured.Unstructured) bool {
				return strings.HasPrefix(trackingID(a), "trk-al-parent:") && a.GetLabels()["app.kubernetes.io/instance"] == "trk-al-parent"
			}},
		{"label with application.instanceLabelKey", map[string]string{"application.resourceTrackingMethod": "label", "application.instanceLabelKey": "team.example/app"}, "trk-lbl",
			func(a *unstructured.Unstructured) bool { return a.GetLabels()["team.example/app"] == "trk-lbl-parent" }},
		{"annotation with installationID", map[string]string{"application.resourceTrackingMethod": "annotation", "installationID": "trk-prod"}, "trk-inst",
			func(a *unstructured.Unstructured) bool {
				return strings.HasPrefix(trackingID(a), "trk-inst-parent:") && a.GetAnnotations()["argocd.argoproj.io/installation-id"] == "trk-prod"
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setTracking(t, tc.settings)
			appOfApps(t, e.ArgoNamespace, "default", tc.child, tc.tracked)
			out, _ := mustRun(t, oncall, 0, "breakglass", tc.child, "deployment/web", "--replicas", "3", "--reason", "tracking "+tc.name, "--dry-run")
			if !strings.Contains(out, "Also pauses: parent application "+tc.child+"-parent") {
				t.Errorf("breakglass did not find the parent under %s:\n%s", tc.name, out)
			}
		})
	}
}

// TestParentInAnotherNamespaceIsPausedAndRestored: a parent Application in
// a team namespace (Applications in any namespace) tracks its child as
// NAMESPACE_NAME; breakglass pauses it there and restore brings it back.
func TestParentInAnotherNamespaceIsPausedAndRestored(t *testing.T) {
	core(t)
	ctx := context.Background()
	const teamNS, child = "team-trk", "trk-ns"
	appOfApps(t, teamNS, "default", child, func(a *unstructured.Unstructured) bool { return trackedBy(a, teamNS+"_"+child+"-parent") })
	parents := kubeDynamic(t).Resource(argocd.ApplicationGVR).Namespace(teamNS)
	oncall := newUser(t, env.Oncall.Name)
	out, _ := mustRun(t, oncall, 0, "breakglass", child, "deployment/web", "--replicas", "3", "--reason", "parent elsewhere", "-y")
	if !strings.Contains(out, "Also pauses: parent application "+child+"-parent") {
		t.Errorf("breakglass did not name the parent in %s:\n%s", teamNS, out)
	}
	p, err := parents.Get(ctx, child+"-parent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	policy, _, _ := unstructured.NestedMap(p.Object, "spec", "syncPolicy")
	if autoSyncOn(policy) || !strings.HasPrefix(p.GetAnnotations()[breakglass.PausedByAnnotation], child+"/") {
		t.Fatalf("the parent in %s was not paused: %v %v", teamNS, policy, p.GetAnnotations())
	}
	time.Sleep(3 * time.Second) // longer than the self-heal period: a parent left running would have undone the child's pause
	if got := replicasIn(ctx, t, child); got != 3 {
		t.Errorf("the fix was reverted: %d replicas", got)
	}
	mustRun(t, oncall, 0, "restore", child, "--force", "--reason", "test over", "-y")
	p, _ = parents.Get(ctx, child+"-parent", metav1.GetOptions{})
	policy, _, _ = unstructured.NestedMap(p.Object, "spec", "syncPolicy")
	if !autoSyncOn(policy) || p.GetAnnotations()[breakglass.PausedByAnnotation] != "" {
		t.Errorf("restore left the parent in %s paused: %v %v", teamNS, policy, p.GetAnnotations())
	}
}

// TestParentFoundFromStatusWhenTheChildCarriesNoTracking: a child whose
// tracking was stripped is found in its parent's status.resources. A deny
// sync window keeps the parent from writing the tracking back, so the test
// fails rather than passes by tracking if the fallback breaks.
func TestParentFoundFromStatusWhenTheChildCarriesNoTracking(t *testing.T) {
	core(t)
	e := environment(t)
	ctx := context.Background()
	const child = "trk-status"
	projects := kubeDynamic(t).Resource(appProjectsGVR).Namespace(e.ArgoNamespace)
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"name": "trk-windowed", "namespace": e.ArgoNamespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	if _, err := projects.Create(ctx, project, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	appOfApps(t, e.ArgoNamespace, "trk-windowed", child, func(a *unstructured.Unstructured) bool { return trackedBy(a, child+"-parent") })
	window := `{"spec":{"syncWindows":[{"kind":"deny","schedule":"* * * * *","duration":"24h","applications":["*"]}]}}`
	if _, err := projects.Patch(ctx, "trk-windowed", types.MergePatchType, []byte(window), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // let the controller's project informer see the window
	admin := newUser(t, env.Admin.Name)
	admin.kubectl("-n", e.ArgoNamespace, "annotate", "application", child, "argocd.argoproj.io/tracking-id-", "argocd.argoproj.io/installation-id-")
	admin.kubectl("-n", e.ArgoNamespace, "label", "application", child, "app.kubernetes.io/instance-")

	out, _ := mustRun(t, newUser(t, env.Oncall.Name), 0, "breakglass", child, "deployment/web", "--replicas", "3", "--reason", "untracked child", "--dry-run")
	if !strings.Contains(out, "Also pauses: parent application "+child+"-parent") {
		t.Errorf("breakglass did not find the parent from its status.resources:\n%s", out)
	}
	a, err := appsClient(t).Get(ctx, child, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !untracked(a) {
		t.Fatalf("the controller wrote the tracking back during the test (%s): the fallback was not exercised", fmtMeta(a))
	}
	if err := projects.Delete(ctx, "trk-windowed", metav1.DeleteOptions{}); err != nil {
		t.Logf("deleting the project: %v", err)
	}
}

// TestNothingReadsPerResourceHealth: Argo CD 3.x keeps per-resource health
// out of status.resources (in the resource tree instead). The environment
// must show that, so that the suite passing on 3.x proves no command
// depends on it.
func TestNothingReadsPerResourceHealth(t *testing.T) {
	e := environment(t)
	if e.Argo.Major() < 3 {
		t.Skipf("Argo CD %s stores per-resource health in status.resources", e.Argo.Version)
	}
	// An Application of its own, synced, so that something is checked
	// whatever order the suite runs in (-shuffle ran this one first once).
	deployApp(t, "trk-health")
	list, err := appsClient(t).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checked, own := 0, 0
	for _, a := range list.Items {
		res, _, _ := unstructured.NestedSlice(a.Object, "status", "resources")
		for _, r := range res {
			checked++
			if a.GetName() == "trk-health" {
				own++
			}
			if m, _ := r.(map[string]any); m["health"] != nil {
				t.Errorf("application %s has per-resource health in status.resources: %v", a.GetName(), m)
			}
		}
	}
	if checked == 0 || own == 0 {
		t.Fatalf("trk-health lists %d managed resources, all Applications %d: nothing was checked", own, checked)
	}
}
