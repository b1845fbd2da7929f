package proposal

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// Source is the one Git source of an Application a proposal edits, as its
// spec says (Argo CD's spec.source).
type Source struct {
	RepoURL        string
	Path           string
	TargetRevision string
	// Recurse is directory.recurse: subdirectories are read too.
	Recurse bool
}

// Refusal says why an Application's sources cannot be proposed to from
// its spec, "" when they can: one Git source of plain manifests.
func Refusal(spec map[string]any) string {
	switch {
	case spec["sourceHydrator"] != nil:
		return "the Application uses the source hydrator: its dry source renders through Argo CD's commit server, which this proposal does not verify yet; make the change in the dry source by hand"
	case spec["sources"] != nil:
		return "the Application has several sources: which one renders the resource is not proven here; make the change by hand in the source that renders it"
	}
	src, _ := spec["source"].(map[string]any)
	switch {
	case src == nil:
		return "the Application has no source"
	case src["chart"] != nil || src["helm"] != nil:
		return "the Application renders a Helm chart: the value that yields each field is not proven by rendering here; set the chart's value by hand (the ticket says which)"
	case src["kustomize"] != nil:
		return "the Application renders with kustomize: edit the overlay by hand (`kustomize edit set image`, replicas: or a patch; the ticket says which)"
	case src["plugin"] != nil:
		return "the Application renders through a config management plugin, whose output cannot be traced back to a file"
	}
	return ""
}

// SourceOf is spec's single source.
func SourceOf(spec map[string]any) Source {
	src, _ := spec["source"].(map[string]any)
	s := Source{}
	s.RepoURL, _ = src["repoURL"].(string)
	s.Path, _ = src["path"].(string)
	s.TargetRevision, _ = src["targetRevision"].(string)
	if dir, ok := src["directory"].(map[string]any); ok {
		s.Recurse, _ = dir["recurse"].(bool)
		if dir["include"] != nil || dir["exclude"] != nil || dir["jsonnet"] != nil {
			s.Recurse = false
		}
	}
	return s
}

// ReadDirectory reads the manifests of source path in the checkout at
// root, as Argo CD's directory source does: *.yaml, *.yml and *.json,
// subdirectories only with recurse. A kustomization or a Helm chart there
// is refused: Argo CD would render it another way.
func ReadDirectory(root, path string, recurse bool) ([]File, error) {
	dir := filepath.Join(root, filepath.FromSlash(path))
	for _, marker := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
			return nil, fmt.Errorf("%w: %s holds a kustomization: edit the overlay by hand (`kustomize edit set image`, replicas: or a patch; the ticket says which)", ErrCannotPropose, path)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err == nil {
		return nil, fmt.Errorf("%w: %s is a Helm chart: the value that yields each field is not proven by rendering here; set it by hand", ErrCannotPropose, path)
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
			if want, err = Apply(want, mine); err != nil {
				return err
			}
		}
		if !Same(now[i].Object, want) {
			for _, c := range audit.Diff(want, now[i].Object) {
				wrong = append(wrong, fmt.Sprintf("%s document %d %s", now[i].File, now[i].Index+1, c.Path))
			}
			if len(audit.Diff(want, now[i].Object)) == 0 {
				wrong = append(wrong, fmt.Sprintf("%s document %d", now[i].File, now[i].Index+1))
			}
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%w: the edit would also change %s", ErrCannotPropose, strings.Join(wrong, ", "))
	}
	return nil
}
