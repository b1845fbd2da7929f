package plugin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompletionScriptsAreForTheBinary: each script registers completion
// for kubectl-gitops and nothing of kubectl's. They were generated for the
// root's first word, "kubectl": sourcing one replaced (or, in fish, erased)
// kubectl's own completion and completed nothing for kubectl-gitops.
func TestCompletionScriptsAreForTheBinary(t *testing.T) {
	for shell, registers := range map[string]string{
		"bash":       "complete -o default -F __start_kubectl-gitops kubectl-gitops",
		"zsh":        "compdef _kubectl-gitops kubectl-gitops",
		"fish":       "complete -c kubectl-gitops -e",
		"powershell": "Register-ArgumentCompleter -CommandName 'kubectl-gitops'",
	} {
		code, script, errOut := runPlugin(t, "completion", shell)
		if code != ExitOK {
			t.Fatalf("completion %s: exit %d: %s", shell, code, errOut)
		}
		if !strings.Contains(script, registers) {
			t.Errorf("completion %s does not register kubectl-gitops (%q)", shell, registers)
		}
		// fish and powershell spell kubectl-gitops's functions __kubectl_gitops_*.
		script = strings.ReplaceAll(script, "__kubectl_gitops", "")
		for _, kubectls := range []string{"_kubectl ", "__kubectl_", "complete -c kubectl ", "#compdef kubectl\n", "CommandName 'kubectl'"} {
			if strings.Contains(script, kubectls) {
				t.Errorf("completion %s mentions kubectl's own completion: %q", shell, kubectls)
			}
		}
	}
}

// TestBashCompletionLeavesKubectlsAlone sources kubectl's completion, then
// ours, in a real bash: both must be registered afterwards.
func TestBashCompletionLeavesKubectlsAlone(t *testing.T) {
	out := sourceBoth(t, "bash", "kubectl-gitops.bash", "--norc", "--noprofile", "-c",
		`source <(kubectl completion bash) && source "$1" && complete -p kubectl-gitops && complete -p kubectl`)
	for _, want := range []string{"__start_kubectl-gitops kubectl-gitops", "__start_kubectl kubectl"} {
		if !strings.Contains(out, want) {
			t.Errorf("complete -p lacks %q:\n%s", want, out)
		}
	}
}

// TestZshCompletionLeavesKubectlsAlone is the same in zsh, whose script
// registers with compdef.
func TestZshCompletionLeavesKubectlsAlone(t *testing.T) {
	out := sourceBoth(t, "zsh", "_kubectl-gitops", "-f", "-c",
		`autoload -U compinit && compinit -u -D && source <(kubectl completion zsh) && source "$1" && print -r -- "gitops=$_comps[kubectl-gitops] kubectl=$_comps[kubectl]"`)
	if !strings.Contains(out, "gitops=_kubectl-gitops kubectl=_kubectl") {
		t.Errorf("zsh registrations: %s; want kubectl-gitops and kubectl each with its own function", out)
	}
}

// sourceBoth writes our completion script for shell as file and runs shell
// with args, the script's path as $1, returning what it printed. The
// shell and kubectl (whose completion must survive) are make require's:
// without them the test fails, saying so, rather than passing unrun.
func sourceBoth(t *testing.T, shell, file string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath(shell)
	if err != nil {
		t.Fatalf("%s is needed for this test: make require installs it", shell)
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatal("kubectl is needed for this test, whose completion must survive ours")
	}
	_, script, _ := runPlugin(t, "completion", shell)
	file = filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, append(args, shell, file)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", shell, err, out)
	}
	return string(out)
}
