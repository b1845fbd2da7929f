package drift

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestClassOfManagers(t *testing.T) {
	table := append([]ManagerClass{{"my-deployer", Pipeline}}, DefaultManagerClasses...)
	for manager, want := range map[string]Class{
		"kubectl-gitops": BreakGlass, "kubectl-edit": Manual, "kubectl-client-side-apply": Manual, "kubectl": Manual,
		"helm": Pipeline, "argo-rollouts": Pipeline, "my-deployer-v2": Pipeline, "argocd-controller": ArgoCD,
		"kube-controller-manager": Controller, "vpa-updater": Controller, "before-first-apply": Defaulted,
	} {
		if got := ClassOf(table, manager); got != want {
			t.Errorf("ClassOf(%s) = %s, want %s", manager, got, want)
		}
	}
}

func TestDriftResponses(t *testing.T) {
	app := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"source": map[string]any{"repoURL": "r", "path": "apps/web"}}}}
	for _, tt := range []struct {
		f    Field
		want string
	}{
		{Field{Class: Manual, Path: "/spec/template/spec/containers/web/image", Git: "registry.example/web:1.0", Live: "registry.example/web:1.1", SelfHeal: true},
			"move it into Git: `kustomize edit set image registry.example/web=registry.example/web:1.1` in apps/web"},
		{Field{Class: Pipeline, Path: "/spec/replicas", Git: json.Number("2"), Live: json.Number("5")}, "does not self-heal"},
		{Field{Class: Controller, Path: "/spec/replicas", Manager: "kube-controller-manager", SelfHeal: true},
			`ignoreDifferences: [{group: "", kind: "", managedFieldsManagers: ["kube-controller-manager"]}]`},
		{Field{Class: Defaulted, Path: "/spec/template/spec/dnsPolicy", SelfHeal: true}, `jsonPointers: ["/spec/template/spec/dnsPolicy"]`},
	} {
		if got := response(tt.f, app, "kubectl gitops restore web"); !strings.Contains(got, tt.want) {
			t.Errorf("%s: %s\nwant it to contain %s", tt.f.Class, got, tt.want)
		}
	}
}

// TestDriftAdvisesAsTheTicketDoes: drift built its own "move it into Git"
// line, which offered kustomize to a Helm Application and cut an image
// digest at its colon; it now says what the ticket says (argocd.AdviseChange).
func TestDriftAdvisesAsTheTicketDoes(t *testing.T) {
	app := func(sourceType string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"spec":   map[string]any{"source": map[string]any{"repoURL": "r", "path": "apps/web"}},
			"status": map[string]any{"sourceType": sourceType}}}
	}
	image := "/spec/template/spec/containers/web/image"
	helm := response(Field{Class: Manual, Path: image, Git: "web:1.0", Live: "web:1.1", SelfHeal: true}, app("Helm"), "")
	if strings.Contains(helm, "kustomize") || !strings.Contains(helm, "the chart renders container web's image") {
		t.Errorf("a Helm Application: %s", helm)
	}
	digest := response(Field{Class: Manual, Path: image, Git: "registry.example/web@sha256:abcd", Live: "registry.example/web:1.1", SelfHeal: true}, app("Kustomize"), "")
	if !strings.Contains(digest, "`kustomize edit set image registry.example/web=registry.example/web:1.1`") {
		t.Errorf("an image pinned by digest: %s", digest)
	}
}
