package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func TestExitCodesAndErrorLine(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown command", []string{"bogus"}, ExitUsage, `error: unknown command "bogus"`},
		{"misspelt command", []string{"stauts"}, ExitUsage, `error: unknown command "stauts" for "kubectl gitops": did you mean status?`},
		// A group's typo said the group "takes no arguments".
		{"misspelt subcommand", []string{"audit", "verfy"}, ExitUsage, `error: unknown command "verfy" for "kubectl gitops audit": did you mean verify?`},
		{"unknown subcommand", []string{"ticket", "frob"}, ExitUsage, `error: unknown command "frob" for "kubectl gitops ticket" (see kubectl gitops ticket -h)`},
		// cobra's help printed the whole usage and exited 0.
		{"unknown help topic", []string{"help", "frob"}, ExitUsage, `error: unknown help topic "frob": run kubectl gitops help`},
		{"unknown nested help topic", []string{"help", "audit", "frob"}, ExitUsage, `error: unknown help topic "audit frob"`},
		{"help of a subcommand", []string{"help", "audit", "verify"}, ExitOK, ""},
		// It exited 1 when the first client was built.
		{"bad request timeout", []string{"status", "--request-timeout", "abc"}, ExitUsage, `error: --request-timeout "abc" is not a duration`},
		// client-go refuses a negative number of seconds too.
		{"negative request timeout", []string{"status", "--request-timeout", "-5"}, ExitUsage, `error: --request-timeout "-5" is not a duration`},
		{"unknown flag", []string{"version", "--bogus"}, ExitUsage, "error: unknown flag: --bogus"},
		{"bad output format", []string{"version", "--client", "-o", "xml"}, ExitUsage, `error: --output "xml" is not supported`},
		{"extra argument", []string{"version", "extra"}, ExitUsage, "error: kubectl gitops version takes no arguments"},
		{"completion without shell", []string{"completion"}, ExitUsage, "error: kubectl gitops completion needs 1 argument"},
		{"completion unknown shell", []string{"completion", "tcsh"}, ExitUsage, `error: unsupported shell "tcsh"`},
		{"unreachable cluster", []string{"version", "--kubeconfig", "/nonexistent/kubeconfig"}, ExitFailure, "error: kubernetes api server unreachable"},
		{"ticket sync extra argument", []string{"ticket", "sync", "now"}, ExitUsage, "error: kubectl gitops ticket sync takes no arguments"},
		{"ticket sync bad output", []string{"ticket", "sync", "-o", "csv"}, ExitUsage, `error: --output "csv" is not supported`},
		{"breakglass --ticket not a key", []string{"breakglass", "web", "deploy/web", "--replicas", "2", "--reason", "r", "--ticket", "ops 7", "-y"}, ExitUsage, `error: --ticket "ops 7": not a Jira issue key`},
		{"breakglass without APP, no terminal", []string{"breakglass", "--replicas", "2", "--reason", "r", "-y"}, ExitUsage, "error: missing APP and TARGET"},
		{"breakglass without TARGET, no terminal", []string{"breakglass", "web", "--replicas", "2", "--reason", "r", "-y"}, ExitUsage, "error: missing TARGET: kubectl gitops breakglass web KIND/NAME, naming one of its managed resources"},
		{"breakglass extra argument", []string{"breakglass", "web", "deploy/web", "more"}, ExitUsage, "error: kubectl gitops breakglass takes at most 2 argument(s)"},
		{"breakglass endless patch file", []string{"breakglass", "web", "deploy/web", "--patch-file", "/dev/zero", "--reason", "r", "-y"}, ExitUsage, "error: --patch-file /dev/zero: the patch is over the 1 MiB limit"},
		{"breakglass oversized patch", []string{"breakglass", "web", "deploy/web", "--patch", `{"metadata":{"annotations":{"x":"` + strings.Repeat("a", 1<<20) + `"}}}`, "--reason", "r", "-y"}, ExitUsage, "error: the patch is over the 1 MiB limit"},
		{"error text is redacted and printable", []string{"breakglass", "web", "deploy/web", "--replicas", "2", "--reason", "r", "--ticket", "x --password=hunter22\x1b]0;t\a", "-y"}, ExitUsage, `error: --ticket "x --password=[REDACTED]`},
		// The verdict's flags were not spelt: "error: : give exactly one".
		{"audit review without a verdict", []string{"audit", "review", "s1", "--note", "n"}, ExitUsage, "error: --approve/--reject: give exactly one: approve or reject"},
		{"audit review with both verdicts", []string{"audit", "review", "s1", "--approve", "--reject", "--note", "n"}, ExitUsage, "error: --approve/--reject: give exactly one"},
		{"audit review without a note", []string{"audit", "review", "s1", "--approve"}, ExitUsage, "error: --note: required"},
		{"audit review overturning with a rejection", []string{"audit", "review", "s1", "--reject", "--overturn", "--note", "n"}, ExitUsage, "error: --overturn: only an approval overturns a rejection"},
		// -n is breakglass's TARGET namespace; elsewhere it was ignored.
		{"status -n", []string{"status", "-n", "team-a"}, ExitUsage, "error: kubectl gitops status takes no -n/--namespace (it is breakglass's TARGET namespace): use --app-namespace, the namespace where Applications live"},
		{"restore --namespace", []string{"restore", "web", "--namespace=team-a"}, ExitUsage, "error: kubectl gitops restore takes no -n/--namespace (it is breakglass's TARGET namespace): use --app-namespace"},
		{"audit verify -n", []string{"audit", "verify", "-n", "argocd"}, ExitUsage, "error: kubectl gitops audit verify takes no -n/--namespace (it is breakglass's TARGET namespace): use --audit-namespace, the namespace holding the audit log"},
		{"completion -n", []string{"completion", "bash", "-n", "x"}, ExitUsage, "error: kubectl gitops completion takes no -n/--namespace (it is breakglass's TARGET namespace)\n"},
		{"client version", []string{"version", "--client"}, ExitOK, ""},
		{"help", []string{"--help"}, ExitOK, ""},
		{"bash completion", []string{"completion", "bash"}, ExitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runPlugin(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			if tt.wantErr == "" {
				if stderr != "" {
					t.Errorf("stderr %q, want nothing", stderr)
				}
				return
			}
			if !strings.HasPrefix(stderr, tt.wantErr) {
				t.Errorf("stderr %q, want it to start %q", stderr, tt.wantErr)
			}
			if strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr %q is not exactly one line", stderr)
			}
		})
	}
}

