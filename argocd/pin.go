package argocd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// pinnedSpec are the members of an Application's spec a session is
// opened against: what renders its resources, where they go, under which
// project.
var pinnedSpec = []string{"source", "sources", "sourceHydrator", "destination", "project"}

// Pin is what app renders from and where, as a session pins it; clean
// takes credentials out of repository URLs (the record keeps them).
func (app App) Pin(clean func(string) string) audit.Pin {
	spec, _, _ := unstructured.NestedMap(app.Object, "spec")
	whole := map[string]any{}
	for _, k := range pinnedSpec {
		if v, ok := spec[k]; ok {
			whole[k] = v
		}
	}
	b, _ := json.Marshal(whole) // maps marshal with sorted keys: canonical
	sum := sha256.Sum256(b)
	pin := audit.Pin{Digest: "sha256:" + hex.EncodeToString(sum[:])}
	pin.Project, _, _ = unstructured.NestedString(app.Object, "spec", "project")
	dest, _, _ := unstructured.NestedStringMap(app.Object, "spec", "destination")
	pin.Destination = audit.PinnedCluster{Server: dest["server"], Name: dest["name"], Namespace: dest["namespace"]}
	named := func(m map[string]any) audit.PinnedSource {
		str := func(k string) string { s, _ := m[k].(string); return s }
		return audit.PinnedSource{RepoURL: clean(str("repoURL")), Path: str("path"), Chart: str("chart"), TargetRevision: str("targetRevision")}
	}
	if hydrator, ok, _ := unstructured.NestedMap(app.Object, "spec", "sourceHydrator"); ok {
		dry, _, _ := unstructured.NestedMap(hydrator, "drySource")
		s := named(dry)
		s.Hydrated, _, _ = unstructured.NestedString(hydrator, "syncSource", "targetBranch")
		pin.Sources = append(pin.Sources, s)
		return pin
	}
	if source, ok, _ := unstructured.NestedMap(app.Object, "spec", "source"); ok {
		pin.Sources = append(pin.Sources, named(source))
	}
	sources, _, _ := unstructured.NestedSlice(app.Object, "spec", "sources")
	for _, s := range sources {
		if m, ok := s.(map[string]any); ok {
			pin.Sources = append(pin.Sources, named(m))
		}
	}
	return pin
}

// PinChanges names how now has moved away from pinned, in words: nothing
// when it renders from the same sources to the same destination.
func PinChanges(pinned, now audit.Pin) []string {
	if now.Digest == pinned.Digest {
		return nil
	}
	var out []string
	changed := func(what, was, is string) {
		if was != is {
			out = append(out, fmt.Sprintf("%s changed from %q to %q", what, was, is))
		}
	}
	changed("spec.project", pinned.Project, now.Project)
	changed("spec.destination.server", pinned.Destination.Server, now.Destination.Server)
	changed("spec.destination.name", pinned.Destination.Name, now.Destination.Name)
	changed("spec.destination.namespace", pinned.Destination.Namespace, now.Destination.Namespace)
	if len(pinned.Sources) != len(now.Sources) {
		out = append(out, fmt.Sprintf("the sources changed from %d to %d", len(pinned.Sources), len(now.Sources)))
	} else {
		for i, was := range pinned.Sources {
			is, at := now.Sources[i], fmt.Sprintf("source %d ", i+1)
			if len(now.Sources) == 1 {
				at = "the source's "
			}
			changed(at+"repoURL", was.RepoURL, is.RepoURL)
			changed(at+"path", was.Path, is.Path)
			changed(at+"chart", was.Chart, is.Chart)
			changed(at+"targetRevision", was.TargetRevision, is.TargetRevision)
			changed(at+"hydrated branch", was.Hydrated, is.Hydrated)
		}
	}
	if len(out) == 0 {
		out = append(out, "the sources' options changed (Helm, Kustomize, plugin or directory settings)")
	}
	return out
}
