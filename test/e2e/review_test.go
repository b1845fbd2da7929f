//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// TestReviewBySomeoneElse: a closed session is reviewed by a second
// person in the reviewer role. Its opener and a joiner (on-call, not
// reviewers) are refused by the plugin before anything is written, and a
// review record written by hand with kubectl is refused by the API
// server; the reviewer role's review is recorded and shown, and that role
// can write no other record (admission policy). A review the on-call
// labels as another event gets past the policy: verify names it
// relabelled, and it counts for nothing.
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
	// The backlog is the reviewers' to hear of, not a line on every
	// on-call status.
	if _, errOut := mustRun(t, oncall, 0, "status", "-A"); strings.Contains(errOut, "await review") {
		t.Errorf("status tells on-call of the review backlog: %s", errOut)
	}
	if out, _ := mustRun(t, oncall, 0, "audit", "log", "--unreviewed", "-o", "wide"); !strings.Contains(out, session) {
		t.Errorf("audit log --unreviewed does not list %s:\n%s", session, out)
	}
	before := headSeqOf(t)
	for name, u := range map[string]*user{env.Oncall.Name: oncall, env.Lead.Name: lead} {
		_, errOut := mustRun(t, u, 1, "audit", "review", session, "--approve", "--note", "fine by me")
		if want := "error: only the reviewer role records a review: " + name + " is not in group reviewers"; !strings.Contains(errOut, want) {
			t.Errorf("a review by %s: %s\nwant %q", name, errOut, want)
		}
	}
	if after := headSeqOf(t); after != before {
		t.Errorf("refused reviews wrote records %d to %d", before+1, after)
	}

	// By hand, with kubectl: the API server refuses an on-call's review.
	app := &audit.AppRef{Namespace: e.ArgoNamespace, Name: "rv-app"}
	byHand := func(seq uint64, prev string) audit.Record {
		return audit.Record{Seq: seq, Prev: prev, Event: audit.EventReviewed, Session: session, Application: app,
			Actor:  audit.Actor{Username: env.Oncall.Name, Groups: []string{audit.ReviewerGroup}},
			Review: &audit.Review{Verdict: audit.VerdictApproved, Note: "fine by me"}, Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
	}
	tip := head(t)
	doc, _ := forgeRecord(t, byHand(tip.Seq+1, tip.Hash))
	review := recordObject(tip.Seq+1, env.Oncall.Name, doc, true)
	review["metadata"].(map[string]any)["labels"].(map[string]any)[audit.LabelEvent] = string(audit.EventReviewed)
	if errOut, code := applyAs(t, oncall, review); code == 0 || !strings.Contains(errOut, "only the reviewer role (group reviewers) appends review records: oncall may not write") {
		t.Errorf("kubectl create of an on-call's review: exit %d: %s", code, errOut)
	}

	out, _ := mustRun(t, reviewer, 0, "audit", "review", session, "--reject", "--note", "should have scaled first")
	if !strings.Contains(out, "session "+session+" rejected by reviewer") {
		t.Errorf("the review: %s", out)
	}
	if out, _ := mustRun(t, reviewer, 0, "audit", "log", "--event", "breakglass.reviewed", "-o", "wide"); !strings.Contains(out, session) {
		t.Errorf("the review is not in the log:\n%s", out)
	}
	if out, _ := mustRun(t, oncall, 0, "audit", "log", "--unreviewed", "-o", "wide"); !strings.Contains(out, session) {
		t.Errorf("a rejected session is not listed as without an approval:\n%s", out)
	}

	// The reviewer role appends reviews and nothing else.
	forged := &audit.Record{Event: audit.EventPatched, Session: session, Actor: audit.Actor{Username: env.Reviewer.Name},
		Application: app, Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
	err := audit.NewConfigMapStore(kubeFor(t, env.Reviewer.Name), e.ArgoNamespace).Append(context.Background(), forged)
	if err == nil || !strings.Contains(err.Error(), "may append only review records") {
		t.Errorf("the reviewer wrote a patched record: %v", err)
	}

	// The same approval labelled breakglass.patched passes the policy,
	// which judges a record by its label; verify names it, nothing counts it.
	tip = head(t)
	doc, hash := forgeRecord(t, byHand(tip.Seq+1, tip.Hash))
	if errOut, code := applyAs(t, oncall, recordObject(tip.Seq+1, env.Oncall.Name, doc, true)); code != 0 {
		t.Fatalf("creating the relabelled review: %s", errOut)
	}
	plant(audit.RecordName(tip.Seq + 1))
	oncall.kubectl("-n", e.ArgoNamespace, "patch", "cm", audit.HeadName, "--type=merge", "-p", fmt.Sprintf(`{"data":{"seq":"%d","hash":"%s"}}`, tip.Seq+1, hash))
	out, _, code := oncall.run("kubectl", "gitops", "audit", "verify")
	if want := "relabelled: " + audit.RecordName(tip.Seq+1) + `: label kubectl-gitops.io/event is "breakglass.patched", the record says "breakglass.reviewed"`; code != 1 || !strings.Contains(out, want) {
		t.Errorf("audit verify: exit %d:\n%s\nwant %q", code, out, want)
	}
	if out, _ := mustRun(t, oncall, 0, "audit", "log", "--unreviewed", "-o", "wide"); !strings.Contains(out, session) {
		t.Errorf("the relabelled approval counts: %s is not listed as without an approval:\n%s", session, out)
	}
	assertChainIntact(t, oncall)
}

// TestReviewRejectionStandsUntilOverturned: a reviewer rejects a closed
// session. A second reviewer's approval is refused until it says it
// overturns the rejection (--overturn, the note saying why), the rejecter
// may not overturn their own rejection, and until an approval stands the
// session is listed by --unreviewed. The report shows every review, the
// overturn naming the rejection, and the verdict that stands.
func TestReviewRejectionStandsUntilOverturned(t *testing.T) {
	environment(t)
	deployApp(t, "rv-overturn")
	oncall := newUser(t, env.Oncall.Name)
	first := newUser(t, env.Reviewer.Name)
	second := newUser(t, env.SecondReviewer.Name)
	auditor := newUser(t, env.Auditor.Name)
	mustRun(t, oncall, 0, "breakglass", "rv-overturn", "deployment/web", "--replicas", "3", "--reason", "review me twice", "-y")
	session := sessionOf(t, "rv-overturn").ID
	mustRun(t, oncall, 0, "restore", "rv-overturn", "--force", "--reason", "Git fix later", "-y")

	mustRun(t, first, 0, "audit", "review", session, "--reject", "--note", "should have scaled first")
	rejection := headSeqOf(t)
	_, errOut := mustRun(t, second, 1, "audit", "review", session, "--approve", "--note", "looks fine")
	if want := fmt.Sprintf("error: a rejection of the session stands: reviewer rejected session %s (record %d), and only an approval that overturns it counts: pass --overturn, saying in --note why", session, rejection); !strings.Contains(errOut, want) {
		t.Errorf("an approval over the rejection: %s\nwant %q", errOut, want)
	}
	_, errOut = mustRun(t, first, 1, "audit", "review", session, "--approve", "--overturn", "--note", "changed my mind")
	if want := fmt.Sprintf("error: a rejection is overturned by another reviewer: reviewer rejected session %s (record %d)", session, rejection); !strings.Contains(errOut, want) {
		t.Errorf("the rejecter overturning: %s\nwant %q", errOut, want)
	}
	if out, _ := mustRun(t, auditor, 0, "audit", "log", "--unreviewed", "-o", "wide"); !strings.Contains(out, session) {
		t.Errorf("a rejected session is not listed by --unreviewed:\n%s", out)
	}
	out, _ := mustRun(t, second, 0, "audit", "review", session, "--approve", "--overturn", "--note", "the scale-up was tried first: OPS-7 says so")
	if !strings.Contains(out, "session "+session+" approved by reviewer2, overturning the rejection") {
		t.Errorf("the overturn: %s", out)
	}
	if out, _ := mustRun(t, auditor, 0, "audit", "log", "--unreviewed", "-o", "wide"); strings.Contains(out, session) {
		t.Errorf("an approved session is still listed by --unreviewed:\n%s", out)
	}

	out, errOut, code := auditor.run("kubectl", "gitops", "audit", "report", "-o", "json")
	var ev struct{ Changes []audit.EmergencyChange }
	if err := json.Unmarshal([]byte(out), &ev); err != nil || code > 1 {
		t.Fatalf("audit report: exit %d: %v: %s", code, err, errOut)
	}
	var c *audit.EmergencyChange
	for i := range ev.Changes {
		if ev.Changes[i].Session == session {
			c = &ev.Changes[i]
		}
	}
	switch {
	case c == nil:
		t.Fatalf("the report has no session %s", session)
	case c.Verdict != audit.VerdictApproved || c.Reviewer != env.SecondReviewer.Name:
		t.Errorf("verdict %q by %q; want approved by reviewer2", c.Verdict, c.Reviewer)
	case len(c.Reviews) != 2 || c.Reviews[0].Reviewer != env.Reviewer.Name || c.Reviews[0].Verdict != audit.VerdictRejected || !c.Reviews[0].Counts ||
		c.Reviews[1].Reviewer != env.SecondReviewer.Name || c.Reviews[1].Overturns != rejection || !c.Reviews[1].Counts:
		t.Errorf("review history %+v; want reviewer's rejection (record %d), then reviewer2's approval overturning it", c.Reviews, rejection)
	}
	if out, _, _ := auditor.run("kubectl", "gitops", "audit", "report"); !strings.Contains(out, fmt.Sprintf("reviewer2 approved overturning record %d", rejection)) {
		t.Errorf("the markdown report does not show the overturn:\n%s", out)
	}
	assertChainIntact(t, oncall)
}
