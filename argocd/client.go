// Package argocd is what every command knows of Argo CD: reading
// Applications and writing them (one guarded merge patch), waiting for its
// controller, reading where Git stands and how sources render, finding
// destination clusters and app-of-apps parents, reading status, and asking
// its API server. It holds no state of kubectl gitops' own beyond the field
// manager it writes as, never prints, never reads flags, and never imports
// the packages built on it (drift, breakglass, plugin).
package argocd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// FieldManager names kubectl gitops in the managedFields of what it patches.
const FieldManager = "kubectl-gitops"

// ApplicationGVR is Argo CD's Application resource.
var ApplicationGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

// ApplicationSetGVR is Argo CD's ApplicationSet resource.
var ApplicationSetGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"}

// Client reaches the Argo CD cluster, where Applications (and the audit
// log) live; targets of other destination clusters are reached through
// Clusters.
type Client struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Metadata lists Applications without their specs and statuses
	// (AppsMarked); nil lists them whole.
	Metadata metadata.Interface
	Mapper   meta.RESTMapper
	// AppNamespace is where Applications live.
	AppNamespace string
	// ArgoNamespace is where Argo CD itself runs: argocd-cm (tracking,
	// installationID) is read there, and a tracking value naming an
	// Application without a namespace names one there, whatever
	// AppNamespace is. "" means AppNamespace.
	ArgoNamespace string
	// ControllerWait bounds waiting for Argo CD's controller; 0 means 30s.
	ControllerWait time.Duration
	// Clusters reaches destination clusters other than the Argo CD
	// cluster; nil refuses them.
	Clusters Clusters
	// CacheDir keeps answers that depend only on documents the API server
	// names by their content's hash (AutomatedSchema's); "" keeps none.
	CacheDir string
}

// ArgoNS is the namespace Argo CD runs in.
func (c *Client) ArgoNS() string {
	return NamespaceOr(c.ArgoNamespace, c.AppNamespace)
}

// ControllerTimeout bounds waiting for Argo CD's controller: ControllerWait, or 30s.
func (c *Client) ControllerTimeout() time.Duration {
	if c.ControllerWait == 0 {
		return 30 * time.Second
	}
	return c.ControllerWait
}

// NamespaceOr is namespace, or fallback when it is "".
func NamespaceOr(namespace, fallback string) string {
	if namespace == "" {
		return fallback
	}
	return namespace
}

// Whoami asks the API server who the caller is.
func (c *Client) Whoami(ctx context.Context) (audit.Actor, error) { return Whoami(ctx, c.Kube) }

// Whoami asks kube's API server who the caller is.
func Whoami(ctx context.Context, kube kubernetes.Interface) (audit.Actor, error) {
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return audit.Actor{}, fmt.Errorf("asking the API server who you are: %w", err)
	}
	u := review.Status.UserInfo
	return audit.Actor{Username: u.Username, UID: u.UID, Groups: u.Groups}, nil
}

// appPage is how many Applications one list request asks for: a thousand
// Applications come in pages, never in one response.
const appPage = 500

// listApplications lists the Applications of namespace ("" for all) that
// the label selector (may be "") selects, page by page (limit and
// continue): a thousand Applications never come in one response.
func (c *Client) listApplications(ctx context.Context, namespace, selector string) ([]App, error) {
	client := c.Dynamic.Resource(ApplicationGVR).Namespace(namespace)
	var out []App
	opts := metav1.ListOptions{LabelSelector: selector, Limit: appPage}
	for {
		list, err := client.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, App{&list.Items[i]})
		}
		if list.GetContinue() == "" {
			return out, nil
		}
		opts.Continue = list.GetContinue()
	}
}

