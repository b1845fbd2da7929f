package ticket

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/test/jiradouble"
)

const (
	testUser  = "oncall@example.com"
	testToken = "tok-9f8e7d6c5b4a39281706"
)

// patchedRecord is a stored breakglass.patched record as the engine writes
// it.
func patchedRecord() *audit.Record {
	return &audit.Record{
		ID: "20261202-031502-abcdef", Time: time.Date(2026, 12, 2, 3, 15, 2, 0, time.UTC),
		Event: audit.EventPatched, Session: "20261202-031500-x7k2p",
		Actor:  audit.Actor{Username: "oncall", Groups: []string{"oncall"}},
		Client: audit.Client{Host: "laptop", User: "sam"},
		Reason: "5xx spike after 1.0.0", Incident: "INC-42",
		Application: &audit.AppRef{Namespace: "argocd", Name: "web", Project: "default"},
		Cluster:     &audit.Cluster{Server: "https://kubernetes.default.svc"},
		Target:      &audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"},
		Patch:       &audit.Patch{Type: "strategic", Body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example/web:0.9.8"}]}}}}`},
		Changes: []audit.Change{
			{Path: "/spec/template/spec/containers/web/image", Before: "registry.example/web:1.0.0", After: "registry.example/web:0.9.8"},
			{Path: "/spec/replicas", Before: float64(2), After: float64(6)},
		},
		Git: &audit.Git{Revision: "86a717c0d2e4f6a8b0c1d2e3f4a5b6c7d8e9f0a1"},
	}
}

func reconcile() Reconcile {
	return Reconcile{Patches: []*audit.Record{patchedRecord()}, Source: argocd.Source{RepoURL: "https://git.example/deploy.git", Path: "apps/web", TargetRevision: "HEAD"}, Restore: "kubectl gitops restore web"}
}

func newDouble(t *testing.T, opts jiradouble.Options) *jiradouble.Server {
	if opts.PAT == "" {
		opts.User, opts.Token = testUser, testToken
	}
	d := jiradouble.Start(t, opts)
	t.Cleanup(d.Close)
	return d
}

// client returns a client for d whose retry waits are recorded, not slept.
func client(t *testing.T, d *jiradouble.Server, edit func(*Config)) (*Jira, *[]time.Duration) {
	t.Helper()
	cfg := Config{URL: d.URL, Project: "OPS", IssueType: "Task", User: testUser, APIToken: testToken, DoneTransition: "Done", Timeout: "2s"}
	if edit != nil {
		edit(&cfg)
	}
	j, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	j.retry.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	return j, &waits
}

func TestCreateFilesTheTicketFieldByField(t *testing.T) {
	d := newDouble(t, jiradouble.Options{})
	j, _ := client(t, d, func(c *Config) { c.Labels = "sre, prod"; c.Component = "platform"; c.Priority = "High" })
	issue, err := j.Create(context.Background(), reconcile())
	if err != nil {
		t.Fatal(err)
	}
	if issue.Key != "OPS-1" || issue.URL != d.URL+"/browse/OPS-1" {
		t.Errorf("issue %+v", issue)
	}
	got := d.Issues()[0]
	if got.Summary != "Reconcile Git after break-glass on web: Deployment/web" {
		t.Errorf("summary %q", got.Summary)
	}
	if want := []string{"breakglass", "web", "kubectl-gitops-session-20261202-031500-x7k2p", "sre", "prod"}; strings.Join(got.Labels, ",") != strings.Join(want, ",") {
		t.Errorf("labels %v, want %v", got.Labels, want)
	}
	if got.IssueType != "Task" || got.Project != "OPS" || got.Priority != "High" || strings.Join(got.Components, ",") != "platform" {
		t.Errorf("type/project/priority/components: %+v", got)
	}
	for _, want := range []string{
		"||Who|oncall \\(as sam on laptop\\)|",
		"||When|2026\\-12\\-02 03:15:02 UTC|",
		"||Reason|5xx spike after 1.0.0|",
		"||Incident|INC\\-42|",
		"||Application|argocd/web \\(project default\\)|",
		"* Repository: https://git.example/deploy.git",
		"* Path: apps/web",
		"* Revision at break-glass: 86a717c0d2e4f6a8b0c1d2e3f4a5b6c7d8e9f0a1",
		"cd apps/web\nkustomize edit set image registry.example/web=registry.example/web:0.9.8\n",
		"* /spec/replicas = 6",
		"|/spec/template/spec/containers/web/image|\"registry.example/web:1.0.0\"|\"registry.example/web:0.9.8\"|",
		"h3. The patch (strategic, secret values redacted)\n{noformat}\n{\"spec\"",
		"kubectl gitops restore web",
		"kubectl gitops audit show 20261202\\-031502\\-abcdef",
	} {
		if !strings.Contains(got.Description, want) {
			t.Errorf("description lacks %q:\n%s", want, got.Description)
		}
	}
	for _, r := range d.Requests() {
		if strings.Contains(r.Body, testToken) || strings.Contains(r.Body, testUser) {
			t.Errorf("a request body carries a credential: %s %s", r.Method, r.Path)
		}
		if r.Auth != "basic" {
			t.Errorf("%s %s sent auth %q, want basic", r.Method, r.Path, r.Auth)
		}
	}
}

func TestUserTextArrivesEscaped(t *testing.T) {
	d := newDouble(t, jiradouble.Options{})
	j, _ := client(t, d, nil)
	rc := reconcile()
	rc.Patches[0].Reason = "h1. *bold* {code}x{code} [link|http://evil] !img.png! |cell| \x1b[31mred\x07\r\nline2 (y) -strike- {noformat}"
	rc.Patches[0].Patch.Body = "{noformat}\nspec: {}\x00"
	if _, err := j.Create(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	desc := d.Issues()[0].Description
	want := `||Reason|h1. \*bold\* \{code\}x\{code\} \[link\|http://evil\] \!img.png\! \|cell\|  \[31mred   line2 \(y\) \-strike\- \{noformat\}|`
	if !strings.Contains(desc, want) {
		t.Errorf("reason not escaped:\n%s\nwant %s", desc, want)
	}
	for _, bad := range []string{"\x1b", "\x07", "\x00", "\r"} {
		if strings.Contains(desc, bad) {
			t.Errorf("control character %q reached Jira", bad)
		}
	}
	if strings.Count(desc, "{noformat}")%2 != 0 || strings.Contains(desc, "{noformat}\nspec") {
		t.Errorf("user text closed a {noformat} block:\n%s", desc)
	}
}

func TestLongDescriptionsFitJirasLimit(t *testing.T) {
	d := newDouble(t, jiradouble.Options{})
	j, _ := client(t, d, nil)
	rc := reconcile()
	rc.Patches[0].Patch.Body = strings.Repeat("é", 40000)
	if _, err := j.Create(context.Background(), rc); err != nil {
		t.Fatalf("a long patch made Jira refuse the ticket: %v", err)
	}
	desc := d.Issues()[0].Description
	if n := utf8.RuneCountInString(desc); n > MaxFieldLength {
		t.Errorf("description has %d characters", n)
	}
	if !strings.Contains(desc, "Truncated to fit Jira's 32767-character limit") || strings.Count(desc, "{noformat}")%2 != 0 {
		t.Errorf("truncation note or block closing missing: %s", desc[len(desc)-300:])
	}
}

func TestRetriesHonourRetryAfter(t *testing.T) {
	d := newDouble(t, jiradouble.Options{})
	j, waits := client(t, d, nil)
	d.Inject(jiradouble.Fault{Method: "POST", PathPrefix: "/rest/api/2/issue", Status: 429, RetryAfter: "3", Times: 2})
	if _, err := j.Create(context.Background(), reconcile()); err != nil {
		t.Fatal(err)
	}
	if len(d.Issues()) != 1 {
		t.Fatalf("%d issues after two 429s, want 1", len(d.Issues()))
	}
	if len(*waits) != 2 || (*waits)[0] != 3*time.Second || (*waits)[1] != 3*time.Second {
		t.Errorf("waited %v, want Retry-After's 3s twice", *waits)
	}
	var statuses []int
	for _, r := range d.Requests() {
		statuses = append(statuses, r.Status)
	}
	if len(statuses) != 3 || statuses[2] != 201 {
		t.Errorf("statuses %v, want 429, 429, 201", statuses)
	}
}

// TestCreateThatReachedJiraIsNotFiledTwice: Jira filed the issue but its
// answer was lost (a 502, or no answer before the timeout); the retry finds
// it by the session label instead of filing a duplicate.
func TestCreateThatReachedJiraIsNotFiledTwice(t *testing.T) {
	for _, fault := range []jiradouble.Fault{
		{Method: "POST", PathPrefix: "/rest/api/2/issue", Status: 502, AfterProcessing: true, Times: 1},
		{Method: "POST", PathPrefix: "/rest/api/2/issue", Hang: true, AfterProcessing: true, Times: 1},
	} {
		d := newDouble(t, jiradouble.Options{})
		j, _ := client(t, d, func(c *Config) { c.Timeout = "1s" })
		d.Inject(fault)
		issue, err := j.Create(context.Background(), reconcile())
		if err != nil || issue.Key != "OPS-1" || len(d.Issues()) != 1 {
			t.Errorf("fault %+v: issue %+v, err %v, %d issues filed; want OPS-1 once", fault, issue, err, len(d.Issues()))
		}
	}
}

func TestUnavailableJiraIsUnreachableAfterBoundedRetries(t *testing.T) {
	d := newDouble(t, jiradouble.Options{})
	j, waits := client(t, d, nil)
	d.Inject(jiradouble.Fault{Method: "POST", PathPrefix: "/rest/api/2/issue", Status: 503})
	_, err := j.Create(context.Background(), reconcile())
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "kubectl gitops ticket sync") {
		t.Fatalf("error %v, want ErrUnreachable saying how to file later", err)
	}
	creates := 0
	for _, r := range d.Requests() {
		if r.Method == "POST" {
			creates++
		}
	}
	if creates != maxAttempts || len(*waits) != maxAttempts-1 || (*waits)[0] != time.Second || (*waits)[2] != 4*time.Second {
		t.Errorf("%d creates, waits %v; want %d attempts backing off 1s, 2s, 4s, looking the ticket up between them", creates, *waits, maxAttempts)
	}
	// Jira down for everything: the lookup fails too, and Create stops.
	d.ClearFaults()
	d.Inject(jiradouble.Fault{Status: 503})
	if _, err := j.Create(context.Background(), reconcile()); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Jira down: %v", err)
	}

	d.ClearFaults()
	d.Inject(jiradouble.Fault{Status: 429, RetryAfter: "3600"})
	before := len(d.Requests())
	if _, err := j.Create(context.Background(), reconcile()); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("error %v", err)
	}
	if n := len(d.Requests()) - before; n != 1 {
		t.Errorf("a Retry-After of an hour was waited out: %d requests", n)
	}
}

