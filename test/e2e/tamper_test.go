//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// planted names the objects the attacks below leave in the shared audit
// log on purpose; assertChainIntact accepts breaks there and nowhere else.
var planted struct {
	sync.Mutex
	names map[string]bool
}

func plant(name string) {
	planted.Lock()
	defer planted.Unlock()
	if planted.names == nil {
		planted.names = map[string]bool{}
	}
	planted.names[name] = true
}

// assertChainIntact runs audit verify as u and fails on any break but
// those planted by the attack tests.
func assertChainIntact(t *testing.T, u *user) {
	t.Helper()
	out, errOut, code := u.run("kubectl", "gitops", "audit", "verify", "-o", "json")
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code > 1 {
		t.Fatalf("audit verify: exit %d: %v: %s %s", code, err, out, errOut)
	}
	planted.Lock()
	defer planted.Unlock()
	for _, b := range rep.Breaks {
		if !planted.names[b.Name] {
			t.Errorf("audit chain broken: %s", b)
		}
	}
}

// applyAs creates obj through the real kubectl as u, returning stderr and
// the exit code.
func applyAs(t *testing.T, u *user, obj map[string]any) (string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "obj.json")
	data, _ := json.Marshal(obj)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := u.run("kubectl", "create", "-f", path)
	return errOut, code
}

// recordObject is a record ConfigMap as an attacker would write it.
func recordObject(seq uint64, actor, doc string, immutable bool) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": audit.RecordName(seq), "namespace": testEnv.ArgoNamespace,
			"labels":      map[string]any{audit.LabelKind: "record", audit.LabelEvent: "breakglass.patched"},
			"annotations": map[string]any{audit.AnnotationActor: actor},
		},
		"immutable": immutable,
		"data":      map[string]any{"record": doc},
	}
}

// forge seals a record the way the tool does (canonical JSON without
// hash, SHA-256), as someone who read the README would.
func forge(t *testing.T, seq uint64, prev, actor string) (string, string) {
	t.Helper()
	return forgeRecord(t, audit.Record{Seq: seq, Prev: prev, Event: audit.EventRestored, Actor: audit.Actor{Username: actor},
		Reason: "approved", Outcome: audit.Outcome{Status: audit.StatusSucceeded}})
}

// forgeRecord seals r (its Seq and Prev set) as forge does, and returns
// the document and its hash.
func forgeRecord(t *testing.T, r audit.Record) (string, string) {
	t.Helper()
	r.Schema, r.ID, r.Time = 1, fmt.Sprintf("forged-%d", r.Seq), time.Now().UTC()
	doc, _ := json.Marshal(r)
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	delete(m, "hash")
	var canon bytes.Buffer
	enc := json.NewEncoder(&canon)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bytes.TrimSuffix(canon.Bytes(), []byte("\n")))
	r.Hash = hex.EncodeToString(sum[:])
	out, _ := json.Marshal(r)
	return string(out), r.Hash
}

// head is the log's tip, read as the admin.
//
// The log has no head yet where the test runs before every other that
// writes to it (go test -shuffle): a record of on-call's own starts it then,
// so the caller always gets a tip to build on.
func head(t *testing.T) audit.HeadState {
	t.Helper()
	store := audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), testEnv.ArgoNamespace)
	h, err := store.Head(context.Background())
	if err == nil && h == nil {
		appendOwnRecord(t, testEnv, "the log's first record, for a test that builds on its tip")
		h, err = store.Head(context.Background())
	}
	if err != nil || h == nil {
		t.Fatalf("reading the head: %v", err)
	}
	return *h
}

