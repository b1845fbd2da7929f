//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// The attacks of this file are made by an on-call user with plain kubectl
// (and, for records in their own name, the audit library with their own
// credentials): what the API server lets through, the verified log must
// make harmless.

// repoint makes app's session annotation hold value in two writes: the
// session goes, then a session appears.
func repoint(t *testing.T, u *user, app, value string) {
	t.Helper()
	u.kubectl("-n", testEnv.ArgoNamespace, "annotate", "application", app, breakglass.SessionAnnotation+"-")
	u.kubectl("-n", testEnv.ArgoNamespace, "annotate", "application", app, breakglass.SessionAnnotation+"="+value)
}

// appendAs writes r to the audit log as user, in that user's own name,
// and plants it: the breaks verify finds there are the test's.
func appendAs(t *testing.T, user string, r *audit.Record) *audit.Record {
	t.Helper()
	r.Actor = audit.Actor{Username: user}
	if err := audit.NewConfigMapStore(kubeFor(t, user), testEnv.ArgoNamespace).Append(context.Background(), r); err != nil {
		t.Fatalf("appending as %s: %v", user, err)
	}
	plant(audit.RecordName(r.Seq))
	return r
}

// TestReplayedSessionsAreRefused: an Application has an open session whose
// patch is live. Its annotation is made to name a closed session of
// another Application, a closed session of its own, and a session another
// on-call user opened beside the open one in the log. A plain restore used
// to take such a session at its word, re-enable sync and let self-heal
// revert the fix. The API server no longer lets an on-call user swap the
// session of a paused Application; where it cannot tell (Argo CD < 3.1, a
// cluster without the policy: here an admin makes the swap), restore and
// status refuse each by name, nothing changes, and a forced restore acts
// on the session the log has open.
func TestReplayedSessionsAreRefused(t *testing.T) {
	e := environment(t)
	ctx := context.Background()
	deployApp(t, "tr-live")
	deployApp(t, "tr-elsewhere")
	oncall := newUser(t, env.Oncall.Name)

	mustRun(t, oncall, 0, "breakglass", "tr-elsewhere", "deployment/web", "--replicas", "4", "--reason", "other app", "-y")
	otherSession := sessionOf(t, "tr-elsewhere")
	mustRun(t, oncall, 0, "restore", "tr-elsewhere", "--force", "--reason", "done", "-y")
	mustRun(t, oncall, 0, "breakglass", "tr-live", "deployment/web", "--replicas", "4", "--reason", "earlier", "-y")
	earlier := sessionOf(t, "tr-live")
	mustRun(t, oncall, 0, "restore", "tr-live", "--force", "--reason", "done", "-y")
	waitReverted(t, "tr-live", 4)
	mustRun(t, oncall, 0, "breakglass", "tr-live", "deployment/web", "--replicas", "3", "--reason", "the live fix", "-y")
	live := sessionOf(t, "tr-live")
	restoredBefore := countEvents(t, audit.EventRestored)

	// lead opens a session of their own on tr-live in the log, in their
	// own name, beside the open one.
	forged := appendAs(t, env.Lead.Name, &audit.Record{Event: audit.EventPlanned, Session: "20261203-000000-forge",
		Application: &audit.AppRef{Namespace: e.ArgoNamespace, Name: "tr-live"}, Reason: "mine now",
		SyncPolicy: &audit.SyncPolicy{Before: fullPolicy}, Outcome: audit.Outcome{Status: audit.StatusStarted}})

	pointing := func(s *breakglass.Session) string {
		v, _ := json.Marshal(breakglass.Session{ID: s.ID, State: breakglass.StatePausing, OpenedBy: s.OpenedBy, SavedSyncPolicy: s.SavedSyncPolicy})
		return string(v)
	}
	lead := &breakglass.Session{ID: forged.Session, OpenedBy: env.Lead.Name, SavedSyncPolicy: mustJSON(fullPolicy)}
	if testEnv.Argo.Major() >= 3 {
		_, errOut, code := oncall.run("kubectl", "-n", e.ArgoNamespace, "annotate", "application", "tr-live", breakglass.SessionAnnotation+"-")
		if code == 0 || !strings.Contains(errOut, "is paused (automated.enabled: false): its break-glass session comes only with the pause") {
			t.Fatalf("on-call removed the session of a paused application: exit %d, %s", code, errOut)
		}
	}
	admin := newUser(t, env.Admin.Name)
	for _, tc := range []struct {
		name    string
		session *breakglass.Session
		want    string
	}{
		{"another application's closed session", otherSession, "was opened on application " + e.ArgoNamespace + "/tr-elsewhere, not on " + e.ArgoNamespace + "/tr-live"},
		{"this application's closed session", earlier, "session " + earlier.ID + " was closed by breakglass.forced"},
		{"another opener's session beside the open one", lead, "the audit log's open session on tr-live is " + live.ID},
	} {
		repoint(t, admin, "tr-live", pointing(tc.session))
		_, errOut := mustRun(t, oncall, 1, "restore", "tr-live", "-y")
		if !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "nothing was changed") {
			t.Errorf("%s: restore said %q, want %q", tc.name, errOut, tc.want)
		}
		if st := statusJSON(t, oncall, "tr-live"); st.Ready || !strings.Contains(st.Untrusted, tc.want) {
			t.Errorf("%s: status says ready %v, untrusted %q", tc.name, st.Ready, st.Untrusted)
		}
		time.Sleep(2 * time.Second) // longer than self-heal takes to revert a fix once sync is back
		if got := replicasIn(ctx, t, "tr-live"); got != 3 {
			t.Fatalf("%s: the live fix was reverted: %d replicas", tc.name, got)
		}
		if got := syncPolicyOf(t, "tr-live"); !reflect.DeepEqual(runtimeDeepCopy(got), runtimeDeepCopy(pausedFullPolicy())) {
			t.Fatalf("%s: sync policy %v, want it still paused", tc.name, got)
		}
	}
	if n := countEvents(t, audit.EventRestored) - restoredBefore; n != 0 {
		t.Errorf("%d restored records after the annotation was repointed", n)
	}

	// Forced, the restore acts on the session the log has open there.
	mustRun(t, oncall, 0, "restore", "tr-live", "--force", "--reason", "annotation was replaced", "-y")
	records := sessionRecords(t, live.ID)
	last := records[len(records)-1]
	if last.Event != audit.EventForced || !strings.Contains(last.Outcome.Error, "open session on tr-live is "+live.ID) {
		t.Errorf("the forced restore was recorded as %s in session %s (%q), want forced in %s", last.Event, last.Session, last.Outcome.Error, live.ID)
	}
	if got := syncPolicyOf(t, "tr-live"); !reflect.DeepEqual(runtimeDeepCopy(got), runtimeDeepCopy(fullPolicy)) {
		t.Errorf("restored policy %v, want the live session's saved one", got)
	}
	assertChainIntact(t, oncall)
}