func TestHangingJiraTimesOut(t *testing.T) {
	d := newDouble(t, jiradouble.Options{})
	j, _ := client(t, d, func(c *Config) { c.Timeout = "300ms" })
	d.Inject(jiradouble.Fault{Hang: true})
	if _, err := j.Create(context.Background(), reconcile()); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("error %v, want ErrUnreachable", err)
	}
}

func TestAuthAndFieldErrorsSayWhatToFix(t *testing.T) {
	d := newDouble(t, jiradouble.Options{})
	j, _ := client(t, d, func(c *Config) { c.APIToken = "wrong-token-123456" })
	_, err := j.Create(context.Background(), reconcile())
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "JIRA_USER and JIRA_API_TOKEN") || strings.Contains(err.Error(), "wrong-token") {
		t.Errorf("401: %v", err)
	}

	pat := newDouble(t, jiradouble.Options{PAT: "pat-1234567890"})
	jp, _ := client(t, pat, func(c *Config) { c.User, c.APIToken, c.PAT = "", "", "pat-wrong" })
	if _, err := jp.Create(context.Background(), reconcile()); !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "JIRA_PAT") {
		t.Errorf("401 with a PAT: %v", err)
	}
	jp, _ = client(t, pat, func(c *Config) { c.User, c.APIToken, c.PAT = "", "", "pat-1234567890" })
	if _, err := jp.Create(context.Background(), reconcile()); err != nil || pat.Requests()[1].Auth != "bearer" {
		t.Errorf("bearer PAT: %v %+v", err, pat.Requests())
	}

	j, _ = client(t, d, func(c *Config) { c.Project = "NOPE"; c.IssueType = "Epic" })
	_, err = j.Create(context.Background(), reconcile())
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "project: valid project is required") || !strings.Contains(err.Error(), "issuetype: Specify a valid issue type") {
		t.Errorf("400: %v", err)
	}
}

