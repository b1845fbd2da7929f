package plugin

import (
	"errors"
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

// TestEveryDocsCommandLineParses: every kubectl gitops command line of
// README.md and docs/ (in code blocks, and in code spans of the prose) names
// a command of the real tree, with flags it has, values they take and as
// many arguments as it takes. A renamed flag used to leave the docs telling
// people to type what the tool refuses.
func TestEveryDocsCommandLineParses(t *testing.T) {
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	lines := 0
	for page, content := range userDocs(t) {
		for _, line := range docsCommandLines(string(content)) {
			if synopsis.MatchString(line) {
				continue // a command's grammar ([optional], a|b, …, <TAB>), not a line to type
			}
			args, ok := shellWords(line)
			if !ok {
				t.Errorf("%s: cannot split %q into words", page, line)
				continue
			}
			lines++
			root := NewCmdRoot(testFactory(t, streams))
			var err error
			if cmd, rest, findErr := root.Find(args); findErr == nil && len(rest) == 0 && cmd != root {
				// A command named in prose, as `kubectl gitops propose`
				// does: it must exist, and it takes what it takes.
			} else if findErr == nil && cmd == root && len(args) > 0 && strings.HasPrefix(args[0], "-") {
				if err = root.ParseFlags(args); errors.Is(err, pflag.ErrHelp) {
					err = nil
				}
			} else {
				err = parseCommandLine(root, args)
			}
			if err != nil {
				t.Errorf("%s: %q: %v", page, line, err)
			}
		}
	}
	t.Logf("%d kubectl gitops command lines parsed", lines)
	if lines < 50 {
		t.Errorf("found %d kubectl gitops command lines in the docs; the parser has lost them", lines)
	}
}

var (
	// synopsis marks a command's grammar rather than a line to type.
	synopsis = regexp.MustCompile(`[\[\]()…<>]|\S\|\S`)
	// codeSpan is inline code in prose.
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	// invocation starts a command line of the tool.
	invocation = regexp.MustCompile(`(^|[\s(|;&]|\$\()kubectl gitops\s`)
)

// docsCommandLines are the kubectl gitops command lines of a page, the
// words after "kubectl gitops" up to the end of the command (a pipe, &&,
// ;, a closing parenthesis, a comment), continuation lines joined.
func docsCommandLines(page string) []string {
	var texts []string
	inBlock := false
	var block strings.Builder
	for _, line := range strings.Split(page, "\n") {
		switch {
		case fence.MatchString(line) && !inBlock:
			inBlock = true
			block.Reset()
		case inBlock && closingFence.MatchString(line):
			inBlock = false
			texts = append(texts, strings.Split(strings.ReplaceAll(block.String(), "\\\n", " "), "\n")...)
		case inBlock:
			block.WriteString(line + "\n")
		default:
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				texts = append(texts, m[1])
			}
		}
	}
	var out []string
	for _, text := range texts {
		for _, loc := range invocation.FindAllStringIndex(text, -1) {
			rest := text[loc[1]:]
			end := len(rest)
			for _, stop := range []string{" | ", " && ", " || ", "; ", ")", " # ", " > ", " 2>", " < "} {
				if i := strings.Index(rest, stop); i >= 0 && i < end && !insideQuotes(rest[:i]) {
					end = i
				}
			}
			if cmd := strings.TrimSpace(rest[:end]); cmd != "" {
				out = append(out, cmd)
			}
		}
	}
	return out
}

// insideQuotes says whether s leaves a quote open.
func insideQuotes(s string) bool {
	single, double := false, false
	for _, r := range s {
		switch {
		case r == '\'' && !double:
			single = !single
		case r == '"' && !single:
			double = !double
		}
	}
	return single || double
}

// shellWords splits a command line into words as a POSIX shell would for
// the quoting the docs use: single and double quotes, backslash escapes,
// and $(…) or $VAR kept as one opaque word.
func shellWords(line string) ([]string, bool) {
	var words []string
	var word strings.Builder
	inWord, single, double := false, false, false
	runes := []rune(line)
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		switch {
		case single:
			if r == '\'' {
				single = false
			} else {
				word.WriteRune(r)
			}
		case double:
			switch {
			case r == '"':
				double = false
			case r == '\\' && i+1 < len(runes):
				i++
				word.WriteRune(runes[i])
			default:
				word.WriteRune(r)
			}
		case r == '\'':
			single, inWord = true, true
		case r == '"':
			double, inWord = true, true
		case r == '\\' && i+1 < len(runes):
			i++
			word.WriteRune(runes[i])
			inWord = true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if single || double {
		return nil, false
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, true
}
