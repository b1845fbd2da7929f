package drift

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestFieldWriterReadsManagedFields(t *testing.T) {
	at := func(min int) *metav1.Time {
		v := metav1.NewTime(time.Date(2026, 12, 3, 3, min, 0, 0, time.UTC))
		return &v
	}
	entry := func(manager string, min int, fields string) metav1.ManagedFieldsEntry {
		e := metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
		if min >= 0 {
			e.Time = at(min)
		}
		return e
	}
	live := &unstructured.Unstructured{Object: map[string]any{}}
	live.SetManagedFields([]metav1.ManagedFieldsEntry{
		entry("argocd-controller", 0, `{"f:data":{},"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:name":{}}}}}}}`),
		entry("kubectl", -1, `{"f:spec":{"f:replicas":{}}}`),
		entry("kubectl-set", 2, `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:image":{}}}}}}}`),
		entry("my-operator", 5, `{"f:data":{"f:greeting":{}}}`),
	})
	for _, tt := range []struct{ path, manager string }{
		{"/spec/replicas", "kubectl"},
		{"/spec/template/spec/containers/web/image", "kubectl-set"},
		{"/spec/template/spec/containers/sidecar/image", ""},
		// argocd-controller owns data whole (an atomic entry); the later
		// writer of the key wins.
		{"/data/greeting", "my-operator"},
		{"/data/other", "argocd-controller"},
		{"/metadata/labels/app", ""},
	} {
		if got, _ := FieldWriter(live, tt.path); got != tt.manager {
			t.Errorf("FieldWriter(%s) = %q, want %q", tt.path, got, tt.manager)
		}
	}
	if _, since := FieldWriter(live, "/spec/replicas"); since != nil {
		t.Errorf("an entry without a time (the scale subresource) gave a time: %v", since)
	}
	if manager, since := lastWriter(live); manager != "my-operator" || since == nil || since.Minute() != 5 {
		t.Errorf("lastWriter = %s %v", manager, since)
	}
}
