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

// userDocs are README.md and the pages of docs/ written by hand (the
// command reference under docs/commands is generated).
func userDocs(t *testing.T) map[string][]byte {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string][]byte{}
	for _, p := range append(pages, filepath.Join("..", "README.md")) {
		content, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs[strings.TrimPrefix(filepath.ToSlash(p), "../")] = content
	}
	return docs
}

// TestREADMERenders checks what made README.md render wrongly, in it and
// every page of docs/: a fence with text after it inside a code block
// does not close it (a closing "``` Record *N* is the" turned ~70 lines of
// prose into code), every block is closed, and a table is not split by a
// blank line (the breakglass flag table rendered as a table and a stray
// line of pipes).
func TestREADMERenders(t *testing.T) {
	for name, content := range userDocs(t) {
		renders(t, name, string(content))
	}
}

// TestREADMEIsAPageANewcomerReads: README is what and why, the two
// commands, the incident walk, install and where to read on; the
// reference lives in docs/. It was 1,952 lines.
func TestREADMEIsAPageANewcomerReads(t *testing.T) {
	readme := string(userDocs(t)["README.md"])
	if n := strings.Count(readme, "\n"); n > 300 {
		t.Errorf("README.md is %d lines: move the reference into docs/ (300 at most)", n)
	}
	for _, want := range []string{"make demo", "make test", "## An incident, step by step", "## Install", "## Where to read on"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
}

// TestDocsLinksResolve: every relative link of README and docs/ names a
// file that exists and, with an #anchor, a heading of that page: moving
// the reference into docs/ must not leave a link behind.
func TestDocsLinksResolve(t *testing.T) {
	docs := userDocs(t)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading := regexp.MustCompile(`(?m)^#{1,6} (.*)$`)
	anchors := func(content []byte) map[string]bool {
		out := map[string]bool{}
		for _, m := range heading.FindAllSubmatch(content, -1) {
			slug := strings.ToLower(strings.TrimSpace(string(m[1])))
			slug = regexp.MustCompile(`[^\w\- ]`).ReplaceAllString(slug, "")
			out[strings.ReplaceAll(slug, " ", "-")] = true
		}
		return out
	}
	for name, content := range docs {
		for _, m := range link.FindAllSubmatch(content, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join("..", filepath.Dir(name), file)
			if file == "" {
				path = filepath.Join("..", name)
			}
			page, err := os.ReadFile(path)
			if err != nil {
				if info, serr := os.Stat(path); serr == nil && info.IsDir() {
					continue
				}
				t.Errorf("%s links %s, which does not exist", name, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(page)[anchor] {
				t.Errorf("%s links %s, whose page has no heading #%s", name, target, anchor)
			}
		}
	}
}

func renders(t *testing.T, name, readme string) {
	lines := strings.Split(readme, "\n")
	open := 0 // the line of the open block's fence, 0 outside one
	for i, line := range lines {
		n := i + 1
		switch {
		case open == 0 && fence.MatchString(line):
			open = n
		case open != 0 && closingFence.MatchString(line):
			open = 0
		case open != 0 && fence.MatchString(line):
			t.Errorf("%s:%d: %q inside the code block opened at line %d does not close it: a closing fence has nothing after the backticks", name, n, line, open)
		case open == 0 && i >= 2 && strings.HasPrefix(line, "|") && lines[i-1] == "" && strings.HasPrefix(lines[i-2], "|"):
			t.Errorf("%s:%d: a blank line splits the table above it", name, n)
		}
	}
	if open != 0 {
		t.Errorf("%s:%d: the code block opened here is never closed", name, open)
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
// somewhere in README or the pages of docs/ written by hand, by its long
// name or its shorthand (`-o`), so that no flag is added without a word
// about it (the generated reference lists them all whatever is said).
func TestREADMEDocumentsEveryFlag(t *testing.T) {
	var readme []byte
	for _, content := range userDocs(t) {
		readme = append(readme, content...)
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
			t.Errorf("neither README.md nor docs/ documents %s --%s", cmd.CommandPath(), f.Name)
		})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(NewCmdRoot(testFactory(t, streams)))
}