// TestEditedDigestAndSightingAreRefused: the annotation's digests and
// argoSawPatch were never compared with the records, so an edited digest
// could make an unseen patch read as caught up. Both are the log's now:
// restore still waits for Git, naming the edit.
func TestEditedDigestAndSightingAreRefused(t *testing.T) {
	e := environment(t)
	deployApp(t, "tr-digest")
	oncall := newUser(t, env.Oncall.Name)
	mustRun(t, oncall, 0, "breakglass", "tr-digest", "deployment/web", "--replicas", "3", "--reason", "digest", "-y")
	for name, edit := range map[string]func(*breakglass.Session){
		"digest":       func(s *breakglass.Session) { s.Patches[0].Fields[0].After = "sha256:" + strings.Repeat("0", 64) },
		"argoSawPatch": func(s *breakglass.Session) { no := false; s.Patches[0].ArgoSawPatch = &no },
	} {
		s := sessionOf(t, "tr-digest")
		honest, _ := json.Marshal(s)
		edit(s)
		edited, _ := json.Marshal(s)
		oncall.kubectl("-n", e.ArgoNamespace, "annotate", "application", "tr-digest", "--overwrite", breakglass.SessionAnnotation+"="+string(edited))
		_, errOut := mustRun(t, oncall, 1, "restore", "tr-digest", "-y")
		want := map[string]string{"digest": "patches[0].fields", "argoSawPatch": "patches[0].argoSawPatch"}[name]
		if !strings.Contains(errOut, want) {
			t.Errorf("%s edited: restore said %q, want %q", name, errOut, want)
		}
		oncall.kubectl("-n", e.ArgoNamespace, "annotate", "application", "tr-digest", "--overwrite", breakglass.SessionAnnotation+"="+string(honest))
	}
	if st := statusJSON(t, oncall, "tr-digest"); len(st.Mismatch) != 0 {
		t.Errorf("the honest annotation put back: mismatch %v", st.Mismatch)
	}
	mustRun(t, oncall, 0, "restore", "tr-digest", "--force", "--reason", "test over", "-y")
}

