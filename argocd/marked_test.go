package argocd

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

// status lists a thousand Applications to find the few a session marks:
// the listing must carry metadata only, and only the marked ones are read
// whole (one deleted in between drops out).
func TestAppsMarkedReadsOnlyTheMarkedWhole(t *testing.T) {
	ctx := context.Background()
	annotated := map[string]map[string]string{
		"web":    {"kubectl-gitops.io/session": `{"id":"s1"}`},
		"parent": {"kubectl-gitops.io/paused-by": "web/s1"},
		"gone":   {"kubectl-gitops.io/session": `{"id":"s2"}`},
		"plain":  {"team": "a"},
		"bare":   nil,
	}
	var metas, wholes []runtime.Object
	for name, ann := range annotated {
		metas = append(metas, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Application"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: name, Annotations: ann},
		})
		if name == "gone" {
			continue
		}
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"project": "p-" + name}}}
		u.SetAPIVersion("argoproj.io/v1alpha1")
		u.SetKind("Application")
		u.SetNamespace("argocd")
		u.SetName(name)
		u.SetAnnotations(ann)
		wholes = append(wholes, u)
	}
	scheme := metadatafake.NewTestScheme()
	metav1.AddMetaToScheme(scheme)
	meta := metadatafake.NewSimpleMetadataClient(scheme, metas...)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{ApplicationGVR: "ApplicationList"}, wholes...)
	c := &Client{Dynamic: dyn, Metadata: meta}

	marked, err := c.AppsMarked(ctx, "", "kubectl-gitops.io/session", "kubectl-gitops.io/paused-by")
	if err != nil {
		t.Fatal(err)
	}
	names := func(apps []App) []string {
		var out []string
		for _, a := range apps {
			out = append(out, a.GetName())
		}
		return out
	}
	if got, want := names(marked), []string{"gone", "parent", "web"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("marked: %v, want %v", got, want)
	}
	if marked[2].Project() != "" || marked[2].GetAnnotations()["kubectl-gitops.io/session"] == "" {
		t.Errorf("a marked Application is its metadata: %v", marked[2].Object)
	}
	whole, err := c.Whole(ctx, marked)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(whole), []string{"parent", "web"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("whole: %v, want %v", got, want)
	}
	if whole[1].Project() != "p-web" {
		t.Errorf("web not read whole: %v", whole[1].Object)
	}
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "list" {
			t.Errorf("Applications listed whole: %v", a)
		}
	}
	for _, a := range meta.Actions() {
		if l, ok := a.(clienttesting.ListAction); !ok || a.GetVerb() != "list" {
			t.Errorf("metadata client: unexpected %s", fmt.Sprint(a))
		} else if l.GetListRestrictions().Labels.String() != "" {
			t.Errorf("listing selects %s", l.GetListRestrictions().Labels)
		}
	}
}
