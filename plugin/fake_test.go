package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/openapi"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// fakeCluster is an API server and an Argo CD controller in memory, for
// running whole commands through the engine seam (newEngine): client-go's
// fakes hold an Application "web" (self-healing, Synced) and the
// Deployment it manages; a goroutine plays the controller, removing the
// refresh annotation as Argo CD does once it has reconciled.
type fakeCluster struct {
	t       *testing.T
	kube    *kubefake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	audit   *audit.FileStore
	tickets breakglass.Tickets

	mu sync.Mutex
	// git is what Git holds: its revision, the Deployment's replicas and
	// its container's image.
	gitRevision string
	gitReplicas int64
	gitImage    string
	// stalled stops the controller answering refresh requests, as a
	// controller too busy to reach them does; forged has someone remove
	// each request before the controller gets to it.
	stalled, forged bool
}

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	fakeRevision   = "1111111111111111111111111111111111111111"
)

func newFakeCluster(t *testing.T) *fakeCluster {
	t.Helper()
	t.Setenv("HOME", t.TempDir()) // no argocd CLI login
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, k := range []string{"ARGOCD_SERVER", "ARGOCD_AUTH_TOKEN", "JIRA_URL", "JIRA_PROJECT", "JIRA_USER", "JIRA_API_TOKEN", "JIRA_PAT"} {
		t.Setenv(k, "")
	}
	app := object(t, `{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": {"name": "web", "namespace": "argocd", "resourceVersion": "1"},
		"spec": {
			"project": "default",
			"source": {"repoURL": "https://git.example/apps.git", "path": "apps/web", "targetRevision": "HEAD"},
			"destination": {"server": "https://kubernetes.default.svc", "namespace": "demo"},
			"syncPolicy": {"automated": {"prune": true, "selfHeal": true}, "syncOptions": ["CreateNamespace=true"]}
		},
		"status": {
			"sourceType": "Kustomize",
			"sync": {"status": "Synced", "revision": "`+fakeRevision+`"},
			"resources": [{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "demo", "name": "web", "status": "Synced"}]
		}}`)
	deployment := object(t, `{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": {"name": "web", "namespace": "demo"},
		"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "web", "image": "registry.example/web:1.0.0"}]}}}}`)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		argocd.ApplicationGVR: "ApplicationList", argocd.ApplicationSetGVR: "ApplicationSetList", deploymentsGVR: "DeploymentList",
	}, app, deployment)

	// As installed: deploy/policy's guard of the pause, which lets the
	// patch go without waiting for Argo CD's controller.
	kube := kubefake.NewSimpleClientset(
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: breakglass.PauseGuardPolicy}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: breakglass.PauseGuardPolicy},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: breakglass.PauseGuardPolicy, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}},
	)
	kube.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: "oncall", Groups: []string{"oncall"}}}}, nil
	})
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
	})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)

	f := &fakeCluster{t: t, kube: kube, dyn: dyn, audit: &audit.FileStore{Path: filepath.Join(t.TempDir(), "audit.jsonl")}, gitRevision: fakeRevision, gitReplicas: 2, gitImage: "registry.example/web:1.0.0"}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.controller(ctx) }()
	useEngine(t, func(flags *engineFlags) (*breakglass.Engine, error) {
		return &breakglass.Engine{
			Client: argocd.Client{Kube: argoSchema{kube}, Dynamic: dryRunAware{dyn}, Mapper: mapper, AppNamespace: flags.AppNamespace, ControllerWait: 2 * time.Second},
			Audit:  f.audit, Tickets: f.tickets,
		}, nil
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return f
}

// testEngines are the engines tests build their commands' engines with,
// by test name (useEngine).
var testEngines sync.Map

// useEngine makes the commands test t (and its subtests) runs build their
// engine with build, over fake clients, until t ends.
func useEngine(t *testing.T, build func(*engineFlags) (*breakglass.Engine, error)) {
	testEngines.Store(t.Name(), build)
	t.Cleanup(func() { testEngines.Delete(t.Name()) })
}

// testFactory is the Factory of the commands test t runs: the engine of
// t's fake cluster (or its parent test's), else the kubeconfig's.
func testFactory(t *testing.T, streams genericiooptions.IOStreams) *Factory {
	factory := NewFactory(streams)
	for name := t.Name(); name != ""; {
		if build, ok := testEngines.Load(name); ok {
			factory.newEngine = build.(func(*engineFlags) (*breakglass.Engine, error))
			break
		}
		i := strings.LastIndex(name, "/")
		if i < 0 {
			break
		}
		name = name[:i]
	}
	return factory
}

// controller reconciles every Application that asks for a refresh, as
// Argo CD's controller does: it compares the live Deployment with Git,
// writes the sync status, and removes the refresh annotation.
func (f *fakeCluster) controller(ctx context.Context) {
	apps := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd")
	w, err := apps.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, open := <-w.ResultChan():
			if !open {
				return
			}
			app, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			f.mu.Lock()
			stalled, forged := f.stalled, f.forged
			f.mu.Unlock()
			_, pending := app.GetAnnotations()[argocd.RefreshAnnotation]
			switch {
			case pending && forged:
				_, _ = apps.Patch(ctx, app.GetName(), types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+argocd.RefreshAnnotation+`":null}}}`), metav1.PatchOptions{})
			case pending && !stalled:
				// The fake's watch cannot resume from a resourceVersion as the
				// API server's does: give the waiter time to start watching.
				time.Sleep(100 * time.Millisecond)
				_, _ = apps.Patch(ctx, app.GetName(), types.MergePatchType, f.reconciled(ctx), metav1.PatchOptions{})
			}
		}
	}
}

