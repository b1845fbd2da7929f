//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
	"github.com/kubectl-gitops/kubectl-gitops/test/jiradouble"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

const (
	jiraUserName = "oncall@example.com"
	jiraToken    = "jira-token-5f4e3d2c1b0a"
	dbPassword   = "hunter2-do-not-leak"
)

func eventsOf(t *testing.T, session string) string {
	var events []string
	for _, r := range sessionRecords(t, session) {
		events = append(events, string(r.Event)+"/"+r.Outcome.Status)
	}
	return strings.Join(events, ",")
}

func assertNoSecretsSent(t *testing.T, d *jiradouble.Server, more ...string) {
	t.Helper()
	for _, r := range d.Requests() {
		for _, secret := range append([]string{jiraToken, dbPassword}, more...) {
			if strings.Contains(r.Body, secret) || strings.Contains(r.Query.Encode(), secret) {
				t.Errorf("%s %s carried a secret in its body or query", r.Method, r.Path)
			}
		}
	}
}

func TestTicketFollowsTheSessionFromBreakglassToRestore(t *testing.T) {
	e := environment(t)
	deployApp(t, "tk-loop")
	d := startJira(t)
	argoToken, err := e.ArgoToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	oncall := newUser(t, env.Oncall.Name, jiraEnv(d.URL, jiraToken,
		"ARGOCD_SERVER="+e.ArgoServerAddr, "ARGOCD_AUTH_TOKEN="+argoToken, "ARGOCD_OPTS=--plaintext")...)
	// Jira is busy at first: it asks to come back in a second.
	d.Inject(jiradouble.Fault{Method: "POST", PathPrefix: "/rest/api/2/issue", Status: 429, RetryAfter: "1", Times: 1})
	out, _ := mustRun(t, oncall, 0, "breakglass", "tk-loop", "deployment/web", "--image", "web=registry.example/web:hotfix",
		"--reason", "5xx *spike* {code}\x1b[31m|after 1.0.0", "--incident", "INC-7", "-y")

	issues := d.Issues()
	if len(issues) != 1 {
		t.Fatalf("%d issues filed, want 1", len(issues))
	}
	issue := issues[0]
	if !strings.Contains(out, "ticket "+issue.Key+": "+d.URL+"/browse/"+issue.Key) {
		t.Errorf("breakglass does not name the ticket: %s", out)
	}
	session := sessionOf(t, "tk-loop")
	if session.Ticket != issue.Key || session.TicketPending != "" {
		t.Errorf("session ticket %q pending %q, want %s", session.Ticket, session.TicketPending, issue.Key)
	}
	if issue.Summary != "Reconcile Git after break-glass on tk-loop: Deployment/web" {
		t.Errorf("summary %q", issue.Summary)
	}
	if want := "breakglass,tk-loop," + "kubectl-gitops-session-" + session.ID; strings.Join(issue.Labels, ",") != want {
		t.Errorf("labels %v, want %s", issue.Labels, want)
	}
	for _, want := range []string{
		"||Who|oncall",
		`||Reason|5xx \*spike\* \{code\} \[31m\|after 1.0.0|`,
		`||Incident|INC\-7|`,
		"* Repository: " + strings.ReplaceAll(e.Git.URL(), "-", `\-`),
		"* Path: apps/tk\\-loop",
		// The fixture is a plain directory of manifests, as Argo CD reports.
		"Set these values in the manifests under apps/tk\\-loop:\n* container web: image: registry.example/web:hotfix",
		`|/spec/template/spec/containers/web/image|"registry.example/web:1.0.0"|"registry.example/web:hotfix"|`,
		"kubectl gitops restore tk-loop",
	} {
		if !strings.Contains(issue.Description, want) {
			t.Errorf("description lacks %q:\n%s", want, issue.Description)
		}
	}
	if want := "http://" + e.ArgoServerAddr + "/applications/argocd/tk-loop"; len(issue.RemoteLinks) != 1 || issue.RemoteLinks[0] != want {
		t.Errorf("remote links %v, want the Argo CD page %s", issue.RemoteLinks, want)
	}
	var creates int
	for _, r := range d.Requests() {
		if r.Method == "POST" && r.Path == "/rest/api/2/issue" {
			creates++
		}
	}
	if creates != 2 {
		t.Errorf("%d create requests, want 2 (a 429, then the retry)", creates)
	}
	if got := eventsOf(t, session.ID); got != "breakglass.planned/started,breakglass.paused/succeeded,breakglass.patched/succeeded,breakglass.ticketed/started,breakglass.ticketed/succeeded" {
		t.Errorf("records %s", got)
	}

	// A later patch joins the session and comments on the same ticket;
	// the secret it sets never reaches Jira.
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"DB_PASSWORD","value":"` + dbPassword + `"}]}]}}}}`
	_, errOut := mustRun(t, oncall, 1, "breakglass", "tk-loop", "deployment/web", "--patch", patch, "--reason", "rotate", "-y")
	if !strings.Contains(errOut, "add --join") {
		t.Errorf("a second breakglass without --join: %q", errOut)
	}
	out, _ = mustRun(t, oncall, 0, "breakglass", "tk-loop", "deployment/web", "--patch", patch, "--reason", "rotate", "--join", "-y")
	if !strings.Contains(out, "within session "+session.ID) {
		t.Errorf("--join output: %s", out)
	}
	issue = d.Issues()[0]
	if len(d.Issues()) != 1 || len(issue.Comments) != 1 || !strings.Contains(issue.Comments[0], "Another break-glass patch in session") || !strings.Contains(issue.Comments[0], audit.Redacted) {
		t.Fatalf("the later patch did not comment on %s: %d issues, comments %q", issue.Key, len(d.Issues()), issue.Comments)
	}
	if s := sessionOf(t, "tk-loop"); len(s.Patches) != 2 || string(s.SavedSyncPolicy) != string(session.SavedSyncPolicy) {
		t.Errorf("joined session: %d patches, saved policy %s", len(s.Patches), s.SavedSyncPolicy)
	}
	out, _ = mustRun(t, oncall, 0, "status", "tk-loop")
	if !strings.Contains(out, issue.Key) {
		t.Errorf("status does not show the ticket: %s", out)
	}

	// Restore closes the loop in Jira.
	out, _ = mustRun(t, oncall, 0, "restore", "tk-loop", "--force", "--reason", "fix abandoned", "-y")
	if !strings.Contains(out, "ticket "+issue.Key+" commented and closed") {
		t.Errorf("restore output: %s", out)
	}
	issue = d.Issues()[0]
	if issue.Status != "Done" || len(issue.Comments) != 2 || !strings.Contains(issue.Comments[1], "with --force") || !strings.Contains(issue.Comments[1], "fix abandoned") {
		t.Errorf("after restore: status %s, comments %q", issue.Status, issue.Comments)
	}
	last := sessionRecords(t, session.ID)
	if r := last[len(last)-1]; r.Event != audit.EventForced || r.Outcome.Status != audit.StatusSucceeded || r.Ticket == nil || r.Ticket.Key != issue.Key {
		t.Errorf("the forced record does not carry the closed ticket: %+v", r)
	}

	// The ticket witnesses the log: the description names the record
	// written just before it was filed, every comment the newest at its
	// time, and verify --jira checks them against the chain.
	var filed *audit.Record
	for _, r := range last {
		if r.Event == audit.EventTicketed && r.Outcome.Status == audit.StatusStarted {
			filed = r
			break
		}
	}
	if filed == nil || !strings.Contains(issue.Description, fmt.Sprintf("Audit log witness: record %d, hash %s", filed.Seq, filed.Hash)) {
		t.Errorf("the description does not witness the ticketed record %+v", filed)
	}
	for i, c := range issue.Comments {
		if !strings.Contains(c, "Audit log witness: record ") {
			t.Errorf("comment %d has no witness: %q", i, c)
		}
	}
	witnessed := func(args ...string) audit.Report {
		out, errOut, code := oncall.run("kubectl", append([]string{"gitops", "audit", "verify", "--jira", "-o", "json"}, args...)...)
		var rep audit.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code > 1 {
			t.Fatalf("audit verify --jira: exit %d, %v: %s", code, errOut, err)
		}
		return rep
	}
	rep := witnessed()
	if rep.Witnesses < 3 {
		t.Errorf("verify --jira checked %d witnesses, want the description's and both comments'", rep.Witnesses)
	}
	for _, b := range rep.Breaks {
		if b.Kind == audit.BreakWitness {
			t.Errorf("a witness of the real log does not match: %s", b)
		}
	}
	// A log rewritten from scratch, consistent in itself, passes a plain
	// verify but not the witnesses Jira kept.
	rewritten := filepath.Join(t.TempDir(), "rewritten.jsonl")
	store := &audit.FileStore{Path: rewritten}
	for i := uint64(0); i < filed.Seq+5; i++ {
		if err := store.Append(context.Background(), &audit.Record{Event: audit.EventPlanned, Actor: audit.Actor{Username: "oncall"}, Reason: "nothing happened", Outcome: audit.Outcome{Status: audit.StatusStarted}}); err != nil {
			t.Fatal(err)
		}
	}
	if out, _, code := oncall.run("kubectl", "gitops", "audit", "verify", "--file", rewritten); code != 0 {
		t.Fatalf("the rewritten log should verify on its own: %s", out)
	}
	rep = witnessed("--file", rewritten)
	want := fmt.Sprintf("%s witnessed record %d with hash %s", issue.Key, filed.Seq, filed.Hash[:12])
	found := false
	for _, b := range rep.Breaks {
		found = found || (b.Kind == audit.BreakWitness && strings.Contains(b.Detail, want))
	}
	if !found {
		t.Errorf("verify --jira of a rewritten log: %+v, want a witness-mismatch naming %q", rep.Breaks, want)
	}
	assertNoSecretsSent(t, d, argoToken)
}

func TestTicketQueuedWhileJiraIsDownIsFiledOnce(t *testing.T) {
	deployApp(t, "tk-down")
	ctx := context.Background()
	down := newUser(t, env.Oncall.Name, jiraEnv(unreachableURL(t), jiraToken)...)
	out, errOut := mustRun(t, down, 0, "breakglass", "tk-down", "deployment/web", "--replicas", "4", "--reason", "load", "-y")
	if !strings.Contains(errOut, "warning: ticket queued: jira is unreachable") || strings.Count(errOut, "ticket queued") != 1 {
		t.Errorf("breakglass with Jira down should warn once:\nstdout: %s\nstderr: %s", out, errOut)
	}
	if n := replicasIn(ctx, t, "tk-down"); n != 4 {
		t.Fatalf("the break-glass did not happen with Jira down: replicas %d", n)
	}
	session := sessionOf(t, "tk-down")
	if got := eventsOf(t, session.ID); got != "breakglass.planned/started,breakglass.paused/succeeded,breakglass.patched/succeeded,breakglass.ticketed/started,ticket.queued/queued" {
		t.Errorf("records %s", got)
	}
	if out, _ := mustRun(t, down, 0, "status", "tk-down"); !strings.Contains(out, "queued") {
		t.Errorf("status does not show the queued ticket: %s", out)
	}

	d := startJira(t)
	wrong := newUser(t, env.Oncall.Name, jiraEnv(d.URL, "not-the-token-123")...)
	failedBefore := countEvents(t, audit.EventFailed)
	_, errOut = mustRun(t, wrong, 1, "ticket", "sync")
	if n := countEvents(t, audit.EventFailed) - failedBefore; n != 1 {
		t.Errorf("a sync with a wrong token recorded %d ticket.failed records; after the first 401 it should stop", n)
	}
	if !strings.Contains(errOut, "401 Unauthorized") || !strings.Contains(errOut, "check JIRA_USER and JIRA_API_TOKEN") || strings.Contains(errOut, "not-the-token") {
		t.Errorf("ticket sync with a wrong token: %q", errOut)
	}
	if len(d.Issues()) != 0 {
		t.Fatalf("filed with a wrong token")
	}

	// Two runs at once file the ticket once.
	up := newUser(t, env.Oncall.Name, jiraEnv(d.URL, jiraToken)...)
	outs := make([]string, 2)
	codes := make([]int, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			outs[i], _, codes[i] = up.run("kubectl", "gitops", "ticket", "sync")
		}(i)
	}
	wg.Wait()
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("concurrent ticket sync: exit codes %v, output %q", codes, outs)
	}
	// Other tests' sessions ran without Jira and are queued too: they are
	// filed alongside, each once.
	issues := sessionIssues(d, session.ID)
	if len(issues) != 1 {
		t.Fatalf("%d tickets filed by two concurrent runs, want 1 (output %q)", len(issues), outs)
	}
	if !strings.Contains(outs[0]+outs[1], "tk-down session "+session.ID+": "+issues[0].Key+" filed") {
		t.Errorf("neither run says it filed %s: %q", issues[0].Key, outs)
	}
	filed := len(d.Issues())
	if out, _ := mustRun(t, up, 0, "ticket", "sync"); !strings.Contains(out, "no queued tickets") {
		t.Errorf("a third run found work: %s", out)
	}
	if len(d.Issues()) != filed {
		t.Errorf("a later run filed again")
	}
	if s := sessionOf(t, "tk-down"); s.Ticket != issues[0].Key || s.TicketPending != "" {
		t.Errorf("the open session did not learn its ticket: %+v", s)
	}

	// Jira goes down again for the restore: the close is queued, then synced.
	downAgain := newUser(t, env.Oncall.Name, jiraEnv(unreachableURL(t), jiraToken)...)
	_, errOut = mustRun(t, downAgain, 0, "restore", "tk-down", "--force", "--reason", "load gone", "-y")
	if !strings.Contains(errOut, "warning: ticket queued") {
		t.Errorf("restore with Jira down: %q", errOut)
	}
	out, _ = mustRun(t, up, 0, "ticket", "sync")
	closed := sessionIssues(d, session.ID)[0]
	if !strings.Contains(out, issues[0].Key+" closed") || closed.Status != "Done" {
		t.Errorf("sync after the restore: %s, status %s", out, closed.Status)
	}
	if len(closed.Comments) != 1 || !strings.Contains(closed.Comments[0], "load gone") {
		t.Errorf("comments %q, want only the forced restore's comment", closed.Comments)
	}
	assertChainIntact(t, up)
	assertNoSecretsSent(t, d)
}

func countEvents(t *testing.T, event audit.Event) int {
	n := 0
	for _, r := range allRecords(t) {
		if r.Event == event {
			n++
		}
	}
	return n
}

// sessionIssues are the double's issues labelled for session.
func sessionIssues(d *jiradouble.Server, session string) []jiradouble.Issue {
	var out []jiradouble.Issue
	for _, i := range d.Issues() {
		for _, l := range i.Labels {
			if l == ticket.SessionLabel(session) {
				out = append(out, i)
			}
		}
	}
	return out
}

func TestTicketFlagAttachesToAnExistingIssue(t *testing.T) {
	deployApp(t, "tk-attach")
	d := startJira(t)
	key := d.AddIssue("INC-9: web is down")
	oncall := newUser(t, env.Oncall.Name, jiraEnv(d.URL, jiraToken)...)
	_, errOut := mustRun(t, oncall, 1, "breakglass", "tk-attach", "deployment/web", "--replicas", "3", "--reason", "load", "--ticket", "OPS-404", "-y")
	if !strings.Contains(errOut, "ticket not found: OPS-404") || !strings.Contains(errOut, "Issue does not exist") || !strings.Contains(errOut, "give --ticket an existing issue") {
		t.Errorf("--ticket of a missing issue: %q", errOut)
	}
	if a, err := appsClient(t).Get(context.Background(), "tk-attach", metav1.GetOptions{}); err != nil || a.GetAnnotations()[breakglass.SessionAnnotation] != "" {
		t.Fatalf("a missing --ticket opened a session")
	}
	mustRun(t, oncall, 2, "breakglass", "tk-attach", "deployment/web", "--replicas", "3", "--reason", "load", "--ticket", "not a key", "-y")

	mustRun(t, oncall, 0, "breakglass", "tk-attach", "deployment/web", "--replicas", "3", "--reason", "load", "--ticket", key, "-y")
	issues := d.Issues()
	if len(issues) != 1 || len(issues[0].Comments) != 1 || !strings.Contains(issues[0].Comments[0], "Bring Git up to the live state") {
		t.Fatalf("--ticket should comment the details on %s, not file another: %+v", key, issues)
	}
	if s := sessionOf(t, "tk-attach"); s.Ticket != key {
		t.Errorf("session ticket %q, want %s", s.Ticket, key)
	}
}
