package proposal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestVerifyRefusesAnyOtherChange: the edited source must render the
// edits on their targets and everything else exactly as before.
func TestVerifyRefusesAnyOtherChange(t *testing.T) {
	before := []File{{"d.yaml", []byte(deployment)}}
	edit := []Edit{{Target: web, Path: "/spec/replicas", Value: 5}}
	for name, tc := range map[string]struct {
		after string
		err   string
	}{
		"only the edit":             {strings.Replace(deployment, "replicas: 2", "replicas: 5", 1), ""},
		"a comment changed too":     {strings.Replace(strings.Replace(deployment, "replicas: 2", "replicas: 5", 1), "# the web tier", "# ours", 1), ""},
		"another field changed":     {strings.Replace(strings.Replace(deployment, "replicas: 2", "replicas: 5", 1), "envoy:1", "envoy:2", 1), "d.yaml document 1 /spec/template/spec/containers/proxy/image"},
		"the edit not made":         {deployment, "d.yaml document 1 /spec/replicas"},
		"an object added":           {strings.Replace(deployment, "replicas: 2", "replicas: 5", 1) + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", "render 2 objects where there were 1"},
		"the file no longer parses": {"replicas: [", "no longer parses"},
	} {
		err := Verify(before, []File{{"d.yaml", []byte(tc.after)}}, "demo", edit)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.err != "" && (err == nil || !errors.Is(err, ErrCannotPropose) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.err)
		}
	}
}

// TestRefusedSources: what Argo CD renders from something other than
// the files of one Git source, or with overrides in the Application over
// them, is refused, saying what to do, never guessed at.
func TestRefusedSources(t *testing.T) {
	for name, spec := range map[string]map[string]any{
		"plain manifests":        {"source": map[string]any{"repoURL": "https://github.com/acme/deploy", "path": "apps/web"}},
		"a kustomize overlay":    {"source": map[string]any{"path": "overlay", "kustomize": map[string]any{"version": "v5.8.1"}}},
		"a Helm chart in Git":    {"source": map[string]any{"path": "chart", "helm": map[string]any{"valueFiles": []any{"values-prod.yaml"}, "parameters": []any{}}}},
		"a chart, no helm: spec": {"source": map[string]any{"path": "chart"}},
		"the hydrator's dry source": {"sourceHydrator": map[string]any{"drySource": map[string]any{"repoURL": "https://github.com/acme/deploy", "path": "apps/web", "targetRevision": "HEAD"},
			"syncSource": map[string]any{"targetBranch": "env/prod", "path": "web"}}},
	} {
		if why := Refusal(specSource(spec)); why != "" {
			t.Errorf("%s refused: %s", name, why)
		}
	}
	for name, tc := range map[string]struct {
		spec map[string]any
		want string
	}{
		"a chart of a Helm repo":      {map[string]any{"source": map[string]any{"chart": "web"}}, "from a Helm repository"},
		"kustomize overrides":         {map[string]any{"source": map[string]any{"path": "overlay", "kustomize": map[string]any{"images": []any{"web=web:2"}, "namePrefix": "x-"}}}, "sets images, namePrefix"},
		"a value file of another ref": {map[string]any{"source": map[string]any{"path": "chart", "helm": map[string]any{"valueFiles": []any{"$values/prod.yaml"}}}}, "not a file of the chart's repository"},
		"Helm fileParameters":         {map[string]any{"source": map[string]any{"path": "chart", "helm": map[string]any{"fileParameters": []any{}}}}, "fileParameters"},
		"a plugin":                    {map[string]any{"source": map[string]any{"path": "x", "plugin": map[string]any{}}}, "plugin"},
	} {
		if why := Refusal(specSource(tc.spec)); !strings.Contains(why, tc.want) {
			t.Errorf("%s: %q, want it to say %q", name, why, tc.want)
		}
	}
	// A directory source the Application says is one, though it holds a
	// kustomization: a contradiction, not guessed past.
	root := writeTree(t, map[string]string{"apps/web/kustomization.yaml": "{}\n"})
	if _, err := ReadDirectory(root, "apps/web", false); err == nil || !strings.Contains(err.Error(), "holds a kustomization") {
		t.Errorf("a directory with a kustomization: %v", err)
	}
}

// TestKindOf: the spec says how Argo CD renders a source; else what the
// path holds.
func TestKindOf(t *testing.T) {
	root := writeTree(t, map[string]string{"k/kustomization.yml": "{}\n", "c/Chart.yaml": "name: c\n", "d/a.yaml": "{}\n"})
	for _, tc := range []struct {
		source map[string]any
		want   string
	}{
		{map[string]any{"path": "k"}, KindKustomize},
		{map[string]any{"path": "c"}, KindHelm},
		{map[string]any{"path": "d"}, KindDirectory},
		{map[string]any{"path": "d", "helm": map[string]any{}}, KindHelm},
		{map[string]any{"path": "k", "directory": map[string]any{"recurse": true}}, KindDirectory},
	} {
		if got := KindOf(specSource(map[string]any{"source": tc.source}), root); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.source, got, tc.want)
		}
	}
}

// TestReadDirectoryReadsWhatArgoCDReads: manifests at the path, not
// other files, and subdirectories only with recurse.
func TestReadDirectoryReadsWhatArgoCDReads(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"apps/web/a.yaml", "apps/web/b.yml", "apps/web/c.json", "apps/web/README.md", "apps/web/sub/d.yaml", "apps/other/e.yaml"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for recurse, want := range map[bool]string{false: "apps/web/a.yaml apps/web/b.yml apps/web/c.json", true: "apps/web/a.yaml apps/web/b.yml apps/web/c.json apps/web/sub/d.yaml"} {
		files, err := ReadDirectory(root, "apps/web", recurse)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range files {
			got = append(got, f.Path)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("recurse %v: %v, want %s", recurse, got, want)
		}
	}
}

// specSource is the (first) source of an Application with spec, as argocd
// reads it.
func specSource(spec map[string]any) Source {
	specs := argocd.AppOf(&unstructured.Unstructured{Object: map[string]any{"spec": spec}}).SourceSpecs()
	if len(specs) == 0 {
		return Source{}
	}
	return specs[0]
}
