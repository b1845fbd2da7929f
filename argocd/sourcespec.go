package argocd

import (
	"sort"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// SourceSpec is an Application's one source as its spec tells Argo CD to
// render it: what a proposal edits and then renders again. Besides the
// source, it says what else the spec declares that a proposal cannot
// render (proposal.Refusal words why).
type SourceSpec struct {
	RepoURL        string
	Path           string
	TargetRevision string
	// Declared is the kind of source the spec names (Helm, Kustomize,
	// Directory, Plugin), "" when it names none and Argo CD detects it.
	Declared string
	// Recurse is directory.recurse without include, exclude or jsonnet:
	// subdirectories are read too.
	Recurse bool
	// Helm is spec.source.helm: how Argo CD runs helm template on the
	// chart at Path, when it is one.
	Helm HelmOptions

	// Position is the source's place in spec.sources (1 for the first), 0
	// for an Application with one source.
	Position int
	// Ref is the name other sources read this one's files by ($REF/…).
	Ref string
	// Chart is a chart of a Helm repository, not of Git.
	Chart string
	// KustomizeSettings are the keys of spec.source.kustomize besides
	// version: what Argo CD applies over the overlay in Git.
	KustomizeSettings []string
	// HelmFileParameters is spec.source.helm.fileParameters.
	HelmFileParameters bool
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

// SourceSpecs are a's sources that render manifests, each as its spec
// declares it: spec.source alone; for the source hydrator its dry source,
// where a change belongs (the hydrated branch is generated from it); or
// each of spec.sources but those that only lend their files to the others
// (a ref with no path). None when the spec has no source.
func (a App) SourceSpecs() []SourceSpec {
	if hydrator, found, _ := unstructured.NestedMap(a.Object, "spec", "sourceHydrator"); found && hydrator != nil {
		dry, ok, _ := unstructured.NestedMap(hydrator, "drySource")
		if !ok || dry == nil {
			return nil
		}
		return []SourceSpec{sourceSpec(dry)}
	}
	if src, ok, _ := unstructured.NestedMap(a.Object, "spec", "source"); ok && src != nil {
		return []SourceSpec{sourceSpec(src)}
	}
	list, _, _ := unstructured.NestedSlice(a.Object, "spec", "sources")
	var out []SourceSpec
	for i, item := range list {
		m, _ := item.(map[string]any)
		if m == nil || !renders(m) {
			continue
		}
		s := sourceSpec(m)
		s.Position = i + 1
		out = append(out, s)
	}
	return out
}

// sourceSpec reads one source of the spec.
func sourceSpec(src map[string]any) SourceSpec {
	var s SourceSpec
	s.RepoURL, s.Path, s.TargetRevision, s.Chart, s.Ref = str(src, "repoURL"), str(src, "path"), str(src, "targetRevision"), str(src, "chart"), str(src, "ref")
	s.Declared = sourceKind(src)
	if dir, ok := src["directory"].(map[string]any); ok {
		s.Recurse, _ = dir["recurse"].(bool)
		if dir["include"] != nil || dir["exclude"] != nil || dir["jsonnet"] != nil {
			s.Recurse = false
		}
	}
	if k, _ := src["kustomize"].(map[string]any); len(k) > 0 {
		for key := range k {
			if key != "version" {
				s.KustomizeSettings = append(s.KustomizeSettings, key)
			}
		}
		sort.Strings(s.KustomizeSettings)
	}
	if h, ok := src["helm"].(map[string]any); ok {
		s.Helm = helmOptions(h)
		s.HelmFileParameters = h["fileParameters"] != nil
	}
	return s
}

func helmOptions(h map[string]any) HelmOptions {
	var o HelmOptions
	o.ReleaseName, o.Namespace = str(h, "releaseName"), str(h, "namespace")
	o.ValueFiles = stringsOf(h["valueFiles"])
	o.IgnoreMissing, _ = h["ignoreMissingValueFiles"].(bool)
	o.Values = str(h, "values")
	if obj, ok := h["valuesObject"].(map[string]any); ok && len(obj) > 0 {
		// valuesObject wins over values, as Argo CD reads them.
		if b, err := yaml.Marshal(obj); err == nil {
			o.Values = string(b)
		}
	}
	params, _ := h["parameters"].([]any)
	for _, p := range params {
		m, _ := p.(map[string]any)
		hp := HelmParameter{Name: str(m, "name"), Value: str(m, "value")}
		hp.ForceString, _ = m["forceString"].(bool)
		o.Parameters = append(o.Parameters, hp)
	}
	o.SkipCRDs, _ = h["skipCrds"].(bool)
	o.SkipTests, _ = h["skipTests"].(bool)
	o.SkipSchemaValidation, _ = h["skipSchemaValidation"].(bool)
	o.KubeVersion = str(h, "kubeVersion")
	o.APIVersions = stringsOf(h["apiVersions"])
	return o
}

func stringsOf(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
