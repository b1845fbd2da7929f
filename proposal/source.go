package proposal

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// Source is the one Git source of an Application a proposal edits, as
// its spec declares it (argocd.App.SourceSpec).
type Source = argocd.SourceSpec

// HelmOptions and HelmParameter are spec.source.helm's, as Source has them.
type (
	HelmOptions   = argocd.HelmOptions
	HelmParameter = argocd.HelmParameter
)

// The kinds of source Argo CD renders, as it tells them apart.
const (
	KindDirectory = "Directory"
	KindKustomize = "Kustomize"
	KindHelm      = "Helm"
)

// Refusal says why source s cannot be proposed to from its spec, "" when
// it can: a Git source of plain manifests, a kustomization or a Helm
// chart, with nothing in the spec that Argo CD renders over Git.
func Refusal(s Source) string {
	switch {
	case s.Chart != "":
		return "the Application renders a chart from a Helm repository, not from Git: set the value in the Application or bump the chart by hand (the ticket says which field)"
	case s.Declared == "Plugin":
		return "the Application renders through a config management plugin, whose output cannot be traced back to a file"
	case len(s.KustomizeSettings) > 0:
		return "the Application's spec.source.kustomize sets " + strings.Join(s.KustomizeSettings, ", ") + ", which Argo CD applies over the overlay in Git: a change there could be overridden, so make it by hand (in the overlay or in the Application)"
	case s.HelmFileParameters:
		return "the Application's spec.source.helm sets fileParameters, which this proposal does not render: set the chart's value by hand (the ticket says which field)"
	}
	for _, f := range s.Helm.ValueFiles {
		if strings.Contains(f, "://") || strings.HasPrefix(f, "$") || filepath.IsAbs(f) {
			return "the value file " + f + " is not a file of the chart's repository: set the chart's value by hand (the ticket says which field)"
		}
	}
	return ""
}

// KindOf is how Argo CD renders source s in the checkout at root: as its
// spec says (helm, kustomize, directory), else by what the path holds (a
// kustomization, a Chart.yaml), else as a directory of manifests.
func KindOf(s Source, root string) string {
	switch s.Declared {
	case KindHelm, KindKustomize, KindDirectory:
		return s.Declared
	}
	dir := filepath.Join(root, filepath.FromSlash(s.Path))
	if kustomizationFile(dir) != "" {
		return KindKustomize
	}
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err == nil {
		return KindHelm
	}
	return KindDirectory
}

// kustomizationFile is the name of dir's kustomization, "" when it has none.
func kustomizationFile(dir string) string {
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return name
		}
	}
	return ""
}

// ReadDirectory reads the manifests of source path in the checkout at
// root, as Argo CD's directory source does: *.yaml, *.yml and *.json,
// subdirectories only with recurse. A kustomization there is refused:
// the Application says directory, which is a contradiction to sort out
// by hand.
func ReadDirectory(root, path string, recurse bool) ([]File, error) {
	dir := filepath.Join(root, filepath.FromSlash(path))
	if kustomizationFile(dir) != "" {
		return nil, fmt.Errorf("%w: %s holds a kustomization, but the Application says to read it as a directory of manifests", ErrCannotPropose, path)
	}
	var files []File
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && (!recurse || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, File{Path: filepath.ToSlash(rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// Verify renders the source before and after the change the way Argo CD
// reads plain manifests (every document of every file) and checks that
// the only difference is edits on their targets: every other document, and
// every other field of the targets, unchanged. Its error lists what else
// would change.
func Verify(before, after []File, defaultNamespace string, edits []Edit) error {
	was, err := Documents(before)
	if err != nil {
		return err
	}
	now, err := Documents(after)
	if err != nil {
		return fmt.Errorf("%w: the edited source no longer parses: %v", ErrCannotPropose, err)
	}
	return VerifyRendered(was, now, defaultNamespace, edits)
}

// VerifyRendered checks that what a source renders after the change
// (now) differs from what it rendered before (was) by edits on their
// targets alone. Its error lists what else would change.
func VerifyRendered(was, now []Document, defaultNamespace string, edits []Edit) error {
	if len(was) != len(now) {
		return fmt.Errorf("%w: the edit would render %d objects where there were %d", ErrCannotPropose, len(now), len(was))
	}
	var wrong []string
	for i := range was {
		want := was[i].Object
		var mine []Edit
		for _, e := range edits {
			if was[i].Matches(e.Target, defaultNamespace) {
				mine = append(mine, e)
			}
		}
		if len(mine) > 0 {
			var err error
			if want, err = Apply(want, mine); err != nil {
				return err
			}
		}
		if !Same(now[i].Object, want) {
			changes := audit.Diff(want, now[i].Object)
			for _, c := range changes {
				wrong = append(wrong, now[i].Where()+" "+c.Path)
			}
			if len(changes) == 0 {
				wrong = append(wrong, now[i].Where())
			}
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%w: the edit would also change %s", ErrCannotPropose, strings.Join(wrong, ", "))
	}
	return nil
}
