package plugin

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// reportLog writes a log an auditor would sample: a session restored,
// rejected within a day and approved by a second reviewer overturning the
// rejection, one forced and never reviewed, one joined by a second
// engineer, rejected three days after its restore, one still open, and
// one that aborted.
func reportLog(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	store := &audit.FileStore{Path: path}
	at := func(day, hour, minute int) time.Time { return time.Date(2026, 11, day, hour, minute, 0, 0, time.UTC) }
	deploy := &audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	ok, started := audit.Outcome{Status: audit.StatusSucceeded}, audit.Outcome{Status: audit.StatusStarted}
	app := func(name string) *audit.AppRef { return &audit.AppRef{Namespace: "argocd", Name: name} }
	image := []audit.Change{{Path: "/spec/template/spec/containers/web/image", Before: "web:1.2.3", After: "web:1.2.2"}}
	replicas := []audit.Change{{Path: "/spec/replicas", Before: 2.0, After: 6.0}}
	who := func(u string) audit.Actor { return audit.Actor{Username: u} }
	reviewer := func(u string) audit.Actor { return audit.Actor{Username: u, Groups: []string{audit.ReviewerGroup}} }
	for _, r := range []*audit.Record{
		{Time: at(2, 3, 10), Event: audit.EventPlanned, Session: "s-restored", Actor: who("alice"), Application: app("web"), Reason: "5xx after 1.2.3", Incident: "INC-1", Outcome: started},
		{Time: at(2, 3, 11), Event: audit.EventPatched, Session: "s-restored", Actor: who("alice"), Application: app("web"), Target: deploy, Changes: image, Outcome: ok},
		{Time: at(2, 3, 12), Event: audit.EventTicketed, Session: "s-restored", Actor: who("alice"), Application: app("web"), Ticket: &audit.Ticket{Key: "OPS-1"}, Outcome: ok},
		{Time: at(2, 9, 40), Event: audit.EventRestored, Session: "s-restored", Actor: who("carol"), Application: app("web"), Git: &audit.Git{Revision: "abc1234"}, Ticket: &audit.Ticket{Key: "OPS-1"}, Outcome: ok},
		{Time: at(3, 8, 0), ID: "rv-rita", Event: audit.EventReviewed, Session: "s-restored", Actor: reviewer("rita"), Application: app("web"), Review: &audit.Review{Verdict: audit.VerdictRejected, Note: "no ticket comment"}, Outcome: ok},
		{Time: at(4, 9, 0), Event: audit.EventReviewed, Session: "s-restored", Actor: reviewer("rex"), Application: app("web"), Review: &audit.Review{Verdict: audit.VerdictApproved, Note: "the ticket has it: right call", Overturns: "rv-rita"}, Outcome: ok},

		{Time: at(10, 22, 0), Event: audit.EventPlanned, Session: "s-forced", Actor: who("bob"), Application: app("cart"), Reason: "=cmd|' /C calc'!A0", Outcome: started},
		{Time: at(10, 22, 1), Event: audit.EventPatched, Session: "s-forced", Actor: who("bob"), Application: app("cart"), Target: deploy, Changes: replicas, Outcome: ok},
		{Time: at(11, 0, 30), Event: audit.EventForced, Session: "s-forced", Actor: who("bob"), Application: app("cart"), Reason: "Git fix delayed", Outcome: ok},

		{Time: at(20, 1, 0), Event: audit.EventPlanned, Session: "s-joined", Actor: who("alice"), Application: app("web"), Reason: "memory | leak", Outcome: started},
		{Time: at(20, 1, 2), Event: audit.EventPatched, Session: "s-joined", Actor: who("alice"), Application: app("web"), Target: deploy, Changes: replicas, Outcome: ok},
		{Time: at(20, 1, 30), Event: audit.EventPlanned, Session: "s-joined", Actor: who("dave"), Application: app("web"), Reason: "and the image", Outcome: started},
		{Time: at(20, 1, 31), Event: audit.EventPatched, Session: "s-joined", Actor: who("dave"), Application: app("web"), Target: deploy, Changes: image, Outcome: ok},
		{Time: at(20, 5, 0), Event: audit.EventRestored, Session: "s-joined", Actor: who("alice"), Application: app("web"), Git: &audit.Git{Revision: "def5678"}, Outcome: ok},
		{Time: at(23, 5, 0), Event: audit.EventReviewed, Session: "s-joined", Actor: reviewer("rita"), Application: app("web"), Review: &audit.Review{Verdict: audit.VerdictRejected, Note: "should have scaled first"}, Outcome: ok},

		{Time: at(28, 12, 0), Event: audit.EventPlanned, Session: "s-open", Actor: who("carol"), Application: app("search"), Reason: "hot index", Outcome: started},
		{Time: at(28, 12, 1), Event: audit.EventPatched, Session: "s-open", Actor: who("carol"), Application: app("search"), Target: deploy, Changes: replicas, Outcome: ok},

		{Time: at(29, 12, 0), Event: audit.EventPlanned, Session: "s-aborted", Actor: who("bob"), Application: app("cart"), Reason: "typo", Outcome: started},
		{Time: at(29, 12, 1), Event: audit.EventAborted, Session: "s-aborted", Actor: who("bob"), Application: app("cart"), Outcome: audit.Outcome{Status: audit.StatusFailed, Error: "patch rejected"}},
	} {
		if err := store.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// TestAuditReportGoldens: the evidence report in each format over one log.
func TestAuditReportGoldens(t *testing.T) {
	path := reportLog(t)
	for _, format := range []string{"markdown", "csv", "json"} {
		t.Run(format, func(t *testing.T) {
			code, out, errOut := runPlugin(t, "audit", "report", "--file", path, "-o", format)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			// The report names the file as given: a temporary one here.
			golden(t, "audit-report-"+format+".golden", normalise(strings.ReplaceAll(out+"--- stderr\n"+errOut, path, "audit.jsonl")))
		})
	}
	// The report says when the log it came from is not intact, and exits 1.
	code, out, _ := runPlugin(t, "audit", "report", "--file", filepath.Join(t.TempDir(), "missing.jsonl"))
	if code == ExitOK {
		t.Errorf("a missing log: exit %d, %s", code, out)
	}
}

// TestAuditReportShowsEveryReview: a second on-call, outside the session,
// approves a session the reviewer rejected (issue #32). The report shows
// both reviews, the rejection stands, the approval is named as out of the
// rules of review, and the session counts as without an approval.
func TestAuditReportShowsEveryReview(t *testing.T) {
	path := reportLog(t)
	oscar := &audit.Record{Event: audit.EventReviewed, Session: "s-joined", Actor: audit.Actor{Username: "oscar", Groups: []string{"oncall"}},
		Application: &audit.AppRef{Namespace: "argocd", Name: "web"}, Review: &audit.Review{Verdict: audit.VerdictApproved, Note: "fine by me"},
		Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
	if err := (&audit.FileStore{Path: path}).Append(context.Background(), oscar); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runPlugin(t, "audit", "report", "--file", path, "-o", "json")
	if code != ExitFailure {
		t.Errorf("exit %d; want 1, verify names the review", code)
	}
	var ev Evidence
	if err := json.Unmarshal([]byte(out), &ev); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var joined *audit.EmergencyChange
	for i := range ev.Changes {
		if ev.Changes[i].Session == "s-joined" {
			joined = &ev.Changes[i]
		}
	}
	switch {
	case joined == nil:
		t.Fatalf("no s-joined in %s", out)
	case joined.Verdict != audit.VerdictRejected || joined.Reviewer != "rita":
		t.Errorf("verdict %q by %q; want rejected by rita", joined.Verdict, joined.Reviewer)
	case len(joined.Reviews) != 2 || !joined.Reviews[0].Counts || joined.Reviews[1].Counts || joined.Reviews[1].Reviewer != "oscar" ||
		!strings.HasPrefix(joined.Reviews[1].Finding, "review-out-of-rules: reviewed by oscar, who is not in group reviewers"):
		t.Errorf("history %+v", joined.Reviews)
	}
	if ev.Summary.Unreviewed != 2 {
		t.Errorf("%d sessions without an approval; want 2 (s-forced, s-joined)", ev.Summary.Unreviewed)
	}
	if len(ev.Log.Breaks) != 1 || ev.Log.Breaks[0].Kind != audit.BreakReviewOutOfRules || ev.Log.Breaks[0].Seq != oscar.Seq {
		t.Errorf("breaks %+v; want review-out-of-rules at %d", ev.Log.Breaks, oscar.Seq)
	}
}

// TestAuditLogUnreviewed: only the sessions restored or forced that no
// approval stands for are listed: never reviewed, or rejected (an
// on-call's approval does not count).
func TestAuditLogUnreviewed(t *testing.T) {
	path := reportLog(t)
	code, out, errOut := runPlugin(t, "audit", "log", "--file", path, "--unreviewed", "-o", "wide")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"s-forced", "s-joined"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s:\n%s", want, out)
		}
	}
	for _, not := range []string{"s-restored", "s-open", "s-aborted"} {
		if strings.Contains(out, not) {
			t.Errorf("%s is listed as unreviewed:\n%s", not, out)
		}
	}
}