func TestClientVersionJSON(t *testing.T) {
	code, stdout, _ := runPlugin(t, "version", "--client", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	var info VersionInfo
	if err := json.Unmarshal([]byte(stdout), &info); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	if info.Client.Version != version || info.Client.GoVersion == "" {
		t.Errorf("client version %+v, want version %q and a Go version", info.Client, version)
	}
	if info.Kubernetes != nil || info.ArgoCD != nil {
		t.Errorf("--client contacted servers: %+v", info)
	}
}

// TestEngineErrorsAreSpeltAsFlags: the engine names inputs and returns
// sentinel errors; the command line spells the inputs as flags and adds
// the next step, keeping the error's identity.
func TestEngineErrorsAreSpeltAsFlags(t *testing.T) {
	for _, in := range []argocd.Input{breakglass.InputReason, breakglass.InputTarget, breakglass.InputImage, breakglass.InputReplicas,
		breakglass.InputPatch, breakglass.InputPatchType, breakglass.InputChange, breakglass.InputTicket, breakglass.InputExpires, breakglass.InputAutoRestore, breakglass.InputHold,
		breakglass.InputSession, breakglass.InputVerdict, breakglass.InputOverturn, breakglass.InputNote, argocd.InputTargetContext, argocd.InputArgoContext, drift.InputDebtNote} {
		if inputFlags[in] == "" {
			t.Errorf("input %q has no flag to spell it", in)
		}
	}
	web := audit.AppRef{Namespace: "argocd", Name: "web"}
	err := explain(&argocd.InputError{Input: breakglass.InputReplicas, Value: "-1", Problem: "must be zero or more", Kind: breakglass.ErrPatchInvalid}, "breakglass", web)
	if err.Error() != `--replicas "-1": must be zero or more` || !errors.Is(err, breakglass.ErrPatchInvalid) {
		t.Errorf("input error: %v (is ErrPatchInvalid: %v)", err, errors.Is(err, breakglass.ErrPatchInvalid))
	}
	if err := explain(&argocd.InputError{Input: breakglass.InputChange, Problem: "none given"}, "breakglass", web); !strings.Contains(err.Error(), "use --image CONTAINER=IMAGE, --replicas N, --patch or --patch-file") {
		t.Errorf("no change: %v", err)
	}
	for _, tt := range []struct {
		err     error
		command string
		want    string
	}{
		{fmt.Errorf("%w on web: session s1 by sam", breakglass.ErrJoinable), "breakglass", "session s1 by sam: add --join to patch within it, or finish it with `kubectl gitops restore web`"},
		{fmt.Errorf("%w: %q in namespace argocd", argocd.ErrAppNotFound, "web"), "breakglass", "set --app-namespace if Applications live elsewhere"},
		{fmt.Errorf("%w on web to join", breakglass.ErrNoSession), "breakglass", "drop --join to open one"},
		{fmt.Errorf("%w: sync not restored", breakglass.ErrNotCaughtUp), "restore", "fix Git and run restore again, or --force --reason …"},
		{fmt.Errorf("%w on web: x; nothing was changed", breakglass.ErrSessionMismatch), "restore", "compare with `kubectl gitops audit log --app web`"},
		{fmt.Errorf("%w on web: x; nothing was changed", breakglass.ErrSessionMismatch), "breakglass", "finish the session with `kubectl gitops restore web --force --reason …`"},
		{fmt.Errorf("%w: rita rejected session s1 (record 9)", breakglass.ErrRejectionStands), "audit review", "rita rejected session s1 (record 9): pass --overturn, saying in --note why"},
	} {
		got := explain(tt.err, tt.command, web)
		if !strings.Contains(got.Error(), tt.want) || !errors.Is(got, tt.err) {
			t.Errorf("%s: %v, want it to contain %q and stay %v", tt.command, got, tt.want, tt.err)
		}
		if again := explain(got, tt.command, web); again.Error() != got.Error() {
			t.Errorf("explained twice: %v", again)
		}
	}
}

// TestStructuredOutputListsNothingAsEmpty: every -o json|yaml that found
// nothing prints an empty list, never null.
func TestStructuredOutputListsNothingAsEmpty(t *testing.T) {
	var nothing []*drift.Report
	for format, want := range map[string]string{"json": "[]\n", "yaml": "[]\n"} {
		var b strings.Builder
		if err := printStructured(&b, format, nothing); err != nil || b.String() != want {
			t.Errorf("%s: %q %v, want %q", format, b.String(), err, want)
		}
	}
}

// closedPortKubeconfig is a kubeconfig whose cluster is a loopback port
// nothing listens on.
func closedPortKubeconfig(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	return kubeconfigFor(t, "http://"+l.Addr().String())
}

// kubeconfigFor is a kubeconfig whose one context is the API server at
// server, with no argocd CLI login or Jira beside it.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, k := range []string{"KUBECONFIG", "ARGOCD_SERVER", "ARGOCD_AUTH_TOKEN", "JIRA_URL", "JIRA_PROJECT", "JIRA_USER", "JIRA_API_TOKEN", "JIRA_PAT"} {
		t.Setenv(k, "")
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	config := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestUnreachableClusterSaysWhatToDo: a cluster that is not there is one
// line naming the server and the flags to check, not client-go's chain;
// a check whose exit 1 is an answer exits 3 (could not tell) instead:
// contract check --exit-code exited 1, "contradiction", and audit report
// exited 1 though its help says >1 on error.
func TestUnreachableClusterSaysWhatToDo(t *testing.T) {
	kubeconfig := closedPortKubeconfig(t)
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"status"}, ExitFailure},
		{[]string{"status", "--exit-code"}, ExitCannotTell},
		{[]string{"contract", "check", "-A", "--exit-code"}, ExitCannotTell},
		{[]string{"debt", "-A", "--exit-code"}, ExitCannotTell},
		{[]string{"audit", "report"}, ExitCannotTell},
		{[]string{"audit", "verify"}, ExitCannotTell},
		{[]string{"audit", "log"}, ExitFailure},
		{[]string{"restore", "web"}, ExitFailure},
		{[]string{"breakglass", "web", "deploy/web", "--replicas", "3", "--reason", "r", "--dry-run"}, ExitFailure},
	} {
		code, _, stderr := runPlugin(t, append(tt.args, "--kubeconfig", kubeconfig)...)
		if code != tt.code {
			t.Errorf("%s: exit %d, want %d (%s)", strings.Join(tt.args, " "), code, tt.code, stderr)
		}
		if !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, `Get "`) ||
			!strings.Contains(stderr, "cannot reach the Kubernetes API server at http://127.0.0.1:") || !strings.Contains(stderr, "(connection refused): check that --context") {
			t.Errorf("%s: stderr %q; want one line saying the server cannot be reached and what to check", strings.Join(tt.args, " "), stderr)
		}
	}
}

