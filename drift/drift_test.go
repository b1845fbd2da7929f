package drift

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
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
	app := argocd.AppOf(&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"source": map[string]any{"repoURL": "r", "path": "apps/web"}}}})
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
	app := func(sourceType string) argocd.App {
		return argocd.AppOf(&unstructured.Unstructured{Object: map[string]any{
			"spec":   map[string]any{"source": map[string]any{"repoURL": "r", "path": "apps/web"}},
			"status": map[string]any{"sourceType": sourceType}}})
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

// countingClusters is a destination cluster reached through Clusters,
// counting how often it is resolved.
type countingClusters struct {
	cluster  *argocd.Cluster
	resolved atomic.Int32
}

func (c *countingClusters) Destination(string, string, string) (*argocd.Cluster, error) {
	c.resolved.Add(1)
	return c.cluster, nil
}

// TestFindReadsEachDestinationOnce: drift -A resolved the destination
// cluster, read its namespace's contract and read each live resource once
// per Application, a thousand of each over a thousand Applications in one
// namespace sharing a resource; a run now does each once, and every report
// still carries the contract.
func TestFindReadsEachDestinationOnce(t *testing.T) {
	const apps = 20
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo", Annotations: map[string]string{ContractPatches: PatchesForbidden}}}
	kube := kubefake.NewClientset(namespace)
	deployment := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{
		"namespace": "demo", "name": "web", "managedFields": []any{map[string]any{"manager": "kubectl-edit", "operation": "Update"}}}}}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), deployment)
	remote := &countingClusters{cluster: &argocd.Cluster{Kube: kube, Dynamic: dyn, Mapper: mapper}}
	var list []argocd.App
	for i := range apps {
		list = append(list, argocd.AppOf(&unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"namespace": "argocd", "name": fmt.Sprintf("app-%d", i)},
			"spec":     map[string]any{"project": "default", "destination": map[string]any{"server": "https://remote.example", "namespace": "demo"}},
			"status": map[string]any{"resources": []any{map[string]any{
				"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "demo", "name": "web", "status": "OutOfSync"}}},
		}}))
	}
	reports, err := Find(context.Background(), &argocd.Client{Clusters: remote}, list, Options{Managers: DefaultManagerClasses})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		if len(r.Fields) != 1 || r.Fields[0].Contract == "" {
			t.Fatalf("%s: %+v, want one field against the contract", r.App.Name, r.Fields)
		}
	}
	reads := 0
	for _, a := range kube.Actions() {
		if a.Matches("get", "namespaces") {
			reads++
		}
	}
	gets := 0
	for _, a := range dyn.Actions() {
		if a.Matches("get", "deployments") {
			gets++
		}
	}
	if n := remote.resolved.Load(); n != 1 || reads != 1 || gets != 1 {
		t.Errorf("%d Applications resolved their destination %d times, read its namespace %d times and the Deployment they share %d times, want once each", apps, n, reads, gets)
	}
}
