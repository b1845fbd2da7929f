package plugin

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// auditFixture writes a small, deterministic audit log as a JSONL file.
func auditFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	store := &audit.FileStore{Path: path}
	base := time.Date(2026, 12, 2, 3, 15, 0, 0, time.UTC)
	app := &audit.AppRef{Namespace: "argocd", Name: "web", Project: "default"}
	target := &audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}
	records := []audit.Record{
		{ID: "20261202-031500-aaaaaa", Event: audit.EventPlanned, Reason: "5xx spike, \"roll back\" web, step 1,\nthen watch", Incident: "INC-42"},
		{ID: "20261202-031501-aaaabb", Event: audit.EventPaused},
		{ID: "20261202-031502-bbbbbb", Event: audit.EventPatched, Patch: &audit.Patch{Type: "strategic", Body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example/web:1.2.2"}]}}}}`}},
		{ID: "20261203-101500-cccccc", Event: audit.EventRestored, Actor: audit.Actor{Username: "lead"}},
	}
	for i, r := range records {
		r.Time = base.Add(time.Duration(i) * time.Second)
		if i == 3 {
			r.Time = base.Add(31 * time.Hour)
		}
		r.Session = "s-1"
		if r.Actor.Username == "" {
			r.Actor = audit.Actor{Username: "oncall", Groups: []string{"oncall"}}
		}
		r.Application, r.Target = app, target
		r.Outcome = audit.Outcome{Status: audit.StatusSucceeded}
		if err := store.Append(context.Background(), &r); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestAuditLogFormats(t *testing.T) {
	file := auditFixture(t)
	for _, format := range []string{"table", "wide", "csv"} {
		t.Run(format, func(t *testing.T) {
			code, out, errOut := runPlugin(t, "audit", "log", "--file", file, "-o", format)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, "audit-log."+format, out)
		})
	}
}

func TestAuditLogFilters(t *testing.T) {
	file := auditFixture(t)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--event", "breakglass.paused"}, []string{"20261202-031501-aaaabb"}},
		{[]string{"--actor", "lead"}, []string{"20261203-101500-cccccc"}},
		{[]string{"--app", "web", "--event", "breakglass.restored"}, []string{"20261203-101500-cccccc"}},
		{[]string{"--app", "other"}, nil},
	}
	for _, tt := range tests {
		code, out, errOut := runPlugin(t, append([]string{"audit", "log", "--file", file, "-o", "jsonl"}, tt.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tt.args, code, errOut)
		}
		var ids []string
		for _, r := range audit.Records(entriesOf(t, out)) {
			ids = append(ids, r.ID)
		}
		if strings.Join(ids, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%v: got %v, want %v", tt.args, ids, tt.want)
		}
	}
}

func TestAuditLogSince(t *testing.T) {
	o := &AuditLogOptions{Output: "table", since: "2d", now: func() time.Time { return time.Date(2026, 12, 4, 3, 15, 1, 0, time.UTC) }}
	if err := o.Complete(nil, nil); err != nil {
		t.Fatal(err)
	}
	old := &audit.Record{Time: time.Date(2026, 12, 2, 3, 15, 0, 0, time.UTC)}
	recent := &audit.Record{Time: time.Date(2026, 12, 3, 10, 15, 0, 0, time.UTC)}
	if o.matches(old) || !o.matches(recent) {
		t.Errorf("--since 2d: old kept %v, recent kept %v", o.matches(old), o.matches(recent))
	}
}

func TestAuditBadInput(t *testing.T) {
	file := auditFixture(t)
	_, export, _ := runPlugin(t, "audit", "log", "--file", file, "-o", "csv")
	// Relative: the error line is redacted, and a temporary directory's
	// random name reads as a high-entropy string.
	t.Chdir(t.TempDir())
	const csv = "audit.csv"
	if err := os.WriteFile(csv, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		code    int
		wantErr string
	}{
		{[]string{"audit", "log", "--file", file, "--since", "yesterday"}, ExitUsage, `error: --since "yesterday"`},
		{[]string{"audit", "log", "--file", file, "--event", "deleted"}, ExitUsage, `error: --event "deleted" is not an audit event`},
		{[]string{"audit", "log", "--file", file, "-o", "xml"}, ExitUsage, `error: --output "xml"`},
		{[]string{"audit", "show", "--file", file}, ExitUsage, "error: kubectl gitops audit show needs 1 argument"},
		{[]string{"audit", "show", "--file", file, "2026"}, ExitFailure, `error: 4 audit records have ids starting "2026"`},
		{[]string{"audit", "show", "--file", file, "1999"}, ExitFailure, `error: no audit record has an id starting "1999"`},
		{[]string{"audit", "verify", "--file", filepath.Join(t.TempDir(), "none.jsonl")}, ExitCannotTell, "error: open "},
		// Another file is not tampering: verify printed an altered line
		// for each of its lines and "chain broken"; log said nothing
		// matched, exit 0; /dev/zero was "bufio.Scanner: token too long".
		{[]string{"audit", "verify", "--file", csv}, ExitCannotTell, "error: " + csv + " is not a JSONL export (`kubectl gitops audit log -o jsonl`): none of its lines is an audit record"},
		{[]string{"audit", "report", "--file", csv}, ExitCannotTell, "error: " + csv + " is not a JSONL export"},
		{[]string{"audit", "log", "--file", csv}, ExitFailure, "error: " + csv + " is not a JSONL export"},
		{[]string{"audit", "show", "--file", csv, "2026"}, ExitFailure, "error: " + csv + " is not a JSONL export"},
		{[]string{"audit", "verify", "--file", "/dev/zero"}, ExitCannotTell, "error: /dev/zero: line 1 is longer than 8 MiB: not a JSONL export"},
	}
	for _, tt := range tests {
		code, _, errOut := runPlugin(t, tt.args...)
		if code != tt.code || !strings.HasPrefix(errOut, tt.wantErr) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line %q", tt.args, code, errOut, tt.code, tt.wantErr)
		}
	}
}