// reconciled is the patch a reconcile writes: the sync status of the live
// Deployment against Git, stamped reconciledAt, and no refresh annotation.
func (f *fakeCluster) reconciled(ctx context.Context) []byte {
	f.mu.Lock()
	revision, replicas, image := f.gitRevision, f.gitReplicas, f.gitImage
	f.mu.Unlock()
	status := "Synced"
	d, err := f.dyn.Resource(deploymentsGVR).Namespace("demo").Get(ctx, "web", metav1.GetOptions{})
	live, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil || live != replicas || len(containers) != 1 || containers[0].(map[string]any)["image"] != image {
		status = "OutOfSync"
	}
	body, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{argocd.RefreshAnnotation: nil}},
		"status": map[string]any{
			"reconciledAt": time.Now().UTC().Format(time.RFC3339),
			"sync":         map[string]any{"status": status, "revision": revision},
			"resources":    []any{map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "demo", "name": "web", "status": status}},
		},
	})
	return body
}

// app returns the Application as the fake API server holds it.
func (f *fakeCluster) app() *unstructured.Unstructured {
	f.t.Helper()
	app, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return app
}

// forgeRefreshes has each refresh request removed before the controller
// answers it, as an on-call user with patch rights can.
func (f *fakeCluster) forgeRefreshes() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forged = true
}

// stall stops the controller answering refresh requests.
func (f *fakeCluster) stall() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stalled = true
}

// commit plays a commit to Git: Argo CD sees it at its next reconcile.
func (f *fakeCluster) commit(revision string, replicas int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gitRevision, f.gitReplicas = revision, replicas
}

// argoSchema publishes, as an API server with Argo CD 3.x's CRDs does, the
// OpenAPI v3 schema of argoproj.io/v1alpha1 (the part the engine reads:
// spec.syncPolicy.automated.enabled exists), which the fake lacks.
type argoSchema struct{ *kubefake.Clientset }

func (k argoSchema) Discovery() discovery.DiscoveryInterfaces {
	return argoDiscovery{k.Clientset.Discovery()}
}

type argoDiscovery struct{ discovery.DiscoveryInterfaces }

func (argoDiscovery) OpenAPIV3() openapi.Client { return argoOpenAPI{} }

type argoOpenAPI struct{}

func (argoOpenAPI) Paths() (map[string]openapi.GroupVersion, error) {
	return map[string]openapi.GroupVersion{"apis/argoproj.io/v1alpha1": argoOpenAPI{}}, nil
}

func (argoOpenAPI) ServerRelativeURL() string { return "/openapi/v3/apis/argoproj.io/v1alpha1" }

func (argoOpenAPI) Schema(string) ([]byte, error) {
	return []byte(`{"components":{"schemas":{"io.argoproj.v1alpha1.Application":{"properties":{"spec":{"properties":{"syncPolicy":{"properties":{"automated":{"properties":{"enabled":{},"prune":{},"selfHeal":{}}}}}}}}}}}}`), nil
}

