package breakglass

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// sessionRecords is an honest session's log: alice opens session s on
// argocd/web, pauses its parent root and web, patches the replicas (Argo
// CD sees it) and files OPS-1.
func sessionRecords(id string, app audit.AppRef) []*audit.Record {
	policy := map[string]any{"automated": map[string]any{"selfHeal": true}}
	alice := audit.Actor{Username: "alice"}
	root := audit.AppRef{Namespace: "argocd", Name: "root"}
	saw := true
	ok := audit.Outcome{Status: audit.StatusSucceeded}
	return []*audit.Record{
		{Seq: 1, Event: audit.EventPlanned, Session: id, Actor: alice, Application: &app, Reason: "5xx",
			SyncPolicy: &audit.SyncPolicy{Before: policy}, Git: &audit.Git{Revision: "abc"}, Outcome: audit.Outcome{Status: audit.StatusStarted}},
		{Seq: 2, Event: audit.EventPaused, Session: id, Actor: alice, Application: &root, SyncPolicy: &audit.SyncPolicy{Before: policy}, Outcome: audit.Outcome{Status: audit.StatusStarted}},
		{Seq: 3, Event: audit.EventPaused, Session: id, Actor: alice, Application: &app, SyncPolicy: &audit.SyncPolicy{Before: policy}, Outcome: ok},
		{Seq: 4, ID: "r4", Event: audit.EventPatched, Session: id, Actor: alice, Application: &app, Target: &deployment, OutOfSync: &saw,
			Patch: &audit.Patch{Type: "merge"}, Changes: []audit.Change{{Path: "/spec/replicas", Before: 1.0, After: 2.0}}, Outcome: ok},
		{Seq: 5, Event: audit.EventTicketed, Session: id, Actor: alice, Application: &app, Ticket: &audit.Ticket{Key: "OPS-1"}, Outcome: ok},
	}
}

func TestSessionMismatches(t *testing.T) {
	web := audit.AppRef{Namespace: "argocd", Name: "web"}
	records := sessionRecords("s", web)
	logged := foldSession(web, "s", records, records)
	policy := map[string]any{"automated": map[string]any{"selfHeal": true}}
	saved, _ := json.Marshal(policy)
	saw := true
	honest := func() *Session {
		return &Session{ID: "s", OpenedBy: "alice", SavedSyncPolicy: saved, GitRevision: "abc", PausedParents: []PausedParent{{Name: "root", Namespace: "argocd", SavedSyncPolicy: saved}},
			Patches: []SessionPatch{{Target: deployment, Type: "merge", ArgoSawPatch: &saw,
				Fields: []PatchedField{{Path: "/spec/replicas", Before: digest(1), After: digest(2)}}}}, Ticket: "OPS-1"}
	}
	if bad := logged.mismatches(web, honest()); len(bad) != 0 {
		t.Fatalf("an honest session: %v", bad)
	}
	for name, tc := range map[string]struct {
		edit func(*Session)
		want string
	}{
		"emptied patches":  {func(s *Session) { s.Patches = nil }, "patches (annotation 0, audit log 1)"},
		"other path":       {func(s *Session) { s.Patches[0].Fields[0].Path = "/spec/paused" }, "patches[0].fields"},
		"edited digest":    {func(s *Session) { s.Patches[0].Fields[0].After = digest(3) }, "patches[0].fields"},
		"argoSawPatch":     {func(s *Session) { no := false; s.Patches[0].ArgoSawPatch = &no }, "patches[0].argoSawPatch"},
		"git revision":     {func(s *Session) { s.GitRevision = "def" }, "gitRevision"},
		"opener":           {func(s *Session) { s.OpenedBy = "mallory" }, "openedBy"},
		"saved policy":     {func(s *Session) { s.SavedSyncPolicy = []byte(`null`) }, "savedSyncPolicy"},
		"parent's policy":  {func(s *Session) { s.PausedParents[0].SavedSyncPolicy = []byte(`{}`) }, "pausedParents"},
		"parent dropped":   {func(s *Session) { s.PausedParents = nil }, "pausedParents"},
		"unrelated ticket": {func(s *Session) { s.Ticket = "OPS-999" }, "ticket (annotation OPS-999"},
		// "pausing" hid the session from the re-enabled-sync check and
		// refused every join, with no mismatch named.
		"state behind the log": {func(s *Session) { s.State = StatePausing }, `state (annotation "pausing", audit log patched)`},
		"a pending patch no run sends": {func(s *Session) {
			s.Patches = append(s.Patches, SessionPatch{ID: "x", Target: deployment, Pending: true})
		}, "pending patches (annotation 1, audit log 0 runs in flight)"},
	} {
		s := honest()
		tc.edit(s)
		if bad := strings.Join(logged.mismatches(web, s), "; "); !strings.Contains(bad, tc.want) {
			t.Errorf("%s: mismatches %q, want %q", name, bad, tc.want)
		}
	}
	// What is acted on comes from the log, whatever the annotation says.
	fromLog := logged.session(&Session{ID: "s", SavedSyncPolicy: []byte(`null`), Ticket: "OPS-999",
		Patches: []SessionPatch{{Target: deployment, Fields: []PatchedField{{Path: "/spec/replicas", After: digest(3)}}}}})
	if string(fromLog.SavedSyncPolicy) != string(saved) || len(fromLog.PausedParents) != 1 || fromLog.Ticket != "OPS-1" ||
		fromLog.OpenedBy != "alice" || fromLog.GitRevision != "abc" || len(fromLog.Patches) != 1 ||
		fromLog.Patches[0].Fields[0].After != digest(2) || fromLog.Patches[0].ArgoSawPatch == nil || !*fromLog.Patches[0].ArgoSawPatch ||
		fromLog.State != StatePatched {
		t.Errorf("session from the log = %+v", fromLog)
	}
	if bad := foldSession(web, "s", nil, nil).mismatches(web, honest()); len(bad) != 1 || !strings.Contains(bad[0], "no verified audit record") {
		t.Errorf("a session without records: %v", bad)
	}
}