func TestFindCommentAndClose(t *testing.T) {
	d := newDouble(t, jiradouble.Options{})
	j, _ := client(t, d, nil)
	ctx := context.Background()
	if _, found, err := j.FindSession(ctx, "20261202-031500-x7k2p"); err != nil || found {
		t.Fatalf("found a ticket before filing one: %v", err)
	}
	issue, err := j.Create(ctx, reconcile())
	if err != nil {
		t.Fatal(err)
	}
	d.AddIssue("someone else's ticket")
	got, found, err := j.FindSession(ctx, "20261202-031500-x7k2p")
	if err != nil || !found || got.Key != issue.Key {
		t.Fatalf("FindSession: %+v %v %v", got, found, err)
	}
	if err := j.Close(ctx, issue.Key, RestoreComment("86a717c0d2e4f6a8", "oncall", false, "", audit.HeadState{Seq: 7, Hash: strings.Repeat("ab", 32)})); err != nil {
		t.Fatal(err)
	}
	stored := d.Issues()[0]
	if stored.Status != "Done" || len(stored.Comments) != 1 || stored.Comments[0] != "Git caught up at 86a717c0d2e4; sync restored by oncall.\n\nAudit log witness: record 7, hash "+strings.Repeat("ab", 32) {
		t.Errorf("after Close: status %s, comments %q", stored.Status, stored.Comments)
	}
	// Closing again comments but leaves the done issue alone.
	if err := j.Close(ctx, issue.Key, "again"); err != nil || d.Issues()[0].Status != "Done" {
		t.Errorf("second Close: %v", err)
	}
	if _, err := j.Get(ctx, "OPS-99"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing issue: %v", err)
	}
}