// TestAPIServerRefusesTamperingByOncall tries, through real kubectl as the
// on-call user with the shipped role, what the shipped admission policies
// must refuse.
func TestAPIServerRefusesTamperingByOncall(t *testing.T) {
	e := environment(t)
	deployApp(t, "tp-refuse")
	oncall := newUser(t, env.Oncall.Name)
	mustRun(t, oncall, 0, "breakglass", "tp-refuse", "deployment/web", "--replicas", "3", "--reason", "seed the log", "-y")
	tip := head(t)
	doc, _ := forge(t, tip.Seq+1, tip.Hash, "alice")

	for _, tt := range []struct {
		name string
		obj  map[string]any
		want string
	}{
		{"another user's name stamped", recordObject(tip.Seq+1, "alice", doc, true), "kubectl-gitops.io/actor set to your user name, oncall"},
		{"a mutable record", recordObject(tip.Seq+1, "oncall", doc, false), "must be created immutable"},
		{"a record off the sequence", func() map[string]any {
			o := recordObject(tip.Seq+1, "oncall", doc, true)
			o["metadata"].(map[string]any)["name"] = audit.RecordName(tip.Seq+1) + "-approved"
			return o
		}(), "is not named kubectl-gitops-audit- followed by a 10-digit sequence number"},
	} {
		errOut, code := applyAs(t, oncall, tt.obj)
		if code == 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, %q; want refused with %q", tt.name, code, errOut, tt.want)
		}
	}

	record := audit.RecordName(tip.Seq)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"roll the head back", []string{"patch", "cm", audit.HeadName, "--type=merge", "-p", fmt.Sprintf(`{"data":{"seq":"%d"}}`, tip.Seq-1)}, "the audit head only moves forward"},
		{"delete the head", []string{"delete", "cm", audit.HeadName}, "forbidden"},
		{"repoint the destination", []string{"patch", "application", "tp-refuse", "--type=merge", "-p", `{"spec":{"destination":{"namespace":"kube-system"}}}`}, "may change only spec.syncPolicy"},
		{"repoint the source", []string{"patch", "application", "tp-refuse", "--type=merge", "-p", `{"spec":{"source":{"path":"elsewhere"}}}`}, "may change only spec.syncPolicy"},
		{"change the project", []string{"patch", "application", "tp-refuse", "--type=merge", "-p", `{"spec":{"project":"other"}}`}, "may change only spec.syncPolicy"},
		{"add another annotation", []string{"annotate", "application", "tp-refuse", "team=mallory"}, "only kubectl-gitops.io/ annotations"},
		{"start a sync", []string{"patch", "application", "tp-refuse", "--type=merge", "-p", `{"operation":{"sync":{"revision":"HEAD"}}}`}, "may not start or change a sync operation"},
		{"rewrite its status", []string{"patch", "application", "tp-refuse", "--type=merge", "-p", `{"status":{"sync":{"status":"Synced"}}}`}, "only status.operationState.phase"},
	} {
		_, errOut, code := oncall.run("kubectl", append([]string{"-n", e.ArgoNamespace}, tt.args...)...)
		if code == 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, %q; want refused with %q", tt.name, code, errOut, tt.want)
		}
	}
	// The on-call role cannot touch records at all (RBAC); the policy also
	// stops anyone who may write ConfigMaps there, cluster admins included,
	// from relabelling or re-annotating a record.
	admin := newUser(t, env.Admin.Name)
	for _, args := range [][]string{
		{"label", "cm", record, audit.LabelKind + "-"},
		{"annotate", "cm", record, audit.AnnotationActor + "=alice", "--overwrite"},
	} {
		_, errOut, code := admin.run("kubectl", append([]string{"-n", e.ArgoNamespace}, args...)...)
		if code == 0 || !strings.Contains(errOut, "cannot be changed: records are written once") {
			t.Errorf("admin %v: exit %d, %q; want refused", args, code, errOut)
		}
	}
	// What the break-glass itself writes stays allowed.
	oncall.kubectl("-n", e.ArgoNamespace, "annotate", "application", "tp-refuse", "argocd.argoproj.io/refresh=normal", "--overwrite")
	mustRun(t, oncall, 0, "restore", "tp-refuse", "--force", "--reason", "cleanup", "-y")
	assertChainIntact(t, oncall)
}

// TestForgedActorIsNamedByVerify: a record the on-call user writes by hand
// with a correct hash but another person's name gets past the API server
// only stamped with the real author, and verify names the forgery.
func TestForgedActorIsNamedByVerify(t *testing.T) {
	apiOnly(t)
	e := environment(t)
	oncall := newUser(t, env.Oncall.Name)
	// A record of oncall's own first: the log has no head where this test
	// runs before every other that writes to it.
	appendOwnRecord(t, e, "before the forgery")
	tip := head(t)
	doc, hash := forge(t, tip.Seq+1, tip.Hash, "alice")
	if errOut, code := applyAs(t, oncall, recordObject(tip.Seq+1, "oncall", doc, true)); code != 0 {
		t.Fatalf("creating the forged record: %s", errOut)
	}
	plant(audit.RecordName(tip.Seq + 1))
	oncall.kubectl("-n", e.ArgoNamespace, "patch", "cm", audit.HeadName, "--type=merge", "-p", fmt.Sprintf(`{"data":{"seq":"%d","hash":"%s"}}`, tip.Seq+1, hash))
	out, _, code := oncall.run("kubectl", "gitops", "audit", "verify")
	want := fmt.Sprintf(`forged: %s: the record names "alice" as its actor, but it was created by "oncall"`, audit.RecordName(tip.Seq+1))
	if code != 1 || !strings.Contains(out, want) {
		t.Errorf("audit verify: exit %d:\n%s\nwant exit 1 and %q", code, out, want)
	}
	assertChainIntact(t, oncall)
}

