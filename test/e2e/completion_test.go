//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// TestShellsCompleteBothSpellings types TAB in real bash and zsh, under
// tmux, with kubectl's completion and ours sourced (ours second): the
// plugin completes as kubectl-gitops, as kubectl gitops (kubectl hands the
// words to kubectl_complete-gitops), and kubectl's own completion still
// works. Our scripts were generated for "kubectl" and replaced kubectl's.
func TestShellsCompleteBothSpellings(t *testing.T) {
	environment(t) // one run of the suite: no cluster is needed
	oncall := newUser(t, env.Oncall.Name)
	for _, shell := range []string{"bash", "zsh"} {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(shell); err != nil {
				t.Fatalf("%s is needed for this test: make require installs it", shell)
			}
			dir := t.TempDir()
			rc := "PS1='$ '\nsource <(kubectl completion " + shell + ")\nsource <(kubectl-gitops completion " + shell + ")\n"
			if shell == "bash" {
				// As kubectl's, cobra's bash completion needs bash-completion.
				rc = "source /usr/share/bash-completion/bash_completion\n" + rc
			}
			command := "bash --rcfile " + filepath.Join(dir, "bashrc") + " -i"
			file := filepath.Join(dir, "bashrc")
			if shell == "zsh" {
				rc = "autoload -U compinit && compinit -u -D\n" + rc
				command, file = "ZDOTDIR="+dir+" zsh -i", filepath.Join(dir, ".zshrc")
			}
			if err := os.WriteFile(file, []byte(rc), 0o644); err != nil {
				t.Fatal(err)
			}
			term := newTmux(t, oncall, command)
			term.waitFor("$") // capture-pane trims the space after it
			for _, c := range []struct{ typed, want string }{
				{"kubectl-gitops bre", "$ kubectl-gitops breakglass"},
				{"kubectl gitops bre", "$ kubectl gitops breakglass"},
				{"kubectl vers", "$ kubectl version"},
			} {
				term.keys(c.typed, "Tab")
				deadline := time.Now().Add(30 * time.Second)
				for !strings.Contains(term.screen(), c.want) {
					if time.Now().After(deadline) {
						t.Fatalf("%s: %q<TAB> did not complete to %q; the terminal shows:\n%s", shell, c.typed, c.want, term.screen())
					}
					time.Sleep(200 * time.Millisecond)
				}
				term.keys("C-u")
			}
		})
	}
}