// TestReachSaysWhatToCheck: an unknown host, a timeout and refused
// credentials from the Kubernetes API each say what to check; the same
// failure from another server (Argo CD's API, Jira) is left as it is, since
// the kubeconfig is not what to fix there.
func TestReachSaysWhatToCheck(t *testing.T) {
	kube := "https://k8s.example:6443/api/v1/namespaces/argocd/configmaps?limit=500"
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("listing audit records: %w", &url.Error{Op: "Get", URL: kube, Err: &net.DNSError{Name: "k8s.example", Err: "no such host", IsNotFound: true}}),
			"listing audit records: cannot reach the Kubernetes API server at https://k8s.example:6443 (no such host k8s.example): check that --context"},
		{&url.Error{Op: "Get", URL: kube, Err: os.ErrDeadlineExceeded},
			"cannot reach the Kubernetes API server at https://k8s.example:6443 (timed out): check that --context"},
		{fmt.Errorf("listing applications: %w", apierrors.NewUnauthorized("Unauthorized")),
			"listing applications: the Kubernetes API server refused your credentials (Unauthorized): log in again, or check that --context"},
		{fmt.Errorf("asking Argo CD: %w", &url.Error{Op: "Get", URL: "https://argocd.example/api/v1/applications/web/managed-resources", Err: syscall.ECONNREFUSED}),
			`asking Argo CD: Get "https://argocd.example/api/v1/applications/web/managed-resources": connection refused`},
	} {
		got := reach(tt.err)
		if !strings.HasPrefix(got.Error(), tt.want) || !errors.Is(got, tt.err) {
			t.Errorf("reach(%v) = %v; want it to start %q and keep the error", tt.err, got, tt.want)
		}
	}
}

