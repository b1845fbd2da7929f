package proposal

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"

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
	// Helm is spec.source.helm: how Argo CD runs helm template on the
	// chart at Path, when it is one.
	Helm HelmOptions
}

// HelmOptions are the parts of spec.source.helm that decide what helm
// template renders.
type HelmOptions struct {
	ReleaseName, Namespace string
	// ValueFiles are the chart's value files in the order helm reads them
	// (a later one wins), relative to the chart.
	ValueFiles []string
	// IgnoreMissing is ignoreMissingValueFiles.
	IgnoreMissing bool
	// Values is spec.source.helm.values or valuesObject, as YAML: it wins
	// over every file.
	Values     string
	Parameters []HelmParameter
	SkipCRDs   bool
	SkipTests  bool
	// SkipSchemaValidation is skipSchemaValidation.
	SkipSchemaValidation bool
	// KubeVersion and APIVersions are the capabilities the chart sees.
	KubeVersion string
	APIVersions []string
}

// HelmParameter is a --set (or --set-string) of spec.source.helm.parameters.
type HelmParameter struct {
	Name, Value string
	ForceString bool
}

// The kinds of source Argo CD renders, as it tells them apart.
const (
	KindDirectory = "Directory"
	KindKustomize = "Kustomize"
	KindHelm      = "Helm"
)

// Refusal says why an Application's sources cannot be proposed to from
// its spec, "" when they can: one Git source of plain manifests, a
// kustomization or a Helm chart, with nothing in the spec that Argo CD
// renders over Git.
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
	case src["chart"] != nil:
		return "the Application renders a chart from a Helm repository, not from Git: set the value in the Application or bump the chart by hand (the ticket says which field)"
	case src["plugin"] != nil:
		return "the Application renders through a config management plugin, whose output cannot be traced back to a file"
	}
	if k, _ := src["kustomize"].(map[string]any); len(k) > 0 {
		var keys []string
		for key := range k {
			if key != "version" {
				keys = append(keys, key)
			}
		}
		if len(keys) > 0 {
			sort.Strings(keys)
			return "the Application's spec.source.kustomize sets " + strings.Join(keys, ", ") + ", which Argo CD applies over the overlay in Git: a change there could be overridden, so make it by hand (in the overlay or in the Application)"
		}
	}
	if h, _ := src["helm"].(map[string]any); h != nil {
		if h["fileParameters"] != nil {
			return "the Application's spec.source.helm sets fileParameters, which this proposal does not render: set the chart's value by hand (the ticket says which field)"
		}
		for _, f := range stringsOf(h["valueFiles"]) {
			if strings.Contains(f, "://") || strings.HasPrefix(f, "$") || filepath.IsAbs(f) {
				return "the value file " + f + " is not a file of the chart's repository: set the chart's value by hand (the ticket says which field)"
			}
		}
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
	if h, ok := src["helm"].(map[string]any); ok {
		o := &s.Helm
		o.ReleaseName, _ = h["releaseName"].(string)
		o.Namespace, _ = h["namespace"].(string)
		o.ValueFiles = stringsOf(h["valueFiles"])
		o.IgnoreMissing, _ = h["ignoreMissingValueFiles"].(bool)
		o.Values, _ = h["values"].(string)
		if obj, ok := h["valuesObject"].(map[string]any); ok && len(obj) > 0 {
			// valuesObject wins over values, as Argo CD reads them.
			if b, err := yaml.Marshal(obj); err == nil {
				o.Values = string(b)
			}
		}
		for _, p := range listOf(h["parameters"]) {
			m, _ := p.(map[string]any)
			var hp HelmParameter
			hp.Name, _ = m["name"].(string)
			hp.Value, _ = m["value"].(string)
			hp.ForceString, _ = m["forceString"].(bool)
			o.Parameters = append(o.Parameters, hp)
		}
		o.SkipCRDs, _ = h["skipCrds"].(bool)
		o.SkipTests, _ = h["skipTests"].(bool)
		o.SkipSchemaValidation, _ = h["skipSchemaValidation"].(bool)
		o.KubeVersion, _ = h["kubeVersion"].(string)
		o.APIVersions = stringsOf(h["apiVersions"])
	}
	return s
}

func listOf(v any) []any {
	l, _ := v.([]any)
	return l
}

func stringsOf(v any) []string {
	var out []string
	for _, x := range listOf(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// KindOf is how Argo CD renders source in the checkout at root: as its
// spec says (helm, kustomize), else by what the path holds (a
// kustomization, a Chart.yaml), else as a directory of manifests.
func KindOf(spec map[string]any, root, path string) string {
	src, _ := spec["source"].(map[string]any)
	switch {
	case src["helm"] != nil:
		return KindHelm
	case src["kustomize"] != nil:
		return KindKustomize
	case src["directory"] != nil:
		return KindDirectory
	}
	dir := filepath.Join(root, filepath.FromSlash(path))
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
