package proposal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

const baseDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: registry.example/web:1.0.0
      - name: proxy
        image: envoy:1
`

const baseWorker = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: worker
spec:
  selector:
    matchLabels:
      app: worker
  template:
    metadata:
      labels:
        app: worker
    spec:
      containers:
      - name: worker
        image: envoy:1
`

// writeTree writes files (slash paths) under a new directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, data := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestEditKustomization: each kind of edit goes where kustomize edit would
// put it, the kustomization's comments, order and other lines kept, and
// the overlay then renders exactly the edits.
func TestEditKustomization(t *testing.T) {
	webProd := audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "prod-web"}
	for name, tc := range map[string]struct {
		kustomization string
		edits         []Edit
		want          string            // the kustomization after
		patches       map[string]string // the patch files added
		err           string
	}{
		"an image by its item's name, comments kept": {
			kustomization: "# prod overlay\nresources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\nimages:\n# the web tier's image\n- name: registry.example/web\n  newTag: 1.0.0 # bumped by CI\n",
			edits:         []Edit{{Target: webProd, Path: "/spec/template/spec/containers/web/image", Value: "registry.example/web:hotfix"}},
			want:          "# prod overlay\nresources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\nimages:\n# the web tier's image\n- name: registry.example/web\n  newTag: hotfix # bumped by CI\n",
		},
		"an image with no item yet, by digest": {
			kustomization: "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\n",
			edits:         []Edit{{Target: webProd, Path: "/spec/template/spec/containers/web/image", Value: "mirror.example/web@sha256:" + strings.Repeat("a", 64)}},
			want:          "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\nimages:\n  - name: registry.example/web\n    newName: mirror.example/web\n    digest: sha256:" + strings.Repeat("a", 64) + "\n",
		},
		"a tag replacing a digest": {
			kustomization: "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\nimages:\n- name: registry.example/web\n  digest: sha256:" + strings.Repeat("b", 64) + "\n- name: envoy\n  newTag: \"1\"\n",
			edits:         []Edit{{Target: webProd, Path: "/spec/template/spec/containers/web/image", Value: "registry.example/web:2.0.0"}},
			want:          "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\nimages:\n- name: registry.example/web\n  newTag: 2.0.0\n- name: envoy\n  newTag: \"1\"\n",
		},
		"replicas by the name the overlay's resources have": {
			kustomization: "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\nreplicas:\n- name: web\n  count: 2 # peak\n",
			edits:         []Edit{{Target: webProd, Path: "/spec/replicas", Value: int64(6)}},
			want:          "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\nreplicas:\n- name: web\n  count: 6 # peak\n",
		},
		"replicas added": {
			kustomization: "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\n",
			edits:         []Edit{{Target: webProd, Path: "/spec/replicas", Value: int64(3)}},
			want:          "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\nreplicas:\n  - name: web\n    count: 3\n",
		},
		"another field as a patch appended to patches": {
			kustomization: "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\npatches:\n  # ours\n  - path: keep.yaml\n    target:\n      kind: Deployment\n      name: web\n",
			edits: []Edit{
				{Target: webProd, Path: "/spec/template/spec/containers/web/resources/limits/memory", Value: "512Mi"},
				{Target: webProd, Path: "/spec/template/spec/containers/proxy/image", Value: "envoy:1"},
			},
			want: "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\npatches:\n  # ours\n  - path: keep.yaml\n    target:\n      kind: Deployment\n      name: web\n  - path: kubectl-gitops-s1-deployment-prod-web.yaml\n    target:\n      group: apps\n      kind: Deployment\n      name: web\n",
			patches: map[string]string{"overlay/kubectl-gitops-s1-deployment-prod-web.yaml": "# The live fix of a break-glass session on deployment.apps/prod-web, proposed by kubectl gitops.\n" +
				"- op: add\n  path: /spec/template/spec/containers/0/resources\n  value:\n    limits:\n      memory: 512Mi\n"},
			// The proxy's image is already envoy:1: images: says it again.
		},
		"an image another object shares: a patch instead": {
			kustomization: "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\n",
			edits:         []Edit{{Target: webProd, Path: "/spec/template/spec/containers/proxy/image", Value: "envoy:2"}},
			want:          "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\npatches:\n  - path: kubectl-gitops-s1-deployment-prod-web.yaml\n    target:\n      group: apps\n      kind: Deployment\n      name: web\n",
			patches: map[string]string{"overlay/kubectl-gitops-s1-deployment-prod-web.yaml": "# The live fix of a break-glass session on deployment.apps/prod-web, proposed by kubectl gitops.\n" +
				"- op: replace\n  path: /spec/template/spec/containers/1/image\n  value: envoy:2\n"},
		},
		"a list item the overlay does not render": {
			kustomization: "resources:\n- ../base\nnamePrefix: prod-\nnamespace: shop\n",
			edits:         []Edit{{Target: webProd, Path: "/spec/template/spec/containers/sidecar/image", Value: "x:1"}},
			err:           "names a list item the overlay does not render",
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := writeTree(t, map[string]string{
				"base/kustomization.yaml":    "resources:\n- deployment.yaml\n- worker.yaml\n",
				"base/deployment.yaml":       baseDeployment,
				"base/worker.yaml":           baseWorker,
				"overlay/kustomization.yaml": tc.kustomization,
				"overlay/keep.yaml":          "- op: add\n  path: /metadata/labels\n  value:\n    tier: web\n",
			})
			c, err := Make(context.Background(), root, KindKustomize, Source{Path: "overlay"}, App{Name: "web", Namespace: "shop"}, tc.edits, "s1")
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrCannotPropose) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for i, f := range c.Files {
				got[f.Path] = string(f.Data)
				if f.Path == "overlay/kustomization.yaml" && string(c.Old[i].Data) != tc.kustomization || f.Path != "overlay/kustomization.yaml" && c.Old[i].Data != nil {
					t.Errorf("%s: the file before is %q", f.Path, c.Old[i].Data)
				}
			}
			if got["overlay/kustomization.yaml"] != tc.want {
				t.Errorf("kustomization.yaml:\n%s\nwant:\n%s", got["overlay/kustomization.yaml"], tc.want)
			}
			delete(got, "overlay/kustomization.yaml")
			if len(got) != len(tc.patches) {
				t.Errorf("files %v, want the kustomization and %d patch(es)", got, len(tc.patches))
			}
			for p, want := range tc.patches {
				if got[p] != want {
					t.Errorf("%s:\n%s\nwant:\n%s", p, got[p], want)
				}
			}
			// What the edited overlay renders, from the files on a disk of
			// their own: the live values at the patched paths.
			for _, f := range c.Files {
				if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(f.Path)), f.Data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			after, err := renderKustomize(root, "overlay")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range tc.edits {
				if v, _ := audit.Lookup(renderedObject(after, e.Target, "shop"), e.Path); !Same(normalise(v), normalise(e.Value)) {
					t.Errorf("%s renders %v, want %v", e.Path, v, e.Value)
				}
			}
			if err := VerifyRendered(c.Before, after, "shop", tc.edits); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestKustomizeNeedsAKustomization: an Application that says kustomize
// for a path with no kustomization is refused, not read some other way.
func TestKustomizeNeedsAKustomization(t *testing.T) {
	root := writeTree(t, map[string]string{"overlay/deployment.yaml": baseDeployment})
	_, err := Make(context.Background(), root, KindKustomize, Source{Path: "overlay"}, App{Name: "web", Namespace: "shop"}, []Edit{{Target: web, Path: "/spec/replicas", Value: int64(5)}}, "s1")
	if !errors.Is(err, ErrCannotPropose) || !strings.Contains(err.Error(), "holds no kustomization.yaml") {
		t.Errorf("no kustomization: %v", err)
	}
}