func TestAuditShowAndVerify(t *testing.T) {
	file := auditFixture(t)
	code, out, _ := runPlugin(t, "audit", "show", "--file", file, "20261202-031502")
	if code != 0 {
		t.Fatalf("show exit %d", code)
	}
	golden(t, "audit-show.yaml", out)

	code, out, _ = runPlugin(t, "audit", "verify", "--file", file)
	if code != 0 || !strings.HasPrefix(out, "chain intact: 4 records") {
		t.Fatalf("verify of an intact export: exit %d, %q", code, out)
	}

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(string(data), "INC-42", "INC-43", 1)
	if err := os.WriteFile(file, []byte(tampered), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runPlugin(t, "audit", "verify", "--file", file)
	if code != ExitFailure || !strings.Contains(out, "altered: line 1: content does not match its hash") {
		t.Errorf("verify of a tampered export: exit %d, %q", code, out)
	}
}

func entriesOf(t *testing.T, jsonl string) []audit.Entry {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.jsonl")
	if err := os.WriteFile(path, []byte(jsonl), 0o600); err != nil {
		t.Fatal(err)
	}
	es, err := (&audit.FileStore{Path: path}).Entries(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestHostileTextIsNeutralised: a reason written to attack a spreadsheet or a
// terminal is stored as typed, but exported as an inert CSV cell and
// printed without its escape sequences.
func TestHostileTextIsNeutralised(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	store := &audit.FileStore{Path: path}
	hostile := []string{"=HYPERLINK(\"http://evil.example\",\"x\")", "+1+cmd", "-2-3", "@SUM(A1)", "\tTAB", "\rCR", "ok \x1b]0;pwned\x07 \x1b[31mred\x1b[0m \u202etxt\x9b"}
	for i, reason := range hostile {
		r := audit.Record{Event: audit.EventPlanned, Reason: reason, Actor: audit.Actor{Username: "oncall"},
			Application: &audit.AppRef{Namespace: "argocd", Name: "web"}, Time: time.Date(2026, 12, 2, 3, 15, i, 0, time.UTC),
			Outcome: audit.Outcome{Status: audit.StatusStarted}}
		if err := store.Append(context.Background(), &r); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runPlugin(t, "audit", "log", "--file", path, "-o", "csv")
	if code != 0 {
		t.Fatalf("csv: exit %d: %s", code, errOut)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	reason := slices.Index(auditCSVColumns, "reason")
	for _, row := range rows[1:] {
		cell := row[reason]
		if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
			t.Errorf("CSV cell %q would be evaluated by a spreadsheet", cell)
		}
		if strings.ContainsAny(cell, "\x1b\x07") {
			t.Errorf("CSV cell %q carries control characters", cell)
		}
	}
	if !strings.Contains(out, `'=HYPERLINK`) {
		t.Errorf("the formula should be kept, quoted: %s", out)
	}
	for _, format := range []string{"table", "wide"} {
		code, out, _ := runPlugin(t, "audit", "log", "--file", path, "-o", format)
		if code != 0 || strings.ContainsAny(out, "\x1b\x07\u202e\u009b") {
			t.Errorf("-o %s: exit %d, raw control characters in %q", format, code, out)
		}
	}
}

// TestAuditLogStreamsWhatWholeListPrints: -o json and -o yaml print record
// by record (memory flat on a long log), byte for byte what printing the
// whole list at once prints, including the empty list.
func TestAuditLogStreamsWhatWholeListPrints(t *testing.T) {
	file := auditFixture(t)
	entries, err := (&audit.FileStore{Path: file}).Entries(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	records := audit.Records(entries)
	for _, format := range []string{"json", "yaml"} {
		for _, tc := range []struct {
			args []string
			want []*audit.Record
		}{{nil, records}, {[]string{"--actor", "lead"}, records[3:]}, {[]string{"--actor", "nobody"}, nil}} {
			var want strings.Builder
			if err := printStructured(&want, format, tc.want); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runPlugin(t, append([]string{"audit", "log", "--file", file, "-o", format}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if out != want.String() {
				t.Errorf("-o %s %v streamed:\n%s\nwhole list:\n%s", format, tc.args, out, want.String())
			}
		}
	}
}

// TestAuditVerifyOfNothingIsNotIntact: an empty export, or a namespace
// holding no record and no head (a mistyped --audit-namespace), said
// "chain intact: 0 records" and exited 0, telling an auditor pointed at
// the wrong place that all was well; audit report's evidence said the
// same. They cannot tell: exit 3, naming where they looked.
func TestAuditVerifyOfNothingIsNotIntact(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := emptyClusterKubeconfig(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--file", "/dev/null"}, "error: no audit records found in file /dev/null (is it an export from `kubectl gitops audit log -o jsonl`?)"},
		{[]string{"verify", "--file", empty, "-o", "json"}, "error: no audit records found in file "},
		{[]string{"verify", "--kubeconfig", kubeconfig, "--audit-namespace", "argcd"}, "error: no audit records found in namespace argcd (is --audit-namespace right?)"},
		// The auditor's evidence would have said "chain intact" as well.
		{[]string{"report", "--kubeconfig", kubeconfig, "--audit-namespace", "argcd"}, "error: no audit records found in namespace argcd (is --audit-namespace right?)"},
	} {
		code, out, errOut := runPlugin(t, append([]string{"audit"}, tt.args...)...)
		if code != ExitCannotTell || !strings.HasPrefix(errOut, tt.want) || strings.Contains(out, "intact") {
			t.Errorf("audit %s: exit %d, stdout %q, stderr %q; want exit 3 and %q", strings.Join(tt.args, " "), code, out, errOut, tt.want)
		}
	}
}

// emptyClusterKubeconfig is a kubeconfig for an API server that holds no
// ConfigMap: every list is empty, every get is NotFound.
func emptyClusterKubeconfig(t *testing.T) string {
	t.Helper()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/configmaps") {
			fmt.Fprint(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[]}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(api.Close)
	return kubeconfigFor(t, api.URL)
}

// TestAuditVerifyWarnsOfTheHead: a record that found the head wrong is
// named as a warning with its fix, and the log is still intact (exit 0):
// a head moved by hand used to make verify exit 1 for good.
func TestAuditVerifyWarnsOfTheHead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	store := &audit.FileStore{Path: path}
	for _, found := range []*audit.HeadState{nil, {Seq: 4000, Hash: "bogus"}} {
		r := &audit.Record{Event: audit.EventPatched, Actor: audit.Actor{Username: "oncall"}, HeadFound: found, Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
		if err := store.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runPlugin(t, "audit", "verify", "--file", path)
	want := "warning: head-mismatch: head: when record 2 was written the head named record 4000 with hash bogus, which the log does not hold: the head was moved by hand, and record 2 links to the true tip (fix: kubectl gitops audit repair-head (a cluster admin))\n"
	if code != ExitOK || !strings.HasPrefix(out, want) || !strings.Contains(out, "chain intact: 2 records") || !strings.HasSuffix(out, "; 1 warning(s) about the head\n") {
		t.Errorf("audit verify: exit %d, stdout:\n%s\nstderr: %s\nwant exit 0 and\n%s", code, out, errOut, want)
	}
}

// TestAuditRepairHead: a head moved far ahead is repaired by a cluster
// admin (recorded, the head back on the log, verify clean); asked again,
// there is nothing to repair. The API server's refusal to anyone else
// says that nothing was changed and whom to ask.
func TestAuditRepairHead(t *testing.T) {
	ctx := context.Background()
	far := audit.HeadState{Seq: 4000, Hash: "bogus"}
	setup := func(t *testing.T, user string, groups ...string) *kubefake.Clientset {
		kube := kubefake.NewSimpleClientset()
		kube.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: user, Groups: groups}}}, nil
		})
		store := audit.NewConfigMapStore(kube, "argocd")
		for i := 0; i < 2; i++ {
			if err := store.Append(ctx, &audit.Record{Event: audit.EventPatched, Actor: audit.Actor{Username: "oncall"}}); err != nil {
				t.Fatal(err)
			}
		}
		head, err := kube.CoreV1().ConfigMaps("argocd").Get(ctx, audit.HeadName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		head.Data = map[string]string{"seq": fmt.Sprint(far.Seq), "hash": far.Hash}
		if _, err := kube.CoreV1().ConfigMaps("argocd").Update(ctx, head, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		useEngine(t, func(flags *engineFlags) (*breakglass.Engine, error) {
			return &breakglass.Engine{Client: argocd.Client{Kube: kube}, Audit: audit.NewConfigMapStore(kube, flags.AuditNamespace)}, nil
		})
		return kube
	}
	headOf := func(t *testing.T, kube *kubefake.Clientset) *audit.HeadState {
		h, err := audit.NewConfigMapStore(kube, "argocd").Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	t.Run("by a cluster admin", func(t *testing.T) {
		kube := setup(t, "admin")
		code, out, errOut := runPlugin(t, "audit", "repair-head", "--yes", "-o", "json")
		var got HeadRepair
		if code != ExitOK || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("exit %d: %s %s", code, out, errOut)
		}
		if r := got.Record; !got.Repaired || r == nil || r.Event != audit.EventHeadRepaired || r.Seq != 3 || r.Actor.Username != "admin" || r.HeadBefore == nil || *r.HeadBefore != far {
			t.Errorf("repair: %s", out)
		}
		if len(got.Findings) == 0 || got.Findings[0].Kind != audit.BreakHeadAhead || got.Findings[0].Fix == "" {
			t.Errorf("findings %+v, want the head ahead, with its fix", got.Findings)
		}
		if h := headOf(t, kube); h.Seq != 3 {
			t.Errorf("head %+v, want record 3", h)
		}
		rep, err := audit.VerifyStore(ctx, audit.NewConfigMapStore(kube, "argocd"), nil, nil)
		if err != nil || !rep.Intact() || len(rep.Warnings) != 0 {
			t.Errorf("verify after the repair: %v %+v", err, rep)
		}
		code, out, errOut = runPlugin(t, "audit", "repair-head", "--yes")
		if code != ExitOK || out != "the audit head in namespace argocd names the newest record, 3: nothing to repair\n" {
			t.Errorf("a second repair: exit %d, %q %q", code, out, errOut)
		}
	})
	t.Run("refused to the on-call group", func(t *testing.T) {
		kube := setup(t, "oncall")
		kube.PrependReactor("create", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
			cm := a.(clienttesting.CreateAction).GetObject().(*corev1.ConfigMap)
			if cm.Labels[audit.LabelEvent] != string(audit.EventHeadRepaired) {
				return false, nil, nil
			}
			return true, nil, apierrors.NewForbidden(corev1.Resource("configmaps"), cm.Name, errors.New("ValidatingAdmissionPolicy 'kubectl-gitops-audit-log' denied request"))
		})
		code, out, errOut := runPlugin(t, "audit", "repair-head", "--yes")
		want := "only a cluster admin (a user outside the on-call, auditor and reviewer groups) may repair the audit head, and nothing was changed: ask one to run `kubectl gitops audit repair-head --audit-namespace argocd`\n"
		if code != ExitFailure || out != "" || !strings.HasPrefix(errOut, "head-ahead: head:") || !strings.HasSuffix(errOut, want) {
			t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 1 ending %q", code, out, errOut, want)
		}
		if h := headOf(t, kube); *h != far {
			t.Errorf("head %+v, want it left at %+v", h, far)
		}
	})
	// A member of a group the shipped policy never lets repair the head is
	// told so before anything is asked or written: the command used to
	// confirm, write, and only then relay the API server's refusal.
	t.Run("refused before asking, to a member of the on-call group", func(t *testing.T) {
		kube := setup(t, "lead", "oncall", "system:authenticated")
		kube.ClearActions()
		code, out, errOut := runPlugin(t, "audit", "repair-head", "--yes")
		want := "you are in group oncall, which the admission policy (deploy/policy/audit-log.yaml) never lets repair the audit head: nothing was changed; ask a cluster admin to run `kubectl gitops audit repair-head --audit-namespace argocd`\n"
		if code != ExitFailure || out != "" || !strings.HasSuffix(errOut, want) {
			t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 1 ending %q", code, out, errOut, want)
		}
		for _, a := range kube.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Resource == "configmaps" {
				t.Errorf("a write was attempted: %v", a)
			}
		}
	})
	t.Run("not a terminal, no --yes", func(t *testing.T) {
		setup(t, "admin")
		if code, _, errOut := runPlugin(t, "audit", "repair-head"); code != ExitUsage || errOut != "error: --yes is required when stdin is not a terminal\n" {
			t.Errorf("exit %d, %q; want a usage error", code, errOut)
		}
	})
}

// TestRepairHeadRefusalSaysItOnce: the admission policy's refusal of a
// repair by on-call already says who may and what to ask; the command
// repeated the sentence after it.
func TestRepairHeadRefusalSaysItOnce(t *testing.T) {
	o := &AuditRepairHeadOptions{}
	o.AuditNamespace = "argocd"
	policy := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "kubectl-gitops-audit-0000000012",
		errors.New("ValidatingAdmissionPolicy 'kubectl-gitops-audit-log' denied request: only a cluster admin (outside the on-call, auditor and reviewer groups) records a head repair: oncall may not write it; ask a cluster admin to run kubectl gitops audit repair-head"))
	if got := o.refused(policy, nil).Error(); strings.Count(got, "only a cluster admin") != 1 || !strings.Contains(got, "nothing was changed") ||
		!strings.Contains(got, "`kubectl gitops audit repair-head --audit-namespace argocd`") {
		t.Errorf("refusal %q: want the policy's sentence once, what changed and the command for this log", got)
	}
	rbac := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "kubectl-gitops-audit-head", errors.New("RBAC: access denied"))
	if got := o.refused(rbac, nil).Error(); !strings.Contains(got, "ask one to run `kubectl gitops audit repair-head") {
		t.Errorf("an RBAC refusal %q does not say what to ask", got)
	}
}