// TestARecordPlantedAheadIsFilledUnder (issue 49, item 2): a second
// on-call creates, in their own name, a record two past the tip (linking to
// the tip) and moves the head onto it: two kubectl requests the policies
// allow. Appends used to believe the head and skip the position under it
// for good ("record N is absent" forever, the planted record unnamed). Now
// the next append fills it, the one after builds on the log as it stands,
// and verify names the planted record with its writer and nothing else.
func TestARecordPlantedAheadIsFilledUnder(t *testing.T) {
	apiOnly(t)
	e := environment(t)
	lead := newUser(t, env.Lead.Name)
	tip := head(t)
	doc, hash := forge(t, tip.Seq+2, tip.Hash, env.Lead.Name)
	obj := recordObject(tip.Seq+2, env.Lead.Name, doc, true)
	obj["metadata"].(map[string]any)["labels"].(map[string]any)[audit.LabelEvent] = string(audit.EventRestored)
	if errOut, code := applyAs(t, lead, obj); code != 0 {
		t.Fatalf("creating the record ahead: %s", errOut)
	}
	plant(audit.RecordName(tip.Seq + 2))
	lead.kubectl("-n", e.ArgoNamespace, "patch", "cm", audit.HeadName, "--type=merge", "-p", fmt.Sprintf(`{"data":{"seq":"%d","hash":"%s"}}`, tip.Seq+2, hash))

	appendOwnRecord(t, e, "after the plant")
	appendOwnRecord(t, e, "past the plant")
	for seq, want := range map[uint64]uint64{tip.Seq + 1: tip.Seq, tip.Seq + 3: tip.Seq + 2} {
		entry, found, err := audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), e.ArgoNamespace).StoredRecord(context.Background(), seq)
		if err != nil || !found {
			t.Fatalf("record %d: found %v, %v; the appends skipped it", seq, found, err)
		}
		rec, err := audit.Parse(entry.Doc)
		if err != nil {
			t.Fatal(err)
		}
		if prev, _, _ := audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), e.ArgoNamespace).StoredRecord(context.Background(), want); !strings.Contains(string(prev.Doc), `"hash":"`+rec.Prev+`"`) {
			t.Errorf("record %d links to %.12s, not to record %d", seq, rec.Prev, want)
		}
	}
	out, _, code := newUser(t, env.Auditor.Name).run("kubectl", "gitops", "audit", "verify")
	want := fmt.Sprintf(`%s: does not link to record %d`, audit.RecordName(tip.Seq+2), tip.Seq+1)
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, `planted ahead of the log, created by "lead"`) || strings.Contains(out, "is absent") {
		t.Errorf("audit verify: exit %d:\n%s\nwant exit 1 naming %q as planted by lead, and no record absent", code, out, want)
	}
	assertChainIntact(t, newUser(t, env.Oncall.Name))
}

// TestForeignObjectCannotJamTheLog: one ConfigMap at the next sequence
// number, passing every policy but holding no record, used to make every
// later break-glass fail. Now the log records past it and verify names it.
func TestForeignObjectCannotJamTheLog(t *testing.T) {
	environment(t)
	deployApp(t, "tp-jam")
	oncall := newUser(t, env.Oncall.Name)
	tip := head(t)
	if errOut, code := applyAs(t, oncall, recordObject(tip.Seq+1, "oncall", "jammed", true)); code != 0 {
		t.Fatalf("creating the foreign object: %s", errOut)
	}
	plant(audit.RecordName(tip.Seq + 1))
	mustRun(t, oncall, 0, "breakglass", "tp-jam", "deployment/web", "--replicas", "4", "--reason", "still works", "-y")
	if replicasIn(context.Background(), t, "tp-jam") != 4 {
		t.Errorf("the patch is not live")
	}
	records := sessionRecords(t, sessionOf(t, "tp-jam").ID)
	if len(records) == 0 || records[0].Seq != tip.Seq+2 || records[0].Prev != tip.Hash {
		t.Fatalf("the first record should sit past the foreign object and link to record %d: %+v", tip.Seq, records)
	}
	out, _, code := oncall.run("kubectl", "gitops", "audit", "verify")
	if code != 1 || !strings.Contains(out, "altered: "+audit.RecordName(tip.Seq+1)+": unreadable") {
		t.Errorf("audit verify: exit %d:\n%s", code, out)
	}
	assertChainIntact(t, oncall)
	mustRun(t, oncall, 0, "restore", "tp-jam", "--force", "--reason", "cleanup", "-y")
}

