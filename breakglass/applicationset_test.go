package breakglass

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/internal/jsontest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestIgnoresSyncPolicy(t *testing.T) {
	set := func(spec string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": jsontest.Decode(t, spec)}}
	}
	tests := []struct {
		spec string
		want bool
	}{
		{`{}`, false},
		{`{"syncPolicy":{"applicationsSync":"create-only"}}`, true},
		{`{"syncPolicy":{"applicationsSync":"create-update"}}`, false},
		{`{"ignoreApplicationDifferences":[{"jsonPointers":["/spec/syncPolicy"]}]}`, true},
		{`{"ignoreApplicationDifferences":[{"jsonPointers":["/spec/source/targetRevision"]}]}`, false},
		{`{"ignoreApplicationDifferences":[{"name":"web","jqPathExpressions":[".spec.syncPolicy"]}]}`, true},
		{`{"ignoreApplicationDifferences":[{"name":"other","jsonPointers":["/spec/syncPolicy"]}]}`, false},
	}
	for _, tt := range tests {
		if got := ignoresSyncPolicy(argocd.AppSet{Unstructured: set(tt.spec)}, "web"); got != tt.want {
			t.Errorf("ignoresSyncPolicy(%s) = %v, want %v", tt.spec, got, tt.want)
		}
	}
}

// A held session writes the child's ignoreDifferences: an ApplicationSet
// rewriting it would drop the hold.
func TestApplicationSetsThatUndoTheHold(t *testing.T) {
	set := func(spec string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": jsontest.Decode(t, spec)}}
		u.SetName("web-set")
		return u
	}
	keep := `"preservedFields":{"annotations":["kubectl-gitops.io/session"]}`
	if err := undoesPause(argocd.AppSet{Unstructured: set(`{"ignoreApplicationDifferences":[{"jsonPointers":["/spec/syncPolicy"]}],` + keep + `}`)}, "web", true); err == nil || !strings.Contains(err.Error(), ignoreHoldSnippet) {
		t.Errorf("an ApplicationSet rewriting ignoreDifferences: %v", err)
	}
	if err := undoesPause(argocd.AppSet{Unstructured: set(`{"ignoreApplicationDifferences":[{"jsonPointers":["/spec/syncPolicy","/spec/ignoreDifferences"]}],` + keep + `}`)}, "web", true); err != nil {
		t.Errorf("an ApplicationSet leaving both alone: %v", err)
	}
}

func TestApplicationSetsThatUndoThePause(t *testing.T) {
	set := func(spec string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": jsontest.Decode(t, spec)}}
		u.SetName("web-set")
		u.SetNamespace("argocd")
		return u
	}
	both := `"ignoreApplicationDifferences":[{"jsonPointers":["/spec/syncPolicy"]}],"preservedFields":{"annotations":["kubectl-gitops.io/session"]}`
	for _, tc := range []struct {
		name, spec, want string
	}{
		{"rewrites everything", `{}`, ignoreSyncPolicySnippet + " and " + preserveSessionSnippet},
		{"ignores the policy, drops the session", `{"ignoreApplicationDifferences":[{"jsonPointers":["/spec/syncPolicy"]}]}`, "drop its session: add to its spec (kubectl edit applicationset web-set -n argocd): " + preserveSessionSnippet},
		{"keeps both", `{` + both + `}`, ""},
		{"ignores all annotations by jq", `{"ignoreApplicationDifferences":[{"jqPathExpressions":[".spec.syncPolicy",".metadata.annotations"]}]}`, ""},
		{"a rule for another app", `{"ignoreApplicationDifferences":[{"name":"other","jsonPointers":["/spec","/metadata"]}]}`, ignoreSyncPolicySnippet},
		{"create-only", `{"syncPolicy":{"applicationsSync":"create-only"}}`, ""},
		{"create-delete", `{"syncPolicy":{"applicationsSync":"create-delete"}}`, ""},
		{"create-update", `{"syncPolicy":{"applicationsSync":"create-update"}}`, ignoreSyncPolicySnippet},
		{"RollingSync, whatever it ignores", `{"strategy":{"type":"RollingSync"},` + both + `}`, "RollingSync strategy, which starts sync operations itself"},
	} {
		err := undoesPause(argocd.AppSet{Unstructured: set(tc.spec)}, "web", false)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrOwnedByApplicationSet) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
