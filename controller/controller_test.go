package controller

import (
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestEarliest(t *testing.T) {
	now := time.Now()
	later := now.Add(time.Minute)
	for _, tc := range []struct{ a, b, want time.Time }{
		{time.Time{}, time.Time{}, time.Time{}},
		{time.Time{}, later, later},
		{later, time.Time{}, later},
		{now, later, now},
		{later, now, now},
	} {
		if got := earliest(tc.a, tc.b); !got.Equal(tc.want) {
			t.Errorf("earliest(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// Reminders fall at the notice's time plus whole multiples of the
// interval, so a replica that takes over keeps the schedule of the one
// before it.
func TestReminderDue(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now, want time.Time
	}{
		{at, at},
		{at.Add(59 * time.Minute), at},
		{at.Add(time.Hour), at.Add(time.Hour)},
		{at.Add(150 * time.Minute), at.Add(2 * time.Hour)},
		{at.Add(-time.Minute), at}, // a clock behind the record's writer
	} {
		if got := reminderDue(at, time.Hour, tc.now); !got.Equal(tc.want) {
			t.Errorf("reminderDue at %s = %s, want %s", tc.now.Format("15:04"), got.Format("15:04"), tc.want.Format("15:04"))
		}
	}
}

// TestTheCacheKeepsWhatDecides: the informer's cache keeps an Application
// with an open session or a pause mark whole (but for managedFields), and
// of every other only the metadata that decides whether it is queued.
func TestTheCacheKeepsWhatDecides(t *testing.T) {
	app := func(annotations map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": "web", "namespace": "argocd", "annotations": annotations,
				"managedFields": []any{map[string]any{"manager": "argocd-application-controller"}}},
			"spec":   map[string]any{"project": "default"},
			"status": map[string]any{"resources": []any{map[string]any{"kind": "Deployment", "name": "web"}}},
		}}
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]any
		whole       bool
	}{
		{"no session", nil, false},
		{"another annotation", map[string]any{"example.com/x": "y"}, false},
		{"an open session", map[string]any{breakglass.SessionAnnotation: `{"id":"s"}`}, true},
		{"a paused parent", map[string]any{breakglass.PausedByAnnotation: "child/s"}, true},
	} {
		got, err := slim(app(tc.annotations))
		if err != nil {
			t.Fatal(err)
		}
		u := got.(*unstructured.Unstructured)
		_, hasStatus := u.Object["status"]
		if hasStatus != tc.whole || u.GetName() != "web" || u.GetNamespace() != "argocd" || len(u.GetAnnotations()) != len(tc.annotations) {
			t.Errorf("%s: kept %v, want whole=%v with its metadata", tc.name, u.Object, tc.whole)
		}
		if len(u.GetManagedFields()) > 0 {
			t.Errorf("%s: kept managedFields", tc.name)
		}
	}
	if got, _ := slim("not an object"); got != "not an object" {
		t.Errorf("a tombstone was changed: %v", got)
	}
}