// TestRestoreDryRunWritesNothing: a dry run used to request a refresh (a
// write); an auditor, who may only read Applications, shows it no longer
// does.
func TestRestoreDryRunWritesNothing(t *testing.T) {
	core(t)
	environment(t)
	deployApp(t, "tp-dry")
	oncall := newUser(t, env.Oncall.Name)
	mustRun(t, oncall, 0, "breakglass", "tp-dry", "deployment/web", "--replicas", "5", "--reason", "dry", "-y")
	auditor := newUser(t, env.Auditor.Name)
	_, errOut, code := auditor.run("kubectl", "gitops", "restore", "tp-dry", "--dry-run")
	if code != 1 || strings.Contains(errOut, "could not request a refresh") || !strings.Contains(errOut, "no refresh was requested") {
		t.Errorf("restore --dry-run as a read-only user: exit %d, %s", code, errOut)
	}
	mustRun(t, oncall, 0, "restore", "tp-dry", "--force", "--reason", "cleanup", "-y")
}

// TestEditedSessionIsCheckedAgainstTheLog: another on-call edits the
// session annotation with kubectl patch, as the admission policy lets the
// group within a session: still pausing, a later expiry, no patches,
// another saved policy. An edited saved policy used to be written back;
// then any such edit refused every --join and every plain restore (issue
// 32). The session's verified audit records are the truth: status names
// each field, --join patches within the log's session and writes the
// annotation back from it, and once Git has the fix a plain restore
// restores the log's saved policy, recorded as restored with the edit.
func TestEditedSessionIsCheckedAgainstTheLog(t *testing.T) {
	e := environment(t)
	ctx := context.Background()
	deployApp(t, "tp-edit")
	oncall := argoUser(t)
	mustRun(t, oncall, 0, "breakglass", "tp-edit", "deployment/web", "--image", "web=registry.example/web:hotfix", "--reason", "edit me", "-y")
	s := sessionOf(t, "tp-edit")
	planned := s.Expires
	edit := func(change func(*breakglass.Session)) {
		t.Helper()
		edited := sessionOf(t, "tp-edit")
		later := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
		edited.State, edited.Expires = breakglass.StatePausing, &later
		change(edited)
		value, _ := json.Marshal(edited)
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{breakglass.SessionAnnotation: string(value)}}})
		oncall.kubectl("-n", e.ArgoNamespace, "patch", "application", "tp-edit", "--type", "merge", "-p", string(patch))
	}
	edit(func(s *breakglass.Session) {
		s.Patches = nil
		s.SavedSyncPolicy = []byte(`{"automated":{"prune":false,"selfHeal":false}}`)
	})

	st := statusJSON(t, oncall, "tp-edit")
	for _, want := range []string{`state (annotation "pausing", audit log patched)`, "expires (annotation ", "savedSyncPolicy", "patches (annotation 0, audit log 1)"} {
		if !strings.Contains(strings.Join(st.Mismatch, "; "), want) {
			t.Errorf("status of the edited session: mismatch %q lacks %q", st.Mismatch, want)
		}
	}
	if st.Untrusted != "" || st.Session.State != breakglass.StatePatched || !reflect.DeepEqual(st.Session.Expires, planned) || st.Git != breakglass.GitWaiting {
		t.Errorf("status of the edited session: untrusted %q, state %s, expires %v (planned %v), git %s; want the log's session, waiting", st.Untrusted, st.Session.State, st.Session.Expires, planned, st.Git)
	}

	_, errOut := mustRun(t, oncall, 0, "breakglass", "tp-edit", "deployment/web", "--image", "web=registry.example/web:hotfix2", "--reason", "join", "--join", "-y")
	if !strings.Contains(errOut, "warning: the session annotation disagrees with its audit records") || imageIn(ctx, t, "tp-edit") != "registry.example/web:hotfix2" {
		t.Errorf("--join on an edited session: image %s, %q", imageIn(ctx, t, "tp-edit"), errOut)
	}
	if st := statusJSON(t, oncall, "tp-edit"); len(st.Mismatch) != 0 || st.Untrusted != "" {
		t.Errorf("after the join the annotation still disagrees: %q %q", st.Mismatch, st.Untrusted)
	}
	if joined := sessionOf(t, "tp-edit"); joined.State != breakglass.StatePatched || len(joined.Patches) != 2 || string(joined.SavedSyncPolicy) != string(s.SavedSyncPolicy) {
		t.Errorf("the annotation after the join: %+v", joined)
	}

	// Edited again, then Git gets the fix: an honest restore goes ahead.
	edit(func(*breakglass.Session) {})
	_, errOut = mustRun(t, oncall, 1, "restore", "tp-edit")
	if !strings.Contains(errOut, "sync not restored, deployment.apps/web waiting") {
		t.Errorf("restore while Git waits: %q", errOut)
	}
	if _, err := e.Git.Commit("tp-edit: the hotfix", env.AppFiles("apps/tp-edit", "tp-edit", "registry.example/web:hotfix2")); err != nil {
		t.Fatal(err)
	}
	mustRun(t, oncall, 0, "status", "tp-edit", "--wait", "--timeout", "2m")
	out, errOut := mustRun(t, oncall, 0, "restore", "tp-edit")
	if !strings.Contains(out, "restored the saved sync policy of tp-edit") || !strings.Contains(errOut, "warning: the session annotation disagrees with its audit records") {
		t.Errorf("restore of the edited session: %s%s", out, errOut)
	}
	if got := syncPolicyOf(t, "tp-edit"); !reflect.DeepEqual(runtimeDeepCopy(got), runtimeDeepCopy(fullPolicy)) {
		t.Errorf("restored policy %v, want the one the audit log saved %v", got, fullPolicy)
	}
	records := sessionRecords(t, s.ID)
	last := records[len(records)-1]
	if last.Event != audit.EventRestored || !strings.Contains(last.Outcome.Error, `state (annotation "pausing", audit log patched)`) {
		t.Errorf("the restore was recorded as %s (%q), want restored, naming the edit", last.Event, last.Outcome.Error)
	}
	assertChainIntact(t, oncall)
}