// TestEveryOutputFlagIsChecked: every command with -o refuses a format it
// does not print, as a usage error naming its own formats, before it
// touches anything (run() checks it, so no command can forget to).
func TestEveryOutputFlagIsChecked(t *testing.T) {
	kubeconfigFor(t, "http://127.0.0.1:1")
	var walk func(*cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		flag := c.Flags().Lookup("output")
		if flag == nil {
			return
		}
		checked++
		path := strings.Fields(strings.TrimPrefix(c.CommandPath(), c.Root().CommandPath()))
		var last string
		for extra := 0; extra <= 2; extra++ {
			args := append(append([]string{}, path...), "-o", "bogus")
			for i := 0; i < extra; i++ {
				args = append(args, "x")
			}
			code, _, errOut := runPlugin(t, args...)
			last = errOut
			if code == ExitUsage && strings.HasPrefix(errOut, `error: --output "bogus" is not supported: use one of `) {
				return
			}
		}
		t.Errorf("%s -o bogus: not refused as an unsupported format: %q", c.CommandPath(), last)
	}
	walk(NewCmdRoot(NewFactory(genericiooptions.NewTestIOStreamsDiscard())))
	if checked < 10 {
		t.Errorf("only %d commands have -o", checked)
	}
}

// TestBrokenKubeconfigIsOneLine: a kubeconfig that is not YAML, names a
// context it does not have, or points at client-cert files that are not
// there is kubectl's one line, not a panic: explain compared errors, and
// clientcmd's aggregate is a slice, which panicked ("comparing
// uncomparable type errors.aggregate") in every command that explains.
func TestBrokenKubeconfigIsOneLine(t *testing.T) {
	good := closedPortKubeconfig(t)
	dir := t.TempDir()
	notYAML := filepath.Join(dir, "not-yaml")
	if err := os.WriteFile(notYAML, []byte("clusters: [unclosed\n\t: :"), 0o600); err != nil {
		t.Fatal(err)
	}
	missingCert := filepath.Join(dir, "missing-cert")
	config := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {client-certificate: ` + filepath.Join(dir, "nope.crt") + `, client-key: ` + filepath.Join(dir, "nope.key") + `}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(missingCert, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, broken := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"not YAML", []string{"--kubeconfig", notYAML}, "error loading config file"},
		{"missing context", []string{"--kubeconfig", good, "--context", "nosuch"}, `context "nosuch" does not exist`},
		{"missing client cert", []string{"--kubeconfig", missingCert}, "unable to read client-cert "},
	} {
		for _, args := range [][]string{
			{"status"},
			{"breakglass", "web", "deploy/web", "--replicas", "3", "--reason", "r", "-y"},
			{"restore", "web", "-y"},
			{"propose", "web"},
			{"drift", "-A"},
			{"debt", "-A"},
			{"contract", "check", "-A"},
			{"audit", "log"},
			{"audit", "verify"},
			{"ticket", "sync"},
			{"version"},
		} {
			line := strings.Join(args, " ") + " (" + broken.name + ")"
			code, _, stderr := runPlugin(t, append(args, broken.flags...)...)
			if code != ExitFailure && code != ExitCannotTell {
				t.Errorf("%s: exit %d, want 1 (or 3 for a check): %s", line, code, stderr)
			}
			if !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, broken.want) || strings.Contains(stderr, "panic") {
				t.Errorf("%s: stderr %q, want one line saying %q", line, stderr, broken.want)
			}
		}
	}
}