func TestCloseNamesTheAvailableTransitions(t *testing.T) {
	d := newDouble(t, jiradouble.Options{DoneTransition: "Resolve"})
	j, _ := client(t, d, func(c *Config) { c.DoneTransition = "Close" })
	key := d.AddIssue("x")
	err := j.Close(context.Background(), key, "restored")
	if !errors.Is(err, ErrNoTransition) || !strings.Contains(err.Error(), `no transition "Close" (available: "Start Progress", "Resolve")`) {
		t.Errorf("missing transition: %v", err)
	}
}

func TestLoadConfig(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "kubectl-gitops")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := "JIRA_URL: https://jira.example\nJIRA_PROJECT: OPS\nJIRA_USER: a@example.com\nJIRA_API_TOKEN: from-file\nJIRA_PRIORITY: High\n"
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "JIRA_API_TOKEN": "from-env", "JIRA_ISSUE_TYPE": "Bug"}
	cfg, err := LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := Config{URL: "https://jira.example", Project: "OPS", User: "a@example.com", APIToken: "from-env", IssueType: "Bug", DoneTransition: "Done", Priority: "High"}
	if cfg != want {
		t.Errorf("config %+v, want %+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}

	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("JIRA_URLL: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "JIRA_URLL") {
		t.Errorf("a misspelt key was accepted: %v", err)
	}
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "jira is not configured"},
		{Config{URL: "u", Project: "P", User: "a"}, "credentials missing"},
		{Config{URL: "u", Project: "P", User: "a", APIToken: "t", PAT: "p"}, "not both"},
	} {
		if err := tt.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	if _, err := LoadConfig(func(k string) string { return map[string]string{"HOME": t.TempDir(), "JIRA_TIMEOUT": "soon"}[k] }); err == nil {
		t.Error("JIRA_TIMEOUT=soon was accepted")
	}
}

func TestSuggestion(t *testing.T) {
	image := []audit.Change{{Path: "/spec/template/spec/containers/web/image", Before: "registry.example/web:1.0.0", After: "registry.example/web:0.9.8"}}
	for _, tt := range []struct{ kind, want string }{
		{"Kustomize", "kustomize edit set image registry.example/web=registry.example/web:0.9.8"},
		{"", "kustomize edit set image registry.example/web=registry.example/web:0.9.8"},
		{"Directory", "under apps/web:\n* container web: image: registry.example/web:0.9.8"},
		{"Helm", "* the chart renders container web's image: set its values"},
	} {
		s := suggestion(argocd.Source{Path: "apps/web", Type: tt.kind}, image)
		if !strings.Contains(s, tt.want) || (tt.kind == "Directory" || tt.kind == "Helm") && strings.Contains(s, "kustomize") {
			t.Errorf("%q source: suggestion\n%s\nwant %q", tt.kind, s, tt.want)
		}
	}
	if s := suggestion(argocd.Source{}, []audit.Change{{Path: "/data/password", Before: audit.Redacted, After: audit.Redacted}}); !strings.Contains(s, "a value not recorded here (it may be a secret)") || strings.Contains(s, "kustomize") {
		t.Errorf("secret suggestion: %s", s)
	}
}

