package breakglass

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/internal/jsontest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestUnchangedSessionGuardsRestore(t *testing.T) {
	app := func(s *Session) argocd.App {
		v, _ := json.Marshal(s)
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetAnnotations(map[string]string{SessionAnnotation: string(v)})
		return argocd.AppOf(u)
	}
	evaluated := &Session{ID: "s", Patches: []SessionPatch{{ID: "a"}, {ID: "forged", Pending: true}}}
	// The log has no run in flight for the forged pending mark: it does
	// not hold the restore (it used to, for good).
	logged := &Session{ID: "s", Patches: []SessionPatch{{ID: "a"}}}
	check := unchangedSession("web", evaluated, logged)
	if err := check(app(evaluated)); err != nil {
		t.Errorf("the session restore evaluated: %v", err)
	}
	inFlight := &Session{ID: "s", Patches: []SessionPatch{{ID: "a"}, {ID: "forged", Pending: true}}}
	if err := unchangedSession("web", evaluated, inFlight)(app(evaluated)); !errors.Is(err, argocd.ErrConflict) {
		t.Errorf("a patch being sent by a run the log has in flight: %v", err)
	}
	for name, s := range map[string]*Session{
		"a patch landed":         {ID: "s", Patches: []SessionPatch{{ID: "a"}, {ID: "b"}}},
		"a patch being sent":     {ID: "s", Patches: []SessionPatch{{ID: "a"}, {ID: "b", Pending: true}}},
		"another session opened": {ID: "t", Patches: []SessionPatch{{ID: "a"}}},
	} {
		if err := check(app(s)); !errors.Is(err, argocd.ErrConflict) {
			t.Errorf("%s: %v", name, err)
		}
	}
	joined := &Session{ID: "s", Patches: []SessionPatch{{ID: "a"}, {ID: "b"}}}
	joined.dropPatch("a")
	if len(joined.Patches) != 1 || joined.patchNamed("b") == nil || joined.patchNamed("a") != nil {
		t.Errorf("dropPatch: %+v", joined.Patches)
	}
}

// TestParseSessionWantsTheIDFirst: the admission policy compares ids by
// the annotation's prefix, so a value whose id is spelt later (or twice,
// the last one winning in Go) is refused.
func TestParseSessionWantsTheIDFirst(t *testing.T) {
	if s, err := ParseSession(`{"id":"a","state":"paused"}`); err != nil || s.ID != "a" {
		t.Fatalf("the tool's own form: %v %v", s, err)
	}
	for _, v := range []string{`{"state":"paused","id":"a"}`, `{"id":"a","state":"paused","id":"b"}`, `{"id":""}`, ` {"id":"a"}`} {
		if _, err := ParseSession(v); err == nil {
			t.Errorf("%s: accepted", v)
		}
	}
}

// TestLegacySessionsKeepTheirChanges: a session written by v0.1 kept
// values, not digests; it must not read as having changed nothing (which
// would let restore revert the fix).
func TestLegacySessionsKeepTheirChanges(t *testing.T) {
	s, err := ParseSession(`{"id":"s","patches":[{"target":{"kind":"Deployment"},"changes":[` +
		`{"path":"/spec/replicas","before":2,"after":6},{"path":"/data/password","before":"[REDACTED]","after":"[REDACTED]"}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	f := s.Patches[0].Fields
	if len(f) != 2 || f[0].After != digest(6) || !f[1].Secret || s.Patches[0].LegacyChanges != nil {
		t.Fatalf("legacy changes became %+v", f)
	}
	if got, _ := compareFields(SessionPatch{}, jsontest.Decode(t, `{"spec":{}}`), "Synced"); got != GitWaiting {
		t.Errorf("a patch with no fields counted as %s", got)
	}
}
