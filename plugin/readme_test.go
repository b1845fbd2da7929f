package plugin

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