// TestReplayedSessions: the annotation pointing at a session that is not
// the Application's open one in the log is refused, naming why.
func TestReplayedSessions(t *testing.T) {
	web := audit.AppRef{Namespace: "argocd", Name: "web"}
	other := audit.AppRef{Namespace: "argocd", Name: "other"}
	aborted := func(id string, app audit.AppRef) []*audit.Record {
		rs := sessionRecords(id, app)[:1]
		return append(rs, &audit.Record{Seq: 9, Event: audit.EventAborted, Session: id, Actor: rs[0].Actor, Application: &app, Outcome: audit.Outcome{Status: audit.StatusFailed}})
	}
	open := sessionRecords("s", web)
	forged := []*audit.Record{{Seq: 20, Event: audit.EventPlanned, Session: "t", Actor: audit.Actor{Username: "mallory"}, Application: &web,
		SyncPolicy: &audit.SyncPolicy{Before: nil}, Outcome: audit.Outcome{Status: audit.StatusStarted}}}
	for name, tc := range map[string]struct {
		id             string
		records, ofApp []*audit.Record
		want           string
	}{
		"another application's closed session": {"x", aborted("x", other), open, "opened on application argocd/other"},
		"this application's closed session":    {"x", aborted("x", web), append(aborted("x", web), open...), "was closed by breakglass.aborted"},
		"a newer session beside the open one":  {"t", forged, append(open, forged...), "the audit log's open session on web is s"},
	} {
		bad := foldSession(web, tc.id, tc.records, tc.ofApp).mismatches(web, &Session{ID: tc.id})
		if len(bad) != 1 || !strings.Contains(bad[0], tc.want) {
			t.Errorf("%s: mismatches %q, want %q", name, bad, tc.want)
		}
	}
	// A patch record by someone outside the session is not the session's.
	withForeign := append(sessionRecords("s", web), &audit.Record{Seq: 6, Event: audit.EventPatched, Session: "s",
		Actor: audit.Actor{Username: "mallory"}, Application: &web, Target: &deployment, Patch: &audit.Patch{Type: "merge"}, Outcome: audit.Outcome{Status: audit.StatusSucceeded}})
	if got := len(foldSession(web, "s", withForeign, withForeign).patches); got != 1 {
		t.Errorf("patches with a foreign record: %d, want 1", got)
	}
}

// TestRepairedIsTheLogs (issue 32): a join writes the annotation back from
// the log, whatever was edited in it behind the session, keeping only what
// the log cannot know: queued Jira work, the saved notice, and the marks
// of runs the log has in flight.
func TestRepairedIsTheLogs(t *testing.T) {
	web := audit.AppRef{Namespace: "argocd", Name: "web"}
	records := sessionRecords("s", web)
	logged := foldSession(web, "s", records, records)
	later := records[0].Time.Add(48 * time.Hour)
	edited := &Session{ID: "s", State: StatePausing, OpenedBy: "mallory", SavedSyncPolicy: []byte(`null`), Expires: &later, AutoRestore: true,
		Patches: []SessionPatch{
			{ID: "p1", Target: deployment, Type: "merge", Fields: []PatchedField{{Path: "/spec/replicas", After: digest(3)}}},
			{ID: "forged", Target: deployment, Type: "merge", Pending: true},
		},
		TicketPending: "jira down", SavedNotice: map[string]string{"notice.argocd.argoproj.io/content": "team"}}
	if len(logged.differences(edited, logged.session(edited))) == 0 {
		t.Fatal("the edited annotation agrees with the log")
	}
	r := logged.repaired(edited)
	if bad := logged.differences(r, logged.session(r)); len(bad) != 0 {
		t.Errorf("the annotation written back still disagrees: %v", bad)
	}
	if r.TicketPending != "jira down" || r.SavedNotice["notice.argocd.argoproj.io/content"] != "team" || r.Patches[0].ID != "p1" {
		t.Errorf("what only the annotation knows was lost: %+v", r)
	}
	// A join whose patch landed marks it done before it records it.
	join := &audit.Record{Seq: 6, ID: "r6", Event: audit.EventPlanned, Session: "s", Actor: audit.Actor{Username: "bob"}, Application: &web, Target: &deployment,
		Patch: &audit.Patch{Type: "merge"}, Changes: []audit.Change{{Path: "/spec/replicas", Before: 2.0, After: 4.0}}, Outcome: audit.Outcome{Status: audit.StatusStarted}}
	inFlight := append(sessionRecords("s", web), join)
	marked := logged.repaired(edited)
	marked.Patches = append(marked.Patches, SessionPatch{ID: "r6", Target: deployment, Type: "merge", Fields: loggedFields(join)})
	if r := foldSession(web, "s", inFlight, inFlight).repaired(marked); len(r.Patches) != 2 || r.Patches[1].ID != "r6" || r.Patches[1].Pending {
		t.Errorf("the landed mark of a run in flight: %+v", r.Patches)
	}
}
