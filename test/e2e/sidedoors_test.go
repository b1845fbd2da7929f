//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// TestSilentPauseIsNamed (issue 32, item 1): an on-call pauses an
// automated Application with a parent's paused-by mark (any value), which
// the admission policy cannot tell from a parent's pause. No session
// accounts for it: status -A and contract check name it, and contract
// check --exit-code exits 1. It used to pass unseen.
func TestSilentPauseIsNamed(t *testing.T) {
	e := environment(t)
	deployApp(t, "sd-silent")
	oncall := newUser(t, env.Oncall.Name)
	oncall.kubectl("-n", e.ArgoNamespace, "patch", "application", "sd-silent", "--type=merge", "-p",
		`{"metadata":{"annotations":{"`+breakglass.PausedByAnnotation+`":"anything"}},"spec":{"syncPolicy":{"automated":{"enabled":false}}}}`)
	want := `application argocd/sd-silent is marked paused for session "anything"`
	if _, errOut, _ := oncall.run("kubectl", "gitops", "status", "-A"); !strings.Contains(errOut, want) {
		t.Errorf("status -A does not name the silent pause: %s", errOut)
	}
	if _, errOut, code := oncall.run("kubectl", "gitops", "contract", "check", "-A", "--exit-code"); code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("contract check --exit-code: exit %d, %s", code, errOut)
	}
	newUser(t, env.Admin.Name).kubectl("-n", e.ArgoNamespace, "patch", "application", "sd-silent", "--type=merge", "-p",
		`{"metadata":{"annotations":{"`+breakglass.PausedByAnnotation+`":null}},"spec":{"syncPolicy":{"automated":{"enabled":true}}}}`)
}

// TestHandMadeSessionIsRecorded: an on-call pauses an automated
// Application with a session annotation written by hand, which the
// admission policy lets appear (CEL cannot read the log). No session of the
// log opened it: the controller records it as breakglass.orphaned within
// seconds, with a Warning Event OrphanedSession, and restore refuses it.
// Before, only status named it, when someone ran it.
func TestHandMadeSessionIsRecorded(t *testing.T) {
	e := environment(t)
	deployApp(t, "sd-ghost")
	startReplica(t, "replica-ghost")
	oncall := newUser(t, env.Oncall.Name)
	annotation := `{"id":"20261207-030000-ghost","openedBy":"` + env.Oncall.Name + `","state":"patched"}`
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{breakglass.SessionAnnotation: annotation}},
		"spec": map[string]any{"syncPolicy": map[string]any{"automated": map[string]any{"enabled": false}}}})
	oncall.kubectl("-n", e.ArgoNamespace, "patch", "application", "sd-ghost", "--type=merge", "-p", string(patch))
	admin := newUser(t, env.Admin.Name)
	t.Cleanup(func() {
		admin.kubectl("-n", e.ArgoNamespace, "patch", "application", "sd-ghost", "--type=merge", "-p",
			`{"metadata":{"annotations":{"`+breakglass.SessionAnnotation+`":null}},"spec":{"syncPolicy":{"automated":{"enabled":true}}}}`)
	})
	orphaned := waitOrphaned(t, "sd-ghost", "")
	if r := orphaned[0]; len(orphaned) != 1 || r.Actor.Username != controllerSA || r.Session != "" ||
		!strings.Contains(r.Reason, "20261207-030000-ghost") || !strings.Contains(r.Reason, "automated sync is off") {
		t.Errorf("orphaned records: %+v", orphaned)
	}
	events := admin.kubectl("-n", e.ArgoNamespace, "get", "events", "--field-selector", "type=Warning,involvedObject.name=sd-ghost", "-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}")
	if !strings.Contains(events, breakglass.EventOrphanedSessionReason) {
		t.Errorf("warning events of sd-ghost: %q, want %s", events, breakglass.EventOrphanedSessionReason)
	}
	if _, errOut := mustRun(t, oncall, 1, "restore", "sd-ghost", "--force", "--reason", "ghost", "-y"); !strings.Contains(errOut, "no open session there to restore") {
		t.Errorf("restore --force of a hand-made session: %s", errOut)
	}
}

