package breakglass

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-gitops/kubectl-gitops/audit"

	"github.com/kubectl-gitops/kubectl-gitops/internal/jsontest"
)

func TestPausedPolicyKeepsEverythingButAutomated(t *testing.T) {
	policy := jsontest.Decode(t, `{"automated":{"prune":true,"selfHeal":true},"syncOptions":["A=true"],"retry":{"limit":2}}`)
	got := pausedPolicy(policy, false).(map[string]any)
	if _, ok := got["automated"]; ok || !reflect.DeepEqual(got["retry"], policy["retry"]) || !reflect.DeepEqual(got["syncOptions"], policy["syncOptions"]) {
		t.Errorf("pausedPolicy = %v", got)
	}
	disabled := pausedPolicy(policy, true).(map[string]any)
	want := map[string]any{"prune": true, "selfHeal": true, "enabled": false}
	if !reflect.DeepEqual(disabled["automated"], want) || !reflect.DeepEqual(disabled["retry"], policy["retry"]) {
		t.Errorf("pausedPolicy with enabled = %v, want automated %v", disabled, want)
	}
	if _, ok := policy["automated"].(map[string]any)["enabled"]; ok {
		t.Errorf("pausedPolicy changed its input")
	}
	if _, ok := pausedPolicy(jsontest.Decode(t, `{"syncOptions":["A=true"]}`), true).(map[string]any)["automated"]; ok {
		t.Errorf("a manual policy gained automated")
	}
	if pausedPolicy(nil, true) != nil {
		t.Errorf("no policy should stay no policy")
	}
}

func TestMergePatchForReplacesExactly(t *testing.T) {
	current := jsontest.Decode(t, `{"syncOptions":["A=true"],"retry":{"limit":2,"backoff":{"duration":"5s"}},"added":"meanwhile"}`)
	saved := jsontest.Decode(t, `{"automated":{"prune":true},"syncOptions":["A=true"],"retry":{"limit":2}}`)
	patch := mergePatchFor(current, saved)
	want := jsontest.Decode(t, `{"automated":{"prune":true},"retry":{"backoff":null},"added":null}`)
	if !reflect.DeepEqual(patch, want) {
		t.Errorf("mergePatchFor = %v, want %v", patch, want)
	}
	if mergePatchFor(current, nil) != nil {
		t.Errorf("a nil policy must delete syncPolicy")
	}
}

// TestASessionBeforeTheCutIsNotJudged (review of issue 49's unrecorded
// close): the controller prunes closed sessions' records, but their
// Applications keep the last-session mark; such a mark is no session
// "the log never opened". A session whose id's time is after the cut must
// be in the log; in a log never pruned every session must.
func TestASessionBeforeTheCutIsNotJudged(t *testing.T) {
	ctx := context.Background()
	kube := kubefake.NewSimpleClientset()
	e := &Engine{Audit: audit.NewConfigMapStore(kube, "argocd")}
	if before, err := e.beforeCut(ctx, "20261101-000000-old"); before || err != nil {
		t.Errorf("a log never pruned: before the cut %t, %v", before, err)
	}
	cut := audit.Checkpoint{Seq: 10, Hash: "h", Records: 10, Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), KeyID: "k"}
	start := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: audit.StartName, Namespace: "argocd"}, Data: map[string]string{"payload": cut.Payload(), "signature": "x"}}
	if _, err := kube.CoreV1().ConfigMaps("argocd").Create(ctx, start, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"20261101-000000-old": true, "20261207-030000-new": false, "no-time-in-it": true} {
		if before, err := e.beforeCut(ctx, id); before != want || err != nil {
			t.Errorf("session %s: before the cut %t, %v; want %t", id, before, err, want)
		}
	}
}
