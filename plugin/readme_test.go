package plugin

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

var (
	// fence is a line that opens or closes a fenced code block.
	fence = regexp.MustCompile("^ {0,3}```")
	// closingFence is the only line that closes one: backticks alone.
	closingFence = regexp.MustCompile("^ {0,3}```\\s*$")
)

// TestREADMERenders checks what made README.md render wrongly: a fence
// with text after it inside a code block does not close it (a closing
// "``` Record *N* is the" turned ~70 lines of prose into code), every block
// is closed, and a table is not split by a blank line (the breakglass flag
// table rendered as a table and a stray line of pipes).
func TestREADMERenders(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	open := 0 // the line of the open block's fence, 0 outside one
	for i, line := range lines {
		n := i + 1
		switch {
		case open == 0 && fence.MatchString(line):
			open = n
		case open != 0 && closingFence.MatchString(line):
			open = 0
		case open != 0 && fence.MatchString(line):
			t.Errorf("README.md:%d: %q inside the code block opened at line %d does not close it: a closing fence has nothing after the backticks", n, line, open)
		case open == 0 && i >= 2 && strings.HasPrefix(line, "|") && lines[i-1] == "" && strings.HasPrefix(lines[i-2], "|"):
			t.Errorf("README.md:%d: a blank line splits the table above it", n)
		}
	}
	if open != 0 {
		t.Errorf("README.md:%d: the code block opened here is never closed", open)
	}
}

// TestBreakglassHelpShowsNoSentinel: --replicas showed "(default -1)", an
// internal "not given" its help has no use for.
func TestBreakglassHelpShowsNoSentinel(t *testing.T) {
	code, out, _ := runPlugin(t, "breakglass", "--help")
	if code != ExitOK {
		t.Fatalf("breakglass --help: exit %d", code)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "--replicas") && strings.Contains(line, "default") {
			t.Errorf("--replicas help shows a default: %q", line)
		}
	}
}

// TestREADMEDocumentsEveryFlag: every flag of every command is named
// somewhere in the README, by its long name or its shorthand (`-o`), so
// that no flag is added without a word about it.
func TestREADMEDocumentsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			named := regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + `([^a-z-]|$)`)
			short := regexp.MustCompile("`-" + regexp.QuoteMeta(f.Shorthand) + "[ ,`]")
			if f.Hidden || named.Match(readme) || f.Shorthand != "" && short.Match(readme) {
				return
			}
			t.Errorf("README.md does not document %s --%s", cmd.CommandPath(), f.Name)
		})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(NewCmdRoot(testFactory(t, streams)))
}