// TestHandMadeOpenAndCloseIsRecorded (issue 49, items 1 and 4): an on-call
// opens a session by hand with kubectl (the annotation with the pause and a
// banner), adds a hold entry inside it, and closes it (the pause undone,
// the last-session mark), three requests the policy lets through since CEL
// cannot read the log; the controller may never see the annotation. The
// mark stays: within seconds the controller records the close as
// breakglass.orphaned, naming the session the log never opened and what the
// Application still carries, with a Warning Event UnrecordedSession.
func TestHandMadeOpenAndCloseIsRecorded(t *testing.T) {
	e := environment(t)
	deployApp(t, "sd-blink")
	startReplica(t, "replica-blink")
	oncall := newUser(t, env.Oncall.Name)
	const id = "20261207-030000-blink"
	open, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		breakglass.SessionAnnotation: `{"id":"` + id + `","openedBy":"` + env.Oncall.Name + `","state":"patched"}`,
		breakglass.NoticeContent:     "Git has the fix. Sync is safe.",
	}}, "spec": map[string]any{"syncPolicy": map[string]any{"automated": map[string]any{"enabled": false}}}})
	oncall.kubectl("-n", e.ArgoNamespace, "patch", "application", "sd-blink", "--type=merge", "-p", string(open))
	oncall.kubectl("-n", e.ArgoNamespace, "patch", "application", "sd-blink", "--type=merge", "-p",
		`{"spec":{"ignoreDifferences":[{"group":"apps","kind":"Deployment","name":"web","namespace":"sd-blink","jqPathExpressions":[".spec.replicas"]}]}}`)
	closing, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		breakglass.SessionAnnotation:     nil,
		breakglass.LastSessionAnnotation: `{"id":"` + id + `","closed":"restored"}`,
	}}, "spec": map[string]any{"syncPolicy": map[string]any{"automated": map[string]any{"enabled": true}}}})
	oncall.kubectl("-n", e.ArgoNamespace, "patch", "application", "sd-blink", "--type=merge", "-p", string(closing))

	// The controller may see the annotation while it stands (recorded as
	// an orphaned session); the close is recorded whether or not it did.
	closes := waitOrphaned(t, "sd-blink", "which the audit log never opened")
	if r := closes[0]; len(closes) != 1 || r.Actor.Username != controllerSA || !strings.Contains(r.Reason, id) ||
		!strings.Contains(r.Reason, "1 spec.ignoreDifferences entries, an Argo CD notice banner") {
		t.Errorf("orphaned records of the close: %+v", closes)
	}
	events := newUser(t, env.Admin.Name).kubectl("-n", e.ArgoNamespace, "get", "events", "--field-selector", "type=Warning,involvedObject.name=sd-blink", "-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}")
	if !strings.Contains(events, breakglass.EventUnrecordedSessionReason) {
		t.Errorf("warning events of sd-blink: %q, want %s", events, breakglass.EventUnrecordedSessionReason)
	}
	// Opened again under the same id, a hand-made session would close
	// leaving the mark as it was, for nobody to see: refused.
	if _, errOut, code := oncall.run("kubectl", "-n", e.ArgoNamespace, "patch", "application", "sd-blink", "--type=merge", "-p", string(open)); code == 0 || !strings.Contains(errOut, "opens with a new id, not that of the session that last closed there") {
		t.Errorf("a session reopened under the last close's id: exit %d, %s", code, errOut)
	}
}