// TestTicketSyncFilesOnlyTheSessionsOwnRecords: ticket sync used to file a
// ticket from any record naming the session. A patch record another on-call
// user appends to someone else's session is not the session's: the ticket
// does not carry it, and verify names it.
func TestTicketSyncFilesOnlyTheSessionsOwnRecords(t *testing.T) {
	e := environment(t)
	deployApp(t, "tr-ticket")
	down := newUser(t, env.Oncall.Name, jiraEnv(unreachableURL(t), jiraToken)...)
	mustRun(t, down, 0, "breakglass", "tr-ticket", "deployment/web", "--replicas", "4", "--reason", "load", "-y")
	s := sessionOf(t, "tr-ticket")
	target := audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "tr-ticket", Name: "web"}
	foreign := appendAs(t, env.Lead.Name, &audit.Record{Event: audit.EventPatched, Session: s.ID, Reason: "FORGED-BY-LEAD",
		Application: &audit.AppRef{Namespace: e.ArgoNamespace, Name: "tr-ticket"}, Target: &target,
		Patch: &audit.Patch{Type: "merge", Body: `{"spec":{"replicas":99}}`}, Changes: []audit.Change{{Path: "/spec/replicas", Before: 4, After: 99}},
		Outcome: audit.Outcome{Status: audit.StatusSucceeded}})

	d := startJira(t)
	up := newUser(t, env.Oncall.Name, jiraEnv(d.URL, jiraToken)...)
	mustRun(t, up, 0, "ticket", "sync")
	issues := sessionIssues(d, s.ID)
	if len(issues) != 1 {
		t.Fatalf("ticket sync filed %d issues for session %s, want 1", len(issues), s.ID)
	}
	for _, r := range d.Requests() {
		if strings.Contains(r.Body, "FORGED-BY-LEAD") {
			t.Errorf("Jira was told of the foreign record: %s %s", r.Path, r.Body)
		}
	}
	out, _, _ := up.run("kubectl", "gitops", "audit", "verify")
	if want := "foreign-actor: " + audit.RecordName(foreign.Seq); !strings.Contains(out, want) {
		t.Errorf("audit verify does not name the foreign record (%s):\n%s", want, out)
	}
	mustRun(t, up, 0, "restore", "tr-ticket", "--force", "--reason", "test over", "-y")
	assertChainIntact(t, up)
}

// TestWrongHeadIsBlamedNotTheNextRecord: a head faked at its own position,
// or jumped one past the log, used to make the next honest record link to
// a bogus hash, and verify blamed that record. The writer links to the
// true tip now, says it found the head wrong, and verify names the head.
func TestWrongHeadIsBlamedNotTheNextRecord(t *testing.T) {
	e := environment(t)
	deployApp(t, "tr-head")
	oncall := newUser(t, env.Oncall.Name)
	plant("head")
	// First in its shard, the test would find no head at all.
	appendOwnRecord(t, e, "a head for the test")
	for i, tc := range []struct {
		name string
		head func(tip audit.HeadState) audit.HeadState
	}{
		{"faked hash", func(tip audit.HeadState) audit.HeadState {
			return audit.HeadState{Seq: tip.Seq, Hash: strings.Repeat("f", 64)}
		}},
		{"jumped one past the log", func(tip audit.HeadState) audit.HeadState {
			return audit.HeadState{Seq: tip.Seq + 1, Hash: strings.Repeat("e", 64)}
		}},
	} {
		tip := head(t)
		bogus := tc.head(tip)
		oncall.kubectl("-n", e.ArgoNamespace, "patch", "cm", audit.HeadName, "--type=merge", "-p", fmt.Sprintf(`{"data":{"seq":"%d","hash":"%s"}}`, bogus.Seq, bogus.Hash))
		mustRun(t, oncall, 0, "breakglass", "tr-head", "deployment/web", "--replicas", fmt.Sprint(5+i), "--reason", tc.name, "-y")
		records := sessionRecords(t, sessionOf(t, "tr-head").ID)
		first := records[0]
		if first.Seq != tip.Seq+1 || first.Prev != tip.Hash || first.HeadFound == nil || *first.HeadFound != bogus {
			t.Errorf("%s: the first record is %d linking to %.12s (head found %+v); want %d linking to %.12s, saying it found %+v",
				tc.name, first.Seq, first.Prev, first.HeadFound, tip.Seq+1, tip.Hash, bogus)
		}
		out, _, _ := oncall.run("kubectl", "gitops", "audit", "verify", "-o", "json")
		var rep audit.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		for _, b := range rep.Breaks {
			if b.Seq >= first.Seq && b.Name != "head" {
				t.Errorf("%s: verify blames %s", tc.name, b)
			}
		}
		mustRun(t, oncall, 0, "restore", "tr-head", "--force", "--reason", "test over", "-y")
		waitReverted(t, "tr-head", int32(5+i))
	}
	// Nor can the head be sent far past the log, where it would stay.
	far := head(t).Seq + 5000
	if _, errOut, code := oncall.run("kubectl", "-n", e.ArgoNamespace, "patch", "cm", audit.HeadName, "--type=merge", "-p", fmt.Sprintf(`{"data":{"seq":"%d"}}`, far)); code == 0 || !strings.Contains(errOut, "moves at most 1000 records at a time") {
		t.Errorf("on-call moved the head to %d: exit %d, %s", far, code, errOut)
	}
	// A reviewer appends one review at a time: its step is 10 (five
	// requests used to move the head 5000 records past the log).
	reviewer := newUser(t, env.Reviewer.Name)
	if _, errOut, code := reviewer.run("kubectl", "-n", e.ArgoNamespace, "patch", "cm", audit.HeadName, "--type=merge", "-p", fmt.Sprintf(`{"data":{"seq":"%d"}}`, head(t).Seq+11)); code == 0 || !strings.Contains(errOut, "moves at most 10 records at a time for reviewer") {
		t.Errorf("a reviewer moved the head 11 records: exit %d, %s", code, errOut)
	}
	if h := head(t); h.Seq < lastSeq(t) {
		t.Errorf("the head %d is behind the log", h.Seq)
	}
	assertChainIntact(t, oncall)
}