// FuzzExplain: every error shape client-go and clientcmd return, wrapped
// as the commands wrap them, goes through the error-explaining path
// (spellInput, explain, reach, then Execute's line) without a panic and
// keeps its identity.
func FuzzExplain(f *testing.F) {
	for _, s := range []string{"", "connection refused", "https://k8s.example:6443/api/v1/namespaces", "unable to read client-cert", "%w %v"} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(5))
	}
	f.Fuzz(func(t *testing.T, text string, shape uint8) {
		err := errorShape(text, shape)
		for _, command := range []string{"breakglass", "restore", "status"} {
			got := reach(spellInput(explain(err, command, audit.AppRef{Namespace: "argocd", Name: "web"})))
			if !errors.Is(got, err) {
				t.Fatalf("shape %d %q: %v lost the error's identity", shape, text, got)
			}
			_ = lowerFirst(got.Error())
		}
	})
}

// errorShape is one of the error shapes a command may meet, carrying text.
func errorShape(text string, shape uint8) error {
	base := errors.New(text)
	shapes := []error{
		base,
		utilerrors.NewAggregate([]error{base, errors.New("second")}),
		clientcmd.NewEmptyConfigError(text),
		clientcmd.ErrEmptyConfig,
		&url.Error{Op: "Get", URL: text, Err: syscall.ECONNREFUSED},
		&url.Error{Op: "Get", URL: "https://k8s.example/api/v1/namespaces/x", Err: &net.DNSError{Name: text, Err: "no such host"}},
		apierrors.NewUnauthorized(text),
		apierrors.NewNotFound(schema.GroupResource{Resource: text}, text),
		apierrors.NewForbidden(schema.GroupResource{Resource: "applications"}, text, base),
		&argocd.InputError{Input: breakglass.InputReason, Value: text, Problem: text, Kind: breakglass.ErrSecretText},
		&argocd.InputError{Input: argocd.Input(text), Problem: text},
		fmt.Errorf("%w: %s", breakglass.ErrNotCaughtUp, text),
		utilerrors.NewAggregate([]error{fmt.Errorf("%w", breakglass.ErrJoinable), apierrors.NewUnauthorized(text)}),
		errors.Join(base, &url.Error{Op: "Get", URL: "https://k8s.example/api", Err: os.ErrDeadlineExceeded}),
		&ExitError{Code: ExitUsage, Err: utilerrors.NewAggregate([]error{base})},
	}
	err := shapes[int(shape)%len(shapes)]
	if shape/uint8(len(shapes))%2 == 1 {
		err = fmt.Errorf("listing applications: %w", err)
	}
	return err
}

// TestMainProcess is the plugin's main when KUBECTL_GITOPS_TEST_MAIN holds
// its arguments (one a line): the tests that must see the process's own
// stderr, which client-go's klog writes to directly, run it as a child.
func TestMainProcess(t *testing.T) {
	args := os.Getenv("KUBECTL_GITOPS_TEST_MAIN")
	if args == "" {
		t.Skip("only as a child of a test that runs the plugin's main")
	}
	os.Exit(Main(strings.Split(args, "\n")))
}

