package breakglass

import (
	"reflect"
	"testing"

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
