package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Argo CD stamps status.reconciledAt on every periodic reconcile of every
// Application: were that a change, an idle controller would read the audit
// log of every open session every few minutes.
func TestStateOfIgnoresReconcileStampsOnly(t *testing.T) {
	app := func(edit func(map[string]any)) *unstructured.Unstructured {
		obj := map[string]any{
			"metadata": map[string]any{"name": "web", "namespace": "argocd", "resourceVersion": "1", "generation": int64(3),
				"annotations":   map[string]any{"kubectl-gitops.io/session": `{"id":"s1"}`},
				"managedFields": []any{map[string]any{"manager": "argocd-application-controller", "time": "2026-12-03T10:00:00Z"}}},
			"spec": map[string]any{"syncPolicy": map[string]any{"automated": map[string]any{"enabled": false}}},
			"status": map[string]any{"reconciledAt": "2026-12-03T10:00:00Z", "sync": map[string]any{"status": "OutOfSync", "revision": "a"},
				"conditions": []any{
					map[string]any{"type": "SharedResourceWarning", "message": "ConfigMap/web-config is part of applications argocd/web and other", "lastTransitionTime": "2026-12-03T10:00:00Z"},
					map[string]any{"type": "SharedResourceWarning", "message": "Deployment/web is part of applications argocd/web and other", "lastTransitionTime": "2026-12-03T10:00:00Z"},
				}},
		}
		if edit != nil {
			edit(obj)
		}
		return &unstructured.Unstructured{Object: obj}
	}
	base := stateOf(app(nil))
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		same bool
	}{
		{"a periodic reconcile", func(o map[string]any) {
			o["status"].(map[string]any)["reconciledAt"] = "2026-12-03T10:03:00Z"
			o["metadata"].(map[string]any)["resourceVersion"] = "2"
			o["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{"manager": "argocd-application-controller", "time": "2026-12-03T10:03:00Z"}}
		}, true},
		{"Argo CD re-stamped the second condition of a type", func(o map[string]any) {
			o["status"].(map[string]any)["conditions"].([]any)[1].(map[string]any)["lastTransitionTime"] = "2026-12-03T10:03:00Z"
		}, true},
		{"a condition's message changed", func(o map[string]any) {
			o["status"].(map[string]any)["conditions"].([]any)[1].(map[string]any)["message"] = "ComparisonError: rpc error"
		}, false},
		{"Git moved", func(o map[string]any) { o["status"].(map[string]any)["sync"].(map[string]any)["revision"] = "b" }, false},
		{"the session changed", func(o map[string]any) {
			o["metadata"].(map[string]any)["annotations"] = map[string]any{"kubectl-gitops.io/session": `{"id":"s1","state":"patched"}`}
		}, false},
		{"sync turned back on", func(o map[string]any) {
			o["spec"] = map[string]any{"syncPolicy": map[string]any{"automated": map[string]any{"enabled": true}}}
		}, false},
	} {
		if got := stateOf(app(tc.edit)) == base; got != tc.same {
			t.Errorf("%s: same state %v, want %v", tc.name, got, tc.same)
		}
	}
}

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