// TestOnlyAnAdminWritesRecordsBack: the restored-by annotation is the one
// case where a record may be stamped with another actor than its creator
// (audit restore-log). On-call, through kubectl, may not use it: neither to
// write a record in someone else's name, nor in their own.
func TestOnlyAnAdminWritesRecordsBack(t *testing.T) {
	apiOnly(t)
	e := environment(t)
	oncall := newUser(t, env.Oncall.Name)
	appendOwnRecord(t, e, "before the write-back")
	tip := head(t)
	// Stamped alice, the actor rule refuses it first; stamped on-call, the
	// rule of restored-by.
	refusals := map[string]string{
		"alice":         "audit records must carry the annotation kubectl-gitops.io/actor set to your user name",
		env.Oncall.Name: "only a cluster admin (group system:masters) writes audit records back from the mirror",
	}
	for _, actor := range []string{"alice", env.Oncall.Name} {
		doc, _ := forge(t, tip.Seq+1, tip.Hash, actor)
		obj := recordObject(tip.Seq+1, actor, doc, true)
		obj["metadata"].(map[string]any)["annotations"].(map[string]any)[audit.AnnotationRestoredBy] = env.Oncall.Name
		errOut, code := applyAs(t, oncall, obj)
		if code == 0 {
			plant(audit.RecordName(tip.Seq + 1))
			t.Fatalf("on-call wrote a record back from the mirror, stamped %q", actor)
		}
		if !strings.Contains(errOut, refusals[actor]) {
			t.Errorf("refused for another reason (actor %q): %s", actor, errOut)
		}
	}
	assertChainIntact(t, oncall)
}

// appendOwnRecord appends a record of on-call's own, as the tool writes
// it, so that the log has a head wherever the test runs in the suite.
func appendOwnRecord(t *testing.T, e *env.Env, reason string) {
	t.Helper()
	seed := &audit.Record{Event: audit.EventPlanned, Actor: audit.Actor{Username: env.Oncall.Name}, Reason: reason,
		Outcome: audit.Outcome{Status: audit.StatusStarted}}
	if err := audit.NewConfigMapStore(kubeFor(t, env.Oncall.Name), e.ArgoNamespace).Append(context.Background(), seed); err != nil {
		t.Fatal(err)
	}
}