// runMain runs the plugin's main in a child process and returns its exit
// code and stderr.
func runMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainProcess$")
	cmd.Env = append(os.Environ(), "KUBECTL_GITOPS_TEST_MAIN="+strings.Join(args, "\n"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// TestNoClientLogsBeforeTheErrorLine: an unreachable server is the one
// error line: client-go's discovery cache logged "Couldn't get current
// server API group list" in klog's format beside it.
func TestNoClientLogsBeforeTheErrorLine(t *testing.T) {
	kubeconfig := closedPortKubeconfig(t)
	code, stderr := runMain(t, "breakglass", "web", "deploy/web", "--replicas", "2", "--reason", "r", "--dry-run", "--kubeconfig", kubeconfig)
	if code != ExitFailure || !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want exit 1 and the one error line", code, stderr)
	}
}

// TestAMisspeltNamespaceIsNoAnswer: a gate pointed at a namespace that
// holds no Application warns and exits 3 under --exit-code: "no drift in
// 0 application(s)", exit 0, let a typo pass it. A namespace that does
// hold Applications answers as before; status of an Application that
// does not exist says so.
func TestAMisspeltNamespaceIsNoAnswer(t *testing.T) {
	newFakeCluster(t)
	for _, args := range [][]string{
		{"drift", "--exit-code"},
		{"debt", "--exit-code"},
		{"contract", "check", "--exit-code"},
		{"status", "--exit-code"},
	} {
		code, _, errOut := runPlugin(t, append(args, "--app-namespace", "nosuchns")...)
		if code != ExitCannotTell || !strings.Contains(errOut, "warning: no Application in namespace nosuchns: is --app-namespace right (or -A)?") {
			t.Errorf("%v --app-namespace nosuchns: exit %d, stderr %q; want exit 3 and the warning", args, code, errOut)
		}
		if code, _, errOut := runPlugin(t, args...); code == ExitCannotTell || strings.Contains(errOut, "no Application in") {
			t.Errorf("%v in argocd, which holds web: exit %d, stderr %q", args, code, errOut)
		}
	}
	if code, _, errOut := runPlugin(t, "status", "nosuchapp"); code != ExitFailure || !strings.Contains(errOut, `"nosuchapp"`) || !strings.Contains(errOut, "set --app-namespace") {
		t.Errorf("status nosuchapp: exit %d, stderr %q; want it to say the Application does not exist", code, errOut)
	}
}

// TestHelpSaysWhatFlagsTake: pflag makes a flag's first back-quoted text
// its value name ("--propose kubectl gitops propose", "--file audit log -o
// jsonl"), so back quotes in a flag's usage hold a value name or nothing;
// -n shows only where it is read (breakglass), since everywhere else it is
// refused.
func TestHelpSaysWhatFlagsTake(t *testing.T) {
	valueName := regexp.MustCompile("^[A-Z][A-Z_]*$")
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); strings.Contains(f.Usage, "`") && !valueName.MatchString(name) {
				t.Errorf("%s --%s: back quotes make %q its value name", c.CommandPath(), f.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewCmdRoot(NewFactory(genericiooptions.NewTestIOStreamsDiscard())))
	for _, tt := range []struct {
		args  []string
		shows bool
	}{
		{[]string{"status", "-h"}, false},
		{[]string{"audit", "verify", "-h"}, false},
		{[]string{"breakglass", "-h"}, true},
		{[]string{"restore", "-h"}, false},
	} {
		_, out, _ := runPlugin(t, tt.args...)
		if shows := strings.Contains(out, "-n, --namespace"); shows != tt.shows || !strings.Contains(out, "--kubeconfig") {
			t.Errorf("%v lists -n: %v, want %v\n%s", tt.args, shows, tt.shows, out)
		}
	}
	if _, out, _ := runPlugin(t, "breakglass", "-h"); !strings.Contains(out, "--propose ") || strings.Contains(out, "--propose kubectl") {
		t.Errorf("breakglass -h spells --propose's value: %s", out)
	}
}

// TestEveryRefusalNamesTheRole: a command the API server (or the tool)
// refuses for want of a right names the role file that grants it,
// whichever command it was: some did, others did not.
func TestEveryRefusalNamesTheRole(t *testing.T) {
	web := audit.AppRef{Namespace: "argocd", Name: "web"}
	for _, command := range []string{"breakglass", "restore", "propose", "status", "drift", "debt", "check"} {
		err := explain(&argocd.ReadError{App: argocd.AppRef{Namespace: "argocd", Name: "web"}, Err: apierrors.NewForbidden(schema.GroupResource{Group: "argoproj.io", Resource: "applications"}, "web", errors.New("no"))}, command, web)
		if !strings.Contains(err.Error(), "deploy/rbac/oncall.yaml") {
			t.Errorf("%s: %v names no role", command, err)
		}
	}
	if err := explain(fmt.Errorf("%w: oncall is not in group reviewers", breakglass.ErrNotReviewer), "review", web); !strings.Contains(err.Error(), "deploy/rbac/reviewer.yaml") {
		t.Errorf("a review by on-call: %v names no role", err)
	}
}