func TestWitnessesRoundTrip(t *testing.T) {
	h := audit.HeadState{Seq: 42, Hash: strings.Repeat("0f", 32)}
	text := Description(Reconcile{Patches: []*audit.Record{{ID: "r", Session: "s", Target: &audit.Target{Kind: "Deployment", Name: "web"}}}, Witness: h}) +
		RestoreComment("abc", "lead", true, "why", audit.HeadState{Seq: 50, Hash: strings.Repeat("1e", 32)})
	got := Witnesses(text)
	if len(got) != 2 || got[0] != h || got[1].Seq != 50 {
		t.Errorf("Witnesses = %+v", got)
	}
	if WitnessLine(audit.HeadState{}) != "" {
		t.Errorf("no record, no witness line")
	}
}

func TestGitSectionNamesTheSourceToChange(t *testing.T) {
	image := &audit.Record{Changes: []audit.Change{{Path: "/spec/template/spec/containers/web/image", Before: "registry.example/web:1.0.0", After: "registry.example/web:0.9.8"}}}
	hydrated := gitSection(argocd.Source{RepoURL: "https://git.example/app", Path: "dry/web", TargetRevision: "HEAD", HydratedBranch: "env/prod", HydratedPath: "web"},
		[]*audit.Record{{Git: &audit.Git{Revision: "d1d1d1", Hydrated: "h2h2h2"}, Changes: image.Changes}})
	for _, want := range []string{"* Repository: https://git.example/app\n* Path: dry/web\n", "into branch env/prod, path web: that branch is generated; make the change in the dry source above", "* Dry commit at break-glass: d1d1d1 (hydrated as h2h2h2)"} {
		if !strings.Contains(hydrated, want) {
			t.Errorf("hydrator Git section lacks %q:\n%s", want, hydrated)
		}
	}
	chart := gitSection(argocd.Source{RepoURL: "https://charts.example", Chart: "web", Type: "Helm", Position: 1,
		ValueFiles: []argocd.Source{{RepoURL: "https://git.example/values", Path: "envs/prod.yaml", TargetRevision: "main"}}},
		[]*audit.Record{{Git: &audit.Git{Revision: "c1", Revisions: []string{"c1", "v2"}}, Changes: image.Changes}})
	for _, want := range []string{"* Source 1: repository https://charts.example\n* Chart: web\n", "* Helm values: envs/prod.yaml in repository https://git.example/values (tracks main)", "* Revision of source 2 at break-glass: v2", "image.tag) in envs/prod.yaml"} {
		if !strings.Contains(chart, want) {
			t.Errorf("multi-source Git section lacks %q:\n%s", want, chart)
		}
	}
	several := gitSection(argocd.Source{RepoURL: "a", Path: "base", Position: 1, Others: []argocd.Source{{RepoURL: "b", Path: "extra", Position: 2}}}, []*audit.Record{image})
	if !strings.Contains(several, "one of the Application's sources") || !strings.Contains(several, "* Source 2: repository b\n* Path: extra") {
		t.Errorf("several rendering sources:\n%s", several)
	}
}

// TestWitnessesReadsEveryPage: with more tickets than a search page holds,
// and more comments on a ticket than its search result carries, every
// witnessed record is found. The double answered every search as its
// last page, so paging was never exercised, and Witnesses read only the
// comments a search carries.
func TestWitnessesReadsEveryPage(t *testing.T) {
	d := newDouble(t, jiradouble.Options{PageSize: 2, InlineComments: 1})
	j, _ := client(t, d, nil)
	ctx := context.Background()
	witness := func(seq uint64) audit.HeadState {
		return audit.HeadState{Seq: seq, Hash: fmt.Sprintf("%064x", seq)}
	}
	var want []string
	var first Issue
	for n := uint64(1); n <= 5; n++ {
		rc := reconcile()
		rc.Witness = witness(n)
		issue, err := j.Create(ctx, rc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			first = issue
		}
		want = append(want, fmt.Sprintf("%s@%d", issue.Key, n))
	}
	for n := uint64(6); n <= 8; n++ {
		if err := j.Comment(ctx, first.Key, RestoreComment("86a717c0d2e4f6a8", "oncall", false, "", witness(n))); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%s@%d", first.Key, n))
	}
	found, err := j.Witnesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range found {
		if w.HeadState != witness(w.Seq) {
			t.Errorf("witness %+v", w)
		}
		got = append(got, fmt.Sprintf("%s@%d", w.Key, w.Seq))
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("witnesses\n %v\nwant\n %v", got, want)
	}
	pages := 0
	for _, r := range d.Requests() {
		if r.Path == "/rest/api/2/search/jql" {
			pages++
		}
	}
	if pages != 3 {
		t.Errorf("%d search pages for 5 tickets 2 a page, want 3", pages)
	}
}
