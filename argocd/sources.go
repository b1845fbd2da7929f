package argocd

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// An Application's manifests come from one source (spec.source), several
// (spec.sources: each rendered, or only read from with $ref), or Argo CD's
// source hydrator (spec.sourceHydrator: a dry source rendered and committed
// to a branch that Argo CD then syncs). A user fixes Git in the source that
// renders the resource (in a hydrator's dry source, never the generated
// branch), so tickets name that one, and catch-up follows its revisions.

// Git is where Git stood for app, as audit.Git documents it.
func (app App) Git() audit.Git {
	revision, _, _ := unstructured.NestedString(app.Object, "status", "sync", "revision")
	if _, hydrated, _ := unstructured.NestedMap(app.Object, "spec", "sourceHydrator"); hydrated {
		dry, _, _ := unstructured.NestedString(app.Object, "status", "sourceHydrator", "lastSuccessfulOperation", "drySHA")
		return audit.Git{Revision: dry, Hydrated: revision}
	}
	if sources, _, _ := unstructured.NestedSlice(app.Object, "spec", "sources"); len(sources) > 0 {
		revisions, _, _ := unstructured.NestedStringSlice(app.Object, "status", "sync", "revisions")
		g := audit.Git{Revisions: revisions}
		if len(revisions) > 0 {
			g.Revision = revisions[0]
		}
		return g
	}
	return audit.Git{Revision: revision}
}

// GitMoved is whether Git moved from then to now: for several sources,
// whether any source's revision did.
func GitMoved(then, now audit.Git) bool {
	if len(now.Revisions) > 0 {
		return !slices.Equal(then.Revisions, now.Revisions)
	}
	return now.Revision != "" && now.Revision != then.Revision
}

// DescribeGit says where Git stands in a few words: "revision R",
// "revisions R1,R2" (several sources) or "dry commit R (hydrated as H)".
func DescribeGit(g audit.Git) string {
	switch {
	case g.Hydrated != "":
		return "dry commit " + OrUnknown(short(g.Revision)) + " (hydrated as " + short(g.Hydrated) + ")"
	case len(g.Revisions) > 0:
		return "revisions " + ShortRevisions(g)
	}
	return "revision " + OrUnknown(short(g.Revision))
}

// ShortRevisions is g's revisions for a line of text: 12 characters each.
func ShortRevisions(g audit.Git) string {
	if len(g.Revisions) == 0 {
		return short(g.Revision)
	}
	out := make([]string, len(g.Revisions))
	for i, r := range g.Revisions {
		out[i] = short(r)
	}
	return strings.Join(out, ",")
}

func short(revision string) string {
	if len(revision) > 12 {
		return revision[:12]
	}
	return revision
}

// Source is where app's resources are changed in Git, for the ticket.
func (app App) Source() Source {
	if hydrator, ok, _ := unstructured.NestedMap(app.Object, "spec", "sourceHydrator"); ok {
		dry, _, _ := unstructured.NestedMap(hydrator, "drySource")
		src := sourceFrom(dry, sourceKind(dry))
		src.HydratedBranch, _, _ = unstructured.NestedString(hydrator, "syncSource", "targetBranch")
		if to, _, _ := unstructured.NestedString(hydrator, "hydrateTo", "targetBranch"); to != "" {
			src.HydratedBranch = to
		}
		src.HydratedPath, _, _ = unstructured.NestedString(hydrator, "syncSource", "path")
		return src
	}
	if single, ok, _ := unstructured.NestedMap(app.Object, "spec", "source"); ok {
		kind, _, _ := unstructured.NestedString(app.Object, "status", "sourceType")
		return sourceFrom(single, kind)
	}
	list, _, _ := unstructured.NestedSlice(app.Object, "spec", "sources")
	kinds, _, _ := unstructured.NestedStringSlice(app.Object, "status", "sourceTypes")
	refs := map[string]map[string]any{}
	var rendering []int
	for i, s := range list {
		m, _ := s.(map[string]any)
		if ref, _ := m["ref"].(string); ref != "" {
			refs[ref] = m
		}
		if renders(m) {
			rendering = append(rendering, i)
		}
	}
	if len(rendering) == 0 {
		return Source{}
	}
	var out Source
	for n, i := range rendering {
		m, _ := list[i].(map[string]any)
		kind := sourceKind(m)
		if i < len(kinds) && kinds[i] != "" {
			kind = kinds[i]
		}
		src := sourceFrom(m, kind)
		src.Position = i + 1
		files, _, _ := unstructured.NestedStringSlice(m, "helm", "valueFiles")
		for _, f := range files {
			name, path, ok := strings.Cut(strings.TrimPrefix(f, "$"), "/")
			if ref := refs[name]; strings.HasPrefix(f, "$") && ok && ref != nil {
				src.ValueFiles = append(src.ValueFiles, Source{RepoURL: str(ref, "repoURL"), Path: path, TargetRevision: str(ref, "targetRevision")})
			}
		}
		if n == 0 {
			out = src
		} else {
			out.Others = append(out.Others, src)
		}
	}
	return out
}

// renders is whether a source of spec.sources renders manifests: a source
// with only a ref is read from by the others and renders nothing.
func renders(m map[string]any) bool {
	return str(m, "path") != "" || str(m, "chart") != "" || str(m, "ref") == ""
}

// sourceKind is the kind a source's own settings name, "" when they name
// none (Argo CD then detects it).
func sourceKind(m map[string]any) string {
	switch {
	case str(m, "chart") != "" || m["helm"] != nil:
		return "Helm"
	case m["kustomize"] != nil:
		return "Kustomize"
	case m["plugin"] != nil:
		return "Plugin"
	case m["directory"] != nil:
		return "Directory"
	}
	return ""
}

func sourceFrom(m map[string]any, kind string) Source {
	return Source{RepoURL: str(m, "repoURL"), Path: str(m, "path"), Chart: str(m, "chart"), TargetRevision: str(m, "targetRevision"), Type: kind}
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// Source is where the Application's manifests come from in Git: for an
// Application using the source hydrator, its dry source.
type Source struct {
	RepoURL        string `json:"repoURL,omitempty"`
	Path           string `json:"path,omitempty"`
	Chart          string `json:"chart,omitempty"`
	TargetRevision string `json:"targetRevision,omitempty"`
	// Type is how Argo CD renders it: Kustomize, Helm, Directory, Plugin
	// ("" when unknown).
	Type string `json:"type,omitempty"`
	// Position is the source's place in spec.sources (1 for the first);
	// 0 for an Application with one source.
	Position int `json:"position,omitempty"`
	// ValueFiles are the Helm value files the source reads from another
	// source ($ref/...), each with that source's repository.
	ValueFiles []Source `json:"valueFiles,omitempty"`
	// Others are the other sources that render manifests, when several
	// do: the resource comes from one of them.
	Others []Source `json:"others,omitempty"`
	// HydratedBranch and HydratedPath are where the source hydrator
	// commits the rendered manifests: generated, never the place to fix.
	HydratedBranch string `json:"hydratedBranch,omitempty"`
	HydratedPath   string `json:"hydratedPath,omitempty"`
}

// OrUnknown is s, or "unknown" when it is "": for a value a line of text
// must name though it is not known.
func OrUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
