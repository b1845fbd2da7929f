package proposal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

// TestRefusedSources: what Argo CD renders another way than plain
// manifests is refused, saying what to do, never guessed at.
func TestRefusedSources(t *testing.T) {
	plain := map[string]any{"source": map[string]any{"repoURL": "https://github.com/acme/deploy", "path": "apps/web"}}
	if why := Refusal(plain); why != "" {
		t.Errorf("plain manifests refused: %s", why)
	}
	for name, spec := range map[string]map[string]any{
		"source hydrator":  {"sourceHydrator": map[string]any{}},
		"several sources":  {"sources": []any{}},
		"a Helm chart":     {"source": map[string]any{"chart": "web"}},
		"Helm values":      {"source": map[string]any{"path": "chart", "helm": map[string]any{}}},
		"kustomize":        {"source": map[string]any{"path": "overlay", "kustomize": map[string]any{}}},
		"a plugin":         {"source": map[string]any{"path": "x", "plugin": map[string]any{}}},
		"no source at all": {},
	} {
		if Refusal(spec) == "" {
			t.Errorf("%s: not refused", name)
		}
	}
	for marker, want := range map[string]string{"kustomization.yaml": "holds a kustomization", "Chart.yaml": "is a Helm chart"} {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "apps/web"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "apps/web", marker), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadDirectory(root, "apps/web", false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a directory with %s: %v", marker, err)
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