// AppsMarked lists the Applications of namespace ("" for all) whose
// annotations carry any of keys, as metadata only: App values with no spec
// or status, which Whole reads. The specs and statuses of a thousand
// Applications never cross the wire to find the few a session marks.
func (c *Client) AppsMarked(ctx context.Context, namespace string, keys ...string) ([]App, error) {
	marked := func(a metav1.Object) bool {
		for _, k := range keys {
			if _, ok := a.GetAnnotations()[k]; ok {
				return true
			}
		}
		return false
	}
	var out []App
	if c.Metadata == nil {
		all, err := c.listApplications(ctx, namespace, "")
		if err != nil {
			return nil, fmt.Errorf("listing applications: %w", err)
		}
		for _, a := range all {
			if marked(a) {
				out = append(out, a)
			}
		}
		return out, nil
	}
	client := c.Metadata.Resource(ApplicationGVR).Namespace(namespace)
	opts := metav1.ListOptions{Limit: appPage}
	for {
		list, err := client.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing applications: %w", err)
		}
		for i := range list.Items {
			if item := &list.Items[i]; marked(item) {
				app := &unstructured.Unstructured{}
				app.SetAPIVersion(ApplicationGVR.GroupVersion().String())
				app.SetKind("Application")
				app.SetNamespace(item.Namespace)
				app.SetName(item.Name)
				app.SetUID(item.UID)
				app.SetResourceVersion(item.ResourceVersion)
				app.SetLabels(item.Labels)
				app.SetAnnotations(item.Annotations)
				out = append(out, App{app})
			}
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

// AnyApp is whether namespace ("" for all) holds an Application at all,
// asked for one: a listing that found nothing marked tells a namespace of
// Applications from a misspelt one.
func (c *Client) AnyApp(ctx context.Context, namespace string) (bool, error) {
	opts := metav1.ListOptions{Limit: 1}
	if c.Metadata != nil {
		list, err := c.Metadata.Resource(ApplicationGVR).Namespace(namespace).List(ctx, opts)
		if err != nil {
			return false, fmt.Errorf("listing applications: %w", err)
		}
		return len(list.Items) > 0, nil
	}
	list, err := c.Dynamic.Resource(ApplicationGVR).Namespace(namespace).List(ctx, opts)
	if err != nil {
		return false, fmt.Errorf("listing applications: %w", err)
	}
	return len(list.Items) > 0, nil
}

// Whole reads each of apps whole, several at once, in their order; one
// deleted since drops out.
func (c *Client) Whole(ctx context.Context, apps []App) ([]App, error) {
	whole := make([]App, len(apps))
	errs := make([]error, len(apps))
	Parallel(len(apps), func(i int) {
		whole[i], errs[i] = c.App(ctx, AppRef{Namespace: apps[i].GetNamespace(), Name: apps[i].GetName()})
	})
	out := make([]App, 0, len(apps))
	for i, err := range errs {
		switch {
		case errors.Is(err, ErrAppNotFound):
		case err != nil:
			return nil, err
		default:
			out = append(out, whole[i])
		}
	}
	return out, nil
}

// Known is an Application known only by namespace and name: a write
// starting from it reads the Application first.
func Known(ref AppRef) App {
	known := &unstructured.Unstructured{}
	known.SetNamespace(ref.Namespace)
	known.SetName(ref.Name)
	return App{known}
}

// A Write is one guarded change of an Application.
type Write struct {
	// Check accepts the Application as it is before each attempt (nobody
	// changed what this write guards); nil accepts any.
	Check func(App) error
	// Patch builds the merge patch from the Application as it is then.
	Patch func(App) map[string]any
}

// Write is the one way anything writes an Application: a merge patch of
// the fields that change, built from the Application as it is, with its
// resourceVersion as precondition, so that fields of newer Argo CD
// versions survive and a concurrent writer gets a conflict, not a lost
// update. known is the Application as the caller last read it: when it
// carries a resourceVersion the first attempt is built from it, saving a
// read. Argo CD's controller rewrites status all the time, so on a
// conflict the Application is read again and, if Check still accepts it,
// the patch is rebuilt and sent again. It returns the Application as
// written, which the next write can start from.
func (c *Client) Write(ctx context.Context, known App, w Write) (App, error) {
	name := known.GetName()
	apps := c.Dynamic.Resource(ApplicationGVR).Namespace(known.GetNamespace())
	for attempt := 0; attempt < 10; attempt++ {
		app := known
		if attempt > 0 || known.GetResourceVersion() == "" {
			obj, err := apps.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return App{}, err
			}
			app = App{obj}
		}
		if w.Check != nil {
			if err := w.Check(app); err != nil {
				return App{}, err
			}
		}
		patch := w.Patch(app)
		meta, _ := patch["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			patch["metadata"] = meta
		}
		meta["resourceVersion"] = app.GetResourceVersion()
		body, err := json.Marshal(patch)
		if err != nil {
			return App{}, err
		}
		written, err := apps.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
		if !apierrors.IsConflict(err) {
			return App{written}, err
		}
	}
	return App{}, fmt.Errorf("%w: application %s kept changing while this command ran; run it again", ErrConflict, name)
}
