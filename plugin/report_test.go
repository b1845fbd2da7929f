package plugin

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// reportLog writes a log an auditor would sample: a session restored and
// reviewed within a day, one forced and never reviewed, one joined by a
// second engineer, rejected three days after its restore, one still open,
// and one that aborted.
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
	for _, r := range []*audit.Record{
		{Time: at(2, 3, 10), Event: audit.EventPlanned, Session: "s-restored", Actor: who("alice"), Application: app("web"), Reason: "5xx after 1.2.3", Incident: "INC-1", Outcome: started},
		{Time: at(2, 3, 11), Event: audit.EventPatched, Session: "s-restored", Actor: who("alice"), Application: app("web"), Target: deploy, Changes: image, Outcome: ok},
		{Time: at(2, 3, 12), Event: audit.EventTicketed, Session: "s-restored", Actor: who("alice"), Application: app("web"), Ticket: &audit.Ticket{Key: "OPS-1"}, Outcome: ok},
		{Time: at(2, 9, 40), Event: audit.EventRestored, Session: "s-restored", Actor: who("carol"), Application: app("web"), Git: &audit.Git{Revision: "abc1234"}, Ticket: &audit.Ticket{Key: "OPS-1"}, Outcome: ok},
		{Time: at(3, 8, 0), Event: audit.EventReviewed, Session: "s-restored", Actor: who("rita"), Application: app("web"), Review: &audit.Review{Verdict: audit.VerdictApproved, Note: "right call"}, Outcome: ok},

		{Time: at(10, 22, 0), Event: audit.EventPlanned, Session: "s-forced", Actor: who("bob"), Application: app("cart"), Reason: "=cmd|' /C calc'!A0", Outcome: started},
		{Time: at(10, 22, 1), Event: audit.EventPatched, Session: "s-forced", Actor: who("bob"), Application: app("cart"), Target: deploy, Changes: replicas, Outcome: ok},
		{Time: at(11, 0, 30), Event: audit.EventForced, Session: "s-forced", Actor: who("bob"), Application: app("cart"), Reason: "Git fix delayed", Outcome: ok},

		{Time: at(20, 1, 0), Event: audit.EventPlanned, Session: "s-joined", Actor: who("alice"), Application: app("web"), Reason: "memory | leak", Outcome: started},
		{Time: at(20, 1, 2), Event: audit.EventPatched, Session: "s-joined", Actor: who("alice"), Application: app("web"), Target: deploy, Changes: replicas, Outcome: ok},
		{Time: at(20, 1, 30), Event: audit.EventPlanned, Session: "s-joined", Actor: who("dave"), Application: app("web"), Reason: "and the image", Outcome: started},
		{Time: at(20, 1, 31), Event: audit.EventPatched, Session: "s-joined", Actor: who("dave"), Application: app("web"), Target: deploy, Changes: image, Outcome: ok},
		{Time: at(20, 5, 0), Event: audit.EventRestored, Session: "s-joined", Actor: who("alice"), Application: app("web"), Git: &audit.Git{Revision: "def5678"}, Outcome: ok},
		{Time: at(23, 5, 0), Event: audit.EventReviewed, Session: "s-joined", Actor: who("rita"), Application: app("web"), Review: &audit.Review{Verdict: audit.VerdictRejected, Note: "should have scaled first"}, Outcome: ok},

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

// TestAuditLogUnreviewed: only the sessions restored or forced that nobody
// reviewed are listed.
func TestAuditLogUnreviewed(t *testing.T) {
	path := reportLog(t)
	code, out, errOut := runPlugin(t, "audit", "log", "--file", path, "--unreviewed", "-o", "wide")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"s-forced"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s:\n%s", want, out)
		}
	}
	for _, not := range []string{"s-restored", "s-joined", "s-open", "s-aborted"} {
		if strings.Contains(out, not) {
			t.Errorf("%s is listed as unreviewed:\n%s", not, out)
		}
	}
}
