package argocd

import (
	"context"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/internal/jsontest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
)

// TestTrackingIsArgoCDsWhateverTheAppNamespace: for an Application in a
// team namespace, argocd-cm is read from Argo CD's namespace, and a
// tracking value without a namespace names a parent there.
func TestTrackingIsArgoCDsWhateverTheAppNamespace(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: "argocd"},
		Data: map[string]string{"application.resourceTrackingMethod": "label", "application.instanceLabelKey": "example.com/instance"}}
	c := &Client{Kube: fake.NewSimpleClientset(cm), AppNamespace: "team-a", ArgoNamespace: "argocd"}
	tracking := c.Tracking(context.Background(), func() bool { return true })
	if tracking.Method != "label" || tracking.LabelKey != "example.com/instance" {
		t.Fatalf("tracking %+v: argocd-cm was not read from Argo CD's namespace", tracking)
	}
	child := AppOf(&unstructured.Unstructured{Object: map[string]any{}})
	child.SetNamespace("team-a")
	child.SetName("web")
	child.SetLabels(map[string]string{"example.com/instance": "root"})
	if ns, name := tracking.ParentOf(child, c.ArgoNS()); ns != "argocd" || name != "root" {
		t.Errorf("parent %s/%s, want argocd/root", ns, name)
	}
}

func TestParentTracking(t *testing.T) {
	app := func(labels, annotations map[string]any) App {
		return AppOf(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
			"name": "child", "namespace": "argocd", "labels": labels, "annotations": annotations}}})
	}
	id := func(s string) map[string]any { return map[string]any{"argocd.argoproj.io/tracking-id": s} }
	for _, tc := range []struct {
		name     string
		tracking Tracking
		app      App
		ns, want string
	}{
		{"label (2.x default)", Tracking{}, app(map[string]any{"app.kubernetes.io/instance": "root"}, nil), "argocd", "root"},
		{"annotation wins over a stale label", Tracking{}, app(map[string]any{"app.kubernetes.io/instance": "stale"}, id("root:argoproj.io/Application:argocd/child")), "argocd", "root"},
		{"annotation method ignores labels", Tracking{Method: "annotation"}, app(map[string]any{"app.kubernetes.io/instance": "root"}, nil), "", ""},
		{"label method ignores the annotation", Tracking{Method: "label"}, app(nil, id("root:argoproj.io/Application:argocd/child")), "", ""},
		{"annotation+label", Tracking{Method: "annotation+label"}, app(map[string]any{"app.kubernetes.io/instance": "root"}, id("root:argoproj.io/Application:argocd/child")), "argocd", "root"},
		{"custom instance label key", Tracking{Method: "label", LabelKey: "team.example/app"}, app(map[string]any{"team.example/app": "root", "app.kubernetes.io/instance": "other"}, nil), "argocd", "root"},
		{"parent in another namespace", Tracking{Method: "annotation"}, app(nil, id("platform_root:argoproj.io/Application:argocd/child")), "platform", "root"},
		{"a tracking id copied from another object", Tracking{Method: "annotation"}, app(nil, id("root:argoproj.io/Application:argocd/other")), "", ""},
		{"another installation's resource", Tracking{InstallationID: "prod"}, app(nil, id("root:argoproj.io/Application:argocd/child")), "", ""},
		{"annotation+label reads only the tracking id", Tracking{Method: "annotation+label"}, app(map[string]any{"app.kubernetes.io/instance": "root"}, nil), "", ""},
		{"3.x default: a Helm instance label is no parent", Tracking{Method: "annotation"}, app(map[string]any{"app.kubernetes.io/instance": "my-release"}, nil), "", ""},
		{"label method has no installation id", Tracking{Method: "label", InstallationID: "prod"}, app(map[string]any{"app.kubernetes.io/instance": "root"}, nil), "argocd", "root"},
		{"a tracking id without an owner", Tracking{Method: "annotation"}, app(nil, id(":argoproj.io/Application:argocd/child")), "", ""},
		{"this installation's resource", Tracking{InstallationID: "prod"}, app(nil, map[string]any{"argocd.argoproj.io/tracking-id": "root:argoproj.io/Application:argocd/child", "argocd.argoproj.io/installation-id": "prod"}), "argocd", "root"},
	} {
		if ns, name := tc.tracking.ParentOf(tc.app, "argocd"); ns != tc.ns || name != tc.want {
			t.Errorf("%s: ParentOf = %q/%q, want %q/%q", tc.name, ns, name, tc.ns, tc.want)
		}
	}
	parent := func(spec string) App {
		return App{&unstructured.Unstructured{Object: map[string]any{"spec": jsontest.Decode(t, spec)}}}
	}
	tests := []struct {
		spec       string
		want, held bool
	}{
		{`{}`, false, false},
		{`{"ignoreDifferences":[{"group":"argoproj.io","kind":"Application","jsonPointers":["/spec/syncPolicy"]}]}`, true, false},
		{`{"ignoreDifferences":[{"group":"argoproj.io","kind":"Application","name":"child","jqPathExpressions":[".spec.syncPolicy"]}]}`, true, false},
		{`{"ignoreDifferences":[{"group":"argoproj.io","kind":"Application","name":"other","jsonPointers":["/spec/syncPolicy"]}]}`, false, false},
		{`{"ignoreDifferences":[{"group":"apps","kind":"Deployment","jsonPointers":["/spec/syncPolicy"]}]}`, false, false},
		// A session that holds fields writes the child's ignoreDifferences
		// too, which a parent ignoring only its sync policy would revert.
		{`{"ignoreDifferences":[{"group":"argoproj.io","kind":"Application","jsonPointers":["/spec/syncPolicy","/spec/ignoreDifferences"]}]}`, true, true},
		{`{"ignoreDifferences":[{"group":"argoproj.io","kind":"Application","jsonPointers":["/spec"]}]}`, true, true},
	}
	for _, tt := range tests {
		if got := ignoresChildSpec(parent(tt.spec), "child", false); got != tt.want {
			t.Errorf("ignoresChildSpec(%s) = %v, want %v", tt.spec, got, tt.want)
		}
		if got := ignoresChildSpec(parent(tt.spec), "child", true); got != tt.held {
			t.Errorf("ignoresChildSpec(%s, held) = %v, want %v", tt.spec, got, tt.held)
		}
	}
}