// TestAGhostChildsPauseMarkIsRecorded (issue 49, item 2): a second on-call
// writes, in their own name, a plan for a session on an Application that
// does not exist and a pause of a real one, then marks the real one paused
// for that session with kubectl (the policy lets a parent's mark appear
// with its pause): two records used to account for a silent pause. The
// marked child must exist and carry the session: the controller records
// the pause as orphaned within seconds, with a Warning Event OrphanedPause.
func TestAGhostChildsPauseMarkIsRecorded(t *testing.T) {
	e := environment(t)
	deployApp(t, "sd-ghostparent")
	startReplica(t, "replica-ghostparent")
	const id = "20261207-040000-ghost"
	appendAs(t, env.Lead.Name, &audit.Record{Event: audit.EventPlanned, Session: id, Reason: "ghost",
		Application: &audit.AppRef{Namespace: e.ArgoNamespace, Name: "sd-nochild"}, Outcome: audit.Outcome{Status: audit.StatusStarted}})
	appendAs(t, env.Lead.Name, &audit.Record{Event: audit.EventPaused, Session: id, Reason: "ghost",
		Application: &audit.AppRef{Namespace: e.ArgoNamespace, Name: "sd-ghostparent"}, Outcome: audit.Outcome{Status: audit.StatusSucceeded}})
	mark, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{breakglass.PausedByAnnotation: "sd-nochild/" + id}},
		"spec": map[string]any{"syncPolicy": map[string]any{"automated": map[string]any{"enabled": false}}}})
	newUser(t, env.Lead.Name).kubectl("-n", e.ArgoNamespace, "patch", "application", "sd-ghostparent", "--type=merge", "-p", string(mark))
	admin := newUser(t, env.Admin.Name)
	t.Cleanup(func() {
		admin.kubectl("-n", e.ArgoNamespace, "patch", "application", "sd-ghostparent", "--type=merge", "-p",
			`{"metadata":{"annotations":{"`+breakglass.PausedByAnnotation+`":null}},"spec":{"syncPolicy":{"automated":{"enabled":true}}}}`)
		// The ghost session closes in the log, as it opened: by hand.
		appendAs(t, env.Lead.Name, &audit.Record{Event: audit.EventRestored, Session: id, Reason: "ghost",
			Application: &audit.AppRef{Namespace: e.ArgoNamespace, Name: "sd-nochild"}, Outcome: audit.Outcome{Status: audit.StatusSucceeded}})
	})
	orphaned := waitOrphaned(t, "sd-ghostparent", "whose Application "+e.ArgoNamespace+"/sd-nochild does not exist")
	if r := orphaned[0]; len(orphaned) != 1 || r.Actor.Username != controllerSA || !strings.Contains(r.Reason, id) {
		t.Errorf("orphaned records: %+v", orphaned)
	}
	events := admin.kubectl("-n", e.ArgoNamespace, "get", "events", "--field-selector", "type=Warning,involvedObject.name=sd-ghostparent", "-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}")
	if !strings.Contains(events, breakglass.EventOrphanedReason) {
		t.Errorf("warning events of sd-ghostparent: %q, want %s", events, breakglass.EventOrphanedReason)
	}
}

// TestForgedCloseIsNamed (issue 32, item 2): a second on-call appends a
// breakglass.restored record, in their own name, for a live session. The
// Application stays paused with the fix: status shows the session open
// with the disagreement, verify names the close, and restore --force
// ends it (it used to refuse for good).
func TestForgedCloseIsNamed(t *testing.T) {
	e := environment(t)
	deployApp(t, "sd-close")
	oncall := newUser(t, env.Oncall.Name)
	mustRun(t, oncall, 0, "breakglass", "sd-close", "deployment/web", "--replicas", "4", "--reason", "load", "--hold", "sync", "-y")
	session := sessionOf(t, "sd-close")
	forged := appendAs(t, env.Lead.Name, &audit.Record{Event: audit.EventRestored, Session: session.ID, Reason: "done, trust me",
		Application: &audit.AppRef{Namespace: e.ArgoNamespace, Name: "sd-close"}, Outcome: audit.Outcome{Status: audit.StatusSucceeded}})
	if _, errOut, _ := oncall.run("kubectl", "gitops", "status", "sd-close"); !strings.Contains(errOut, "close-without-restore") && !strings.Contains(errOut, "closed") {
		t.Errorf("status does not name the forged close: %s", errOut)
	}
	mustRun(t, oncall, 0, "restore", "sd-close", "--force", "--reason", "the close was forged", "-y")
	// The forced restore is the close the Application followed: verify
	// names the forged one.
	out, errOut, _ := oncall.run("kubectl", "gitops", "audit", "verify", "-o", "json")
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("audit verify -o json: %v: %s %s", err, out, errOut)
	}
	named := false
	for _, b := range rep.Breaks {
		if b.Kind == audit.BreakCloseWithoutRestore && b.Seq == forged.Seq {
			named = true
			plant(b.Name) // the break is this attack's, wherever verify files it
		}
	}
	if !named {
		t.Errorf("verify does not name the forged close (record %d): %+v", forged.Seq, rep.Breaks)
	}
	if _, open := appAnnotations(t, "sd-close")[breakglass.SessionAnnotation]; open {
		t.Error("restore --force left the session")
	}
	if policy := syncPolicyOf(t, "sd-close"); !autoSyncOn(policy) {
		t.Errorf("restore --force left sync off: %v", policy)
	}
}

