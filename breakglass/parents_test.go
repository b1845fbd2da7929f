package breakglass

import (
	"context"
	"testing"

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
	e := &Engine{Kube: fake.NewSimpleClientset(cm), AppNamespace: "team-a", ArgoNamespace: "argocd"}
	tracking := e.tracking(context.Background(), true)
	if tracking.Method != "label" || tracking.LabelKey != "example.com/instance" {
		t.Fatalf("tracking %+v: argocd-cm was not read from Argo CD's namespace", tracking)
	}
	child := &unstructured.Unstructured{Object: map[string]any{}}
	child.SetNamespace("team-a")
	child.SetName("web")
	child.SetLabels(map[string]string{"example.com/instance": "root"})
	if ns, name := tracking.ParentOf(child, e.argoNamespace()); ns != "argocd" || name != "root" {
		t.Errorf("parent %s/%s, want argocd/root", ns, name)
	}
}
