package argocd

import (
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

func TestAdviseChange(t *testing.T) {
	const path = "/spec/template/spec/containers/web/image"
	for _, tt := range []struct {
		name          string
		src           Source
		path          string
		before, after any
		want          GitChange
	}{
		{"kustomize image", Source{Type: "Kustomize"}, path, "registry.example/web:1.0.0", "registry.example/web:0.9.8",
			GitChange{Kind: ChangeKustomizeImage, Path: path, Value: "registry.example/web:0.9.8", Container: "web", Image: "registry.example/web:0.9.8", ImageName: "registry.example/web"}},
		{"unknown type is kustomize", Source{}, path, "registry.example:5000/web", "registry.example:5000/web:2",
			GitChange{Kind: ChangeKustomizeImage, Path: path, Value: "registry.example:5000/web:2", Container: "web", Image: "registry.example:5000/web:2", ImageName: "registry.example:5000/web"}},
		{"port in the registry", Source{}, path, "registry.example:5000/web:1.0", "x:2",
			GitChange{Kind: ChangeKustomizeImage, Path: path, Value: "x:2", Container: "web", Image: "x:2", ImageName: "registry.example:5000/web"}},
		{"digest", Source{}, "/spec/template/spec/initContainers/init/image", "web@sha256:abcd", "web:2",
			GitChange{Kind: ChangeKustomizeImage, Path: "/spec/template/spec/initContainers/init/image", Value: "web:2", Container: "init", Image: "web:2", ImageName: "web"}},
		{"helm image names the last value file", Source{Type: "Helm", ValueFiles: []Source{{Path: "a.yaml"}, {Path: "prod.yaml"}}}, path, "web:1", "web:2",
			GitChange{Kind: ChangeHelmImage, Path: path, Value: "web:2", Container: "web", Image: "web:2", ImageName: "web", ValueFile: "prod.yaml"}},
		{"directory image", Source{Type: "Directory"}, path, "web:1", "web:2",
			GitChange{Kind: ChangeManifestImage, Path: path, Value: "web:2", Container: "web", Image: "web:2", ImageName: "web"}},
		{"image field outside a container is a value", Source{}, "/spec/image", "web:1", "web:2",
			GitChange{Kind: ChangeValue, Path: "/spec/image", Value: "web:2"}},
		{"new image with none in Git is a value", Source{}, path, nil, "web:2",
			GitChange{Kind: ChangeValue, Path: path, Value: "web:2"}},
		{"secret", Source{}, "/data/password", audit.Redacted, audit.Redacted,
			GitChange{Kind: ChangeSecret, Path: "/data/password", Value: audit.Redacted}},
		{"free text described by its lines", Source{}, "/data/app.ini", audit.Redacted + " (3 lines)", audit.Redacted + " (3 lines; changed line 2)",
			GitChange{Kind: ChangeSecret, Path: "/data/app.ini", Value: audit.Redacted + " (3 lines; changed line 2)"}},
		{"replicas", Source{}, "/spec/replicas", int64(3), int64(5),
			GitChange{Kind: ChangeValue, Path: "/spec/replicas", Value: int64(5)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := AdviseChange(tt.src, tt.path, tt.before, tt.after); got != tt.want {
				t.Errorf("AdviseChange = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
