package breakglass

import (
	"encoding/json"
	"strings"
	"testing"

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
