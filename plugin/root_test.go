package plugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// runPlugin drives the root command the way main does and returns the exit
// code with both streams.
func runPlugin(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmdRoot(streams)
	cmd.SetArgs(args)
	code = Execute(context.Background(), cmd, streams)
	return code, out.String(), errOut.String()
}

func TestExitCodesAndErrorLine(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown command", []string{"bogus"}, ExitUsage, `error: unknown command "bogus"`},
		{"unknown flag", []string{"version", "--bogus"}, ExitUsage, "error: unknown flag: --bogus"},
		{"bad output format", []string{"version", "--client", "-o", "xml"}, ExitUsage, `error: --output "xml" is not supported`},
		{"extra argument", []string{"version", "extra"}, ExitUsage, "error: kubectl gitops version takes no arguments"},
		{"completion without shell", []string{"completion"}, ExitUsage, "error: kubectl gitops completion needs 1 argument"},
		{"completion unknown shell", []string{"completion", "tcsh"}, ExitUsage, `error: unsupported shell "tcsh"`},
		{"unreachable cluster", []string{"version", "--kubeconfig", "/nonexistent/kubeconfig"}, ExitFailure, "error: kubernetes api server unreachable"},
		{"ticket sync extra argument", []string{"ticket", "sync", "now"}, ExitUsage, "error: kubectl gitops ticket sync takes no arguments"},
		{"ticket sync bad output", []string{"ticket", "sync", "-o", "csv"}, ExitUsage, `error: --output "csv" is not supported`},
		{"breakglass --ticket not a key", []string{"breakglass", "web", "deploy/web", "--replicas", "2", "--reason", "r", "--ticket", "ops 7", "-y"}, ExitUsage, `error: --ticket "ops 7" is not a Jira issue key`},
		{"breakglass without APP, no terminal", []string{"breakglass", "--replicas", "2", "--reason", "r", "-y"}, ExitUsage, "error: missing APP and TARGET"},
		{"breakglass without TARGET, no terminal", []string{"breakglass", "web", "--replicas", "2", "--reason", "r", "-y"}, ExitUsage, "error: missing APP and TARGET"},
		{"breakglass extra argument", []string{"breakglass", "web", "deploy/web", "more"}, ExitUsage, "error: kubectl gitops breakglass takes at most 2 argument(s)"},
		{"breakglass endless patch file", []string{"breakglass", "web", "deploy/web", "--patch-file", "/dev/zero", "--reason", "r", "-y"}, ExitUsage, "error: --patch-file /dev/zero: the patch is over the 1 MiB limit"},
		{"breakglass oversized patch", []string{"breakglass", "web", "deploy/web", "--patch", `{"metadata":{"annotations":{"x":"` + strings.Repeat("a", 1<<20) + `"}}}`, "--reason", "r", "-y"}, ExitUsage, "error: the patch is over the 1 MiB limit"},
		{"error text is redacted and printable", []string{"breakglass", "web", "deploy/web", "--replicas", "2", "--reason", "r", "--ticket", "x --password=hunter22\x1b]0;t\a", "-y"}, ExitUsage, `error: --ticket "x --password=[REDACTED]`},
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
