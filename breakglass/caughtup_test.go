package breakglass

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestCaughtUpAllWaitsForAllTogether: with no controller answering, status
// requests every refresh, waits once (one watch, within the bound) and says
// the state is as of the last reconcile, instead of waiting on each
// Application in turn.
func TestCaughtUpAllWaitsForAllTogether(t *testing.T) {
	var objs []runtime.Object
	var apps []*unstructured.Unstructured
	for _, name := range []string{"a", "b", "c"} {
		session, _ := json.Marshal(Session{ID: "s-" + name, State: StatePatched, GitRevision: "r1"})
		app := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": name, "namespace": "argocd", "annotations": map[string]any{SessionAnnotation: string(session)}},
			"spec":     map[string]any{"project": "default"},
		}}
		objs = append(objs, app)
		apps = append(apps, app.DeepCopy())
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ApplicationGVR: "ApplicationList"}, objs...)
	e := &Engine{Dynamic: client, AppNamespace: "argocd", ControllerWait: 300 * time.Millisecond}
	statuses, err := e.CaughtUpAll(context.Background(), apps, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, a := range client.Actions() {
		counts[a.GetVerb()]++
		if p, ok := a.(k8stesting.PatchAction); ok && !strings.Contains(string(p.GetPatch()), RefreshAnnotation) {
			t.Errorf("unexpected patch %s", p.GetPatch())
		}
	}
	if counts["patch"] != 3 || counts["get"] != 3 || counts["watch"] < 1 {
		t.Errorf("actions %v: want one refresh patch per Application (each read once first) and a watch, no per-Application polling", counts)
	}
	for _, st := range statuses {
		if len(st.Notes) == 0 || !strings.Contains(st.Notes[0], "did not refresh in time") {
			t.Errorf("%s: notes %v", st.App.Name, st.Notes)
		}
	}
}