// TestJoinHonoursItsNamespacesMaxPause (issue 32, item 7): a --join is
// refused when the target namespace's contract pauses sync for less than
// the session does; it used to patch there under a session held longer
// than that namespace allows.
func TestJoinHonoursItsNamespacesMaxPause(t *testing.T) {
	environment(t)
	deployApp(t, "sd-join")
	oncall := newUser(t, env.Oncall.Name)
	mustRun(t, oncall, 0, "breakglass", "sd-join", "deployment/web", "--replicas", "3", "--reason", "load", "-y")
	newUser(t, env.Admin.Name).kubectl("annotate", "namespace", "sd-join", "--overwrite", drift.ContractMaxPause+"=1h")
	_, errOut := mustRun(t, oncall, 1, "breakglass", "sd-join", "deployment/web", "--replicas", "4", "--reason", "more", "--join", "-y")
	if !strings.Contains(errOut, "namespace sd-join pauses sync for at most 1h0m0s") || !strings.Contains(errOut, "never expires") {
		t.Errorf("join beyond the namespace's max-pause: %s", errOut)
	}
	if n := replicasIn(context.Background(), t, "sd-join"); n != 3 {
		t.Errorf("the refused join patched: replicas %d", n)
	}
	mustRun(t, oncall, 0, "restore", "sd-join", "--force", "--reason", "test over", "-y")
}

// TestTheBannerIsTheLogs (issue 49, item 3): during a session a second
// on-call rewrites the banner ("Git has the fix. Sync is safe." with a link
// to another host) and plants a savedNotice of their own in the session
// annotation, through kubectl as the policy lets them. The controller puts
// the session's banner back within seconds, and the honest close puts back
// the Application's own notice as the planned record saved it: the
// attacker's notice stayed for good.
func TestTheBannerIsTheLogs(t *testing.T) {
	e := environment(t)
	deployApp(t, "sd-banner")
	admin := newUser(t, env.Admin.Name)
	admin.kubectl("-n", e.ArgoNamespace, "annotate", "application", "sd-banner", breakglass.NoticeContent+"=Owned by team-payments")
	startReplica(t, "replica-banner")
	oncall, lead := newUser(t, env.Oncall.Name), newUser(t, env.Lead.Name)
	mustRun(t, oncall, 0, "breakglass", "sd-banner", "deployment/web", "--replicas", "3", "--reason", "banner", "-y")
	banner := appAnnotations(t, "sd-banner")[breakglass.NoticeContent]
	if !strings.HasPrefix(banner, "BREAK-GLASS: do not sync.") {
		t.Fatalf("the session's banner is %q", banner)
	}
	lead.kubectl("-n", e.ArgoNamespace, "annotate", "--overwrite", "application", "sd-banner",
		breakglass.NoticeContent+"=Git has the fix. Sync is safe.", breakglass.NoticeURL+"=https://evil.example/fix")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitFor(ctx, t, "the session's banner back on sd-banner", func() (bool, string) {
		a := appAnnotations(t, "sd-banner")
		return a[breakglass.NoticeContent] == banner && a[breakglass.NoticeURL] == "", a[breakglass.NoticeContent] + " " + a[breakglass.NoticeURL]
	})
	s := sessionOf(t, "sd-banner")
	s.SavedNotice = map[string]string{breakglass.NoticeContent: "Git has the fix. Sync is safe.", breakglass.NoticeURL: "https://evil.example/fix"}
	value, _ := json.Marshal(s)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{breakglass.SessionAnnotation: string(value)}}})
	lead.kubectl("-n", e.ArgoNamespace, "patch", "application", "sd-banner", "--type=merge", "-p", string(patch))
	mustRun(t, oncall, 0, "restore", "sd-banner", "--force", "--reason", "banner test over", "-y")
	a := appAnnotations(t, "sd-banner")
	if a[breakglass.NoticeContent] != "Owned by team-payments" || a[breakglass.NoticeURL] != "" {
		t.Errorf("after the close the notice is %q (url %q), want the Application's own", a[breakglass.NoticeContent], a[breakglass.NoticeURL])
	}
}

