package breakglass

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

func TestSessionMismatches(t *testing.T) {
	policy := map[string]any{"automated": map[string]any{"selfHeal": true}}
	logged := &loggedSession{
		savedPolicy: policy, hasPlanned: true,
		parents: map[string]any{"root": policy},
		patches: []*audit.Record{{ID: "r1", Target: &deployment, Changes: []audit.Change{{Path: "/spec/replicas"}}}},
		tickets: map[string]bool{"OPS-1": true},
	}
	saved, _ := json.Marshal(policy)
	honest := func() *Session {
		return &Session{ID: "s", SavedSyncPolicy: saved, PausedParents: []PausedParent{{Name: "root", SavedSyncPolicy: saved}},
			Patches: []SessionPatch{{Target: deployment, Fields: []PatchedField{{Path: "/spec/replicas"}}}}, Ticket: "OPS-1"}
	}
	if bad := logged.mismatches(honest()); len(bad) != 0 {
		t.Fatalf("an honest session: %v", bad)
	}
	for name, tc := range map[string]struct {
		edit func(*Session)
		want string
	}{
		"emptied patches":  {func(s *Session) { s.Patches = nil }, "patches (annotation 0, audit log 1)"},
		"other path":       {func(s *Session) { s.Patches[0].Fields[0].Path = "/spec/paused" }, "patches[0]"},
		"saved policy":     {func(s *Session) { s.SavedSyncPolicy = []byte(`null`) }, "savedSyncPolicy"},
		"parent's policy":  {func(s *Session) { s.PausedParents[0].SavedSyncPolicy = []byte(`{}`) }, "pausedParents"},
		"parent dropped":   {func(s *Session) { s.PausedParents = nil }, "pausedParents"},
		"unrelated ticket": {func(s *Session) { s.Ticket = "OPS-999" }, "ticket (annotation OPS-999"},
	} {
		s := honest()
		tc.edit(s)
		if bad := strings.Join(logged.mismatches(s), "; "); !strings.Contains(bad, tc.want) {
			t.Errorf("%s: mismatches %q, want %q", name, bad, tc.want)
		}
	}
	fixed := logged.fromLog(&Session{ID: "s", SavedSyncPolicy: []byte(`null`), Ticket: "OPS-999"})
	if string(fixed.SavedSyncPolicy) != string(saved) || len(fixed.PausedParents) != 1 || fixed.Ticket != "" {
		t.Errorf("fromLog = %+v", fixed)
	}
	if bad := (&loggedSession{}).mismatches(honest()); len(bad) != 1 || !strings.Contains(bad[0], "no verified audit record") {
		t.Errorf("a session without records: %v", bad)
	}
}

func TestUnchangedSessionGuardsRestore(t *testing.T) {
	app := func(s *Session) *unstructured.Unstructured {
		v, _ := json.Marshal(s)
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetAnnotations(map[string]string{SessionAnnotation: string(v)})
		return u
	}
	evaluated := &Session{ID: "s", Patches: []SessionPatch{{ID: "a"}}}
	check := unchangedSession("web", evaluated)
	if err := check(app(evaluated)); err != nil {
		t.Errorf("the session restore evaluated: %v", err)
	}
	for name, s := range map[string]*Session{
		"a patch landed":         {ID: "s", Patches: []SessionPatch{{ID: "a"}, {ID: "b"}}},
		"a patch being sent":     {ID: "s", Patches: []SessionPatch{{ID: "a"}, {ID: "b", Pending: true}}},
		"another session opened": {ID: "t", Patches: []SessionPatch{{ID: "a"}}},
	} {
		if err := check(app(s)); !errors.Is(err, ErrConflict) {
			t.Errorf("%s: %v", name, err)
		}
	}
	joined := &Session{ID: "s", Patches: []SessionPatch{{ID: "a"}, {ID: "b"}}}
	joined.dropPatch("a")
	if len(joined.Patches) != 1 || joined.patchNamed("b") == nil || joined.patchNamed("a") != nil {
		t.Errorf("dropPatch: %+v", joined.Patches)
	}
}