// lastSeq is the newest record's sequence number.
func lastSeq(t *testing.T) uint64 {
	n := uint64(0)
	for _, r := range allRecords(t) {
		n = max(n, r.Seq)
	}
	return n
}

// TestTeamNamespaceChildUnderAParentInArgoCD: an Application in a team
// namespace whose parent lives in Argo CD's own namespace. Argo CD names
// that parent without a namespace; reading argocd-cm and that name in
// --app-namespace found no parent, so the parent undid the pause. The
// parent is found, paused and restored now.
func TestTeamNamespaceChildUnderAParentInArgoCD(t *testing.T) {
	e := environment(t)
	ctx := context.Background()
	const teamNS, child = "team-trust", "tr-teamchild"
	appOfAppsIn(t, e.ArgoNamespace, teamNS, "default", child, func(a *unstructured.Unstructured) bool { return trackedBy(a, child+"-parent") })

	oncall := newUser(t, env.Oncall.Name)
	out, _ := mustRun(t, oncall, 0, "breakglass", child, "deployment/web", "--replicas", "3", "--reason", "team child", "--app-namespace", teamNS, "-y")
	if !strings.Contains(out, "Also pauses: parent application "+child+"-parent") {
		t.Errorf("breakglass did not pause the parent in %s:\n%s", e.ArgoNamespace, out)
	}
	time.Sleep(3 * time.Second) // longer than the self-heal period
	if got := replicasIn(ctx, t, child); got != 3 {
		t.Errorf("the fix was reverted: %d replicas", got)
	}
	p, _ := appsClient(t).Get(ctx, child+"-parent", metav1.GetOptions{})
	if policy, _, _ := unstructured.NestedMap(p.Object, "spec", "syncPolicy"); autoSyncOn(policy) {
		t.Errorf("the parent in %s was not paused: %v", e.ArgoNamespace, policy)
	}
	mustRun(t, oncall, 0, "restore", child, "--force", "--reason", "test over", "--app-namespace", teamNS, "-y")
	p, _ = appsClient(t).Get(ctx, child+"-parent", metav1.GetOptions{})
	if policy, _, _ := unstructured.NestedMap(p.Object, "spec", "syncPolicy"); !autoSyncOn(policy) || p.GetAnnotations()[breakglass.PausedByAnnotation] != "" {
		t.Errorf("restore left the parent paused: %v %v", policy, p.GetAnnotations())
	}
}

// waitReverted waits until self-heal, back on after a restore, has put
// the replicas of app's Deployment back from patched.
func waitReverted(t *testing.T, app string, patched int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitFor(ctx, t, app+" reverted by self-heal", func() (bool, string) {
		n := replicasIn(ctx, t, app)
		return n != patched, fmt.Sprint(n, " replicas")
	})
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