// TestAForeignHoldEntryHoldsRestoreBack (issue 49, item 1): within a --hold
// sync session a second on-call appends an ignoreDifferences entry of
// their own for the patched field, through kubectl as the policy lets
// them; Git moves for an unrelated reason. Argo CD compares the field no
// more and reports Synced, and an honest restore said Git had caught up,
// re-enabled sync and left the entry for good. Now status names the
// entry, restore refuses, and the forced close takes it out.
func TestAForeignHoldEntryHoldsRestoreBack(t *testing.T) {
	e := environment(t)
	deployApp(t, "sd-foreign")
	oncall, lead := newUser(t, env.Oncall.Name), newUser(t, env.Lead.Name)
	mustRun(t, oncall, 0, "breakglass", "sd-foreign", "deployment/web", "--replicas", "3", "--reason", "foreign entry", "--hold", "sync", "-y")
	lead.kubectl("-n", e.ArgoNamespace, "patch", "application", "sd-foreign", "--type=merge", "-p",
		`{"spec":{"ignoreDifferences":[{"group":"apps","kind":"Deployment","name":"web","namespace":"sd-foreign","jqPathExpressions":[".spec.replicas"]}]}}`)
	if _, err := testEnv.Git.Commit("unrelated", map[string]string{"README.md": "moved again\n"}); err != nil {
		t.Fatal(err)
	}
	out, _ := mustRun(t, oncall, 1, "status", "sd-foreign", "-o", "json", "--exit-code")
	if !strings.Contains(out, "neither the Application's own when the session opened nor its hold's") {
		t.Errorf("status does not name the foreign entry:\n%s", out)
	}
	mustRun(t, oncall, 1, "restore", "sd-foreign")
	mustRun(t, oncall, 0, "restore", "sd-foreign", "--force", "--reason", "the entry was not ours", "-y")
	app, err := appsClient(t).Get(context.Background(), "sd-foreign", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if entries, found, _ := unstructured.NestedSlice(app.Object, "spec", "ignoreDifferences"); found && len(entries) > 0 {
		t.Errorf("after the close ignoreDifferences is %v, want none (the Application had none)", entries)
	}
}

// waitOrphaned waits a minute at most for breakglass.orphaned records of
// Application app whose reason holds saying, and returns them once there
// is one.
func waitOrphaned(t *testing.T, app, saying string) []*audit.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var orphaned []*audit.Record
	waitFor(ctx, t, "a breakglass.orphaned record of "+app, func() (bool, string) {
		orphaned = nil
		for _, r := range allRecords(t) {
			if r.Event == audit.EventOrphaned && r.Application != nil && r.Application.Name == app && strings.Contains(r.Reason, saying) {
				orphaned = append(orphaned, r)
			}
		}
		return len(orphaned) > 0, "none yet"
	})
	return orphaned
}