// dryRunAware gives the fake dynamic client what the API server does and
// the fake does not: server-side dry run (a dry-run patch returns the
// patched object and stores nothing) and strategic merge patches.
type dryRunAware struct{ dynamic.Interface }

// IsWatchListSemanticsUnSupported passes on the fake's answer: it cannot
// stream a list, so informers over it list and watch (client-go 1.35+
// streams by default and would wait for a bookmark the fake never sends).
func (d dryRunAware) IsWatchListSemanticsUnSupported() bool {
	unsupported, ok := d.Interface.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && unsupported.IsWatchListSemanticsUnSupported()
}

func (d dryRunAware) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return dryRunResource{NamespaceableResourceInterface: d.Interface.Resource(gvr), gvr: gvr}
}

type dryRunResource struct {
	dynamic.NamespaceableResourceInterface
	namespaced dynamic.ResourceInterface
	gvr        schema.GroupVersionResource
}

func (r dryRunResource) Namespace(ns string) dynamic.ResourceInterface {
	return dryRunResource{NamespaceableResourceInterface: r.NamespaceableResourceInterface, namespaced: r.NamespaceableResourceInterface.Namespace(ns), gvr: r.gvr}
}

func (r dryRunResource) client() dynamic.ResourceInterface {
	if r.namespaced != nil {
		return r.namespaced
	}
	return r.NamespaceableResourceInterface
}

func (r dryRunResource) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	return r.client().Get(ctx, name, opts, sub...)
}

func (r dryRunResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return r.client().List(ctx, opts)
}

func (r dryRunResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return r.client().Watch(ctx, opts)
}

func (r dryRunResource) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	return r.client().Create(ctx, obj, opts, sub...)
}

func (r dryRunResource) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error) {
	return r.client().Update(ctx, obj, opts, sub...)
}

func (r dryRunResource) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return r.client().UpdateStatus(ctx, obj, opts)
}

func (r dryRunResource) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	return r.client().Delete(ctx, name, opts, sub...)
}

func (r dryRunResource) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, list metav1.ListOptions) error {
	return r.client().DeleteCollection(ctx, opts, list)
}

func (r dryRunResource) Apply(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions, sub ...string) (*unstructured.Unstructured, error) {
	return r.client().Apply(ctx, name, obj, opts, sub...)
}

func (r dryRunResource) ApplyStatus(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	return r.client().ApplyStatus(ctx, name, obj, opts)
}

// strategicSchemas are the Go types whose field tags say how a strategic
// merge patch merges each list, as the API server knows them.
var strategicSchemas = map[schema.GroupVersionResource]any{deploymentsGVR: appsv1.Deployment{}}

// Patch applies merge, JSON and strategic merge patches (client-go's fake
// takes only the first two on unstructured objects), and dry-runs them.
func (r dryRunResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	if len(opts.DryRun) == 0 && pt != types.StrategicMergePatchType {
		return r.client().Patch(ctx, name, pt, data, opts, sub...)
	}
	live, err := r.client().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(live.Object)
	if err != nil {
		return nil, err
	}
	patched := doc
	switch pt {
	case types.MergePatchType:
		patched, err = jsonpatch.MergePatch(doc, data)
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(data); err == nil {
			patched, err = p.Apply(doc)
		}
	case types.StrategicMergePatchType:
		typed, ok := strategicSchemas[r.gvr]
		if !ok {
			r.fail("the fake API server has no schema to strategic-merge %s", r.gvr.Resource)
		}
		patched, err = strategicpatch.StrategicMergePatch(doc, data, typed)
	default:
		r.fail("the fake API server applies merge, JSON and strategic merge patches only, not %s", pt)
	}
	if err != nil {
		return nil, err
	}
	if len(opts.DryRun) > 0 {
		out := &unstructured.Unstructured{}
		return out, out.UnmarshalJSON(patched)
	}
	// Stored as the merge patch that has the same effect.
	merge, err := jsonpatch.CreateMergePatch(doc, patched)
	if err != nil {
		return nil, err
	}
	return r.client().Patch(ctx, name, types.MergePatchType, merge, opts, sub...)
}

func (r dryRunResource) fail(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// object reads an object as client-go decodes the API server's answers
// (whole numbers as int64), so that it compares with what the fake returns
// after a patch.
func object(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return obj
}
