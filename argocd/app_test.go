package argocd

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Argo CD stamps status.reconciledAt on every periodic reconcile of every
// Application: were that a change, an idle controller would read the audit
// log of every open session every few minutes.
func TestFingerprintIgnoresReconcileStampsOnly(t *testing.T) {
	app := func(edit func(map[string]any)) App {
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
		return App{&unstructured.Unstructured{Object: obj}}
	}
	base := app(nil).Fingerprint()
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
		if got := app(tc.edit).Fingerprint() == base; got != tc.same {
			t.Errorf("%s: same state %v, want %v", tc.name, got, tc.same)
		}
	}
}
