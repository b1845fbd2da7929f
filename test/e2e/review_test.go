//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// TestReviewBySomeoneElse: a closed session is reviewed by a second
// person. Its opener and a joiner are refused (separation of duties), the
// reviewer role's review is recorded and shown, that role can write no
// other record (admission policy), and a review the opener writes by hand
// is named by verify.
func TestReviewBySomeoneElse(t *testing.T) {
	e := environment(t)
	deployApp(t, "rv-app")
	oncall := newUser(t, env.Oncall.Name)
	lead := newUser(t, env.Lead.Name)
	reviewer := newUser(t, env.Reviewer.Name)
	mustRun(t, oncall, 0, "breakglass", "rv-app", "deployment/web", "--replicas", "3", "--reason", "review me", "-y")
	session := sessionOf(t, "rv-app").ID
	mustRun(t, lead, 0, "breakglass", "rv-app", "deployment/web", "--replicas", "4", "--reason", "and more", "--join", "-y")

	_, errOut := mustRun(t, reviewer, 1, "audit", "review", session, "--approve", "--note", "too early")
	if !strings.Contains(errOut, "still open") {
		t.Errorf("a review of an open session: %s", errOut)
	}
	mustRun(t, oncall, 0, "restore", "rv-app", "--force", "--reason", "Git fix later", "-y")
	if _, errOut := mustRun(t, oncall, 0, "status", "-A"); !strings.Contains(errOut, "await review") {
		t.Errorf("status does not count the session awaiting review: %s", errOut)
	}
	if out, _ := mustRun(t, oncall, 0, "audit", "log", "--unreviewed", "-o", "wide"); !strings.Contains(out, session) {
		t.Errorf("audit log --unreviewed does not list %s:\n%s", session, out)
	}
	for name, u := range map[string]*user{"the opener": oncall, "a joiner": lead} {
		if _, errOut := mustRun(t, u, 1, "audit", "review", session, "--approve", "--note", "fine by me"); !strings.Contains(errOut, "opened or joined session "+session) {
			t.Errorf("a review by %s: %s", name, errOut)
		}
	}
	out, _ := mustRun(t, reviewer, 0, "audit", "review", session, "--reject", "--note", "should have scaled first")
	if !strings.Contains(out, "session "+session+" rejected by reviewer") {
		t.Errorf("the review: %s", out)
	}
	if out, _ := mustRun(t, reviewer, 0, "audit", "log", "--event", "breakglass.reviewed", "-o", "wide"); !strings.Contains(out, session) {
		t.Errorf("the review is not in the log:\n%s", out)
	}
	if out, _ := mustRun(t, oncall, 0, "audit", "log", "--unreviewed", "-o", "wide"); strings.Contains(out, session) {
		t.Errorf("a reviewed session is still listed as unreviewed:\n%s", out)
	}

	// The reviewer role appends reviews and nothing else.
	forged := &audit.Record{Event: audit.EventPatched, Session: session, Actor: audit.Actor{Username: env.Reviewer.Name},
		Application: &audit.AppRef{Namespace: e.ArgoNamespace, Name: "rv-app"}, Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
	err := audit.NewConfigMapStore(kubeFor(t, env.Reviewer.Name), e.ArgoNamespace).Append(context.Background(), forged)
	if err == nil || !strings.Contains(err.Error(), "may append only review records") {
		t.Errorf("the reviewer wrote a patched record: %v", err)
	}

	// A review the opener writes by hand, in their own name, is named.
	self := appendAs(t, env.Oncall.Name, &audit.Record{Event: audit.EventReviewed, Session: session,
		Application: &audit.AppRef{Namespace: e.ArgoNamespace, Name: "rv-app"}, Review: &audit.Review{Verdict: audit.VerdictApproved, Note: "mine"},
		Outcome: audit.Outcome{Status: audit.StatusSucceeded}})
	out, _, code := oncall.run("kubectl", "gitops", "audit", "verify")
	if want := "self-review: " + audit.RecordName(self.Seq) + ": session " + session + ": reviewed by oncall, who opened or joined the session"; code != 1 || !strings.Contains(out, want) {
		t.Errorf("audit verify: exit %d:\n%s\nwant %q", code, out, want)
	}
	assertChainIntact(t, oncall)
}
