package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// referenceDir holds the command reference, one page a command, generated
// from the cobra tree as kubectl, argocd and flux generate theirs.
const referenceDir = "../docs/commands"

// TestCommandReferenceIsCurrent: docs/commands is what cobra/doc writes
// from the command tree as it is; a flag or command changed without
// `make docs` (go test ./plugin -run TestCommandReferenceIsCurrent
// -update) fails here.
func TestCommandReferenceIsCurrent(t *testing.T) {
	generated := t.TempDir()
	if err := writeReference(generated); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.RemoveAll(referenceDir); err != nil {
			t.Fatal(err)
		}
		if err := writeReference(referenceDir); err != nil {
			t.Fatal(err)
		}
	}
	pages, err := filepath.Glob(filepath.Join(generated, "*.md"))
	if err != nil || len(pages) < 15 {
		t.Fatalf("%d pages generated (%v)", len(pages), err)
	}
	for _, page := range pages {
		got, _ := os.ReadFile(page)
		want, err := os.ReadFile(filepath.Join(referenceDir, filepath.Base(page)))
		if err != nil || string(got) != string(want) {
			t.Errorf("docs/commands/%s is stale: run make docs", filepath.Base(page))
		}
	}
	committed, _ := filepath.Glob(filepath.Join(referenceDir, "*.md"))
	if len(committed) != len(pages) {
		t.Errorf("docs/commands has %d pages, the command tree %d: run make docs", len(committed), len(pages))
	}
}

// writeReference writes the command reference into dir. What depends on
// the machine (the kubeconfig cache's default path) is spelt as a person
// reads it.
func writeReference(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root := NewCmdRoot(NewFactory(genericiooptions.NewTestIOStreamsDiscard()))
	if f := root.PersistentFlags().Lookup("cache-dir"); f != nil {
		f.DefValue = "$HOME/.kube/cache"
	}
	namespace := root.PersistentFlags().Lookup("namespace")
	link := func(name string) string { return strings.ToLower(name) }
	var write func(*cobra.Command) error
	write = func(c *cobra.Command) error {
		c.DisableAutoGenTag = true
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
				if err := write(sub); err != nil {
					return err
				}
			}
		}
		// -n shows only where it is read, as in help (hideNamespace).
		namespace.Hidden = c.Annotations[takesNamespace] == ""
		defer func() { namespace.Hidden = false }()
		f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "_")+".md"))
		if err != nil {
			return err
		}
		defer f.Close()
		return doc.GenMarkdownCustom(c, f, link)
	}
	return write(root)
}
