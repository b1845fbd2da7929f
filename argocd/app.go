package argocd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kubectl-gitops/kubectl-gitops/audit"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// App is the typed face of an Argo CD Application: the field paths of Argo
// CD's API are spelled here, and nowhere outside this package. It wraps the
// object exactly as the API server returned it, so that fields of newer Argo
// CD versions survive: writes still go through Client.Write, which patches
// only the fields they change.
type App struct {
	*unstructured.Unstructured
}

// AppOf is the face of obj, an Application as the API server returned it.
func AppOf(obj *unstructured.Unstructured) App { return App{obj} }

// AppRef names an Application: its namespace and name.
type AppRef struct {
	Namespace string
	Name      string
}

func (r AppRef) String() string { return r.Namespace + "/" + r.Name }

// Ref names a.
func (a App) Ref() AppRef { return AppRef{Namespace: a.GetNamespace(), Name: a.GetName()} }

// Record is a as audit records name it: namespace, name and project.
func (a App) Record() audit.AppRef {
	return audit.AppRef{Namespace: a.GetNamespace(), Name: a.GetName(), Project: a.Project()}
}

// Project is the Argo CD project a belongs to.
func (a App) Project() string { return a.str("spec", "project") }

// Destination is where an Application deploys: a cluster (by server URL,
// or by name when the server is not given) and a namespace.
type Destination struct {
	Server    string
	Name      string
	Namespace string
}

// Destination is where a deploys to.
func (a App) Destination() Destination {
	return Destination{
		Server:    a.str("spec", "destination", "server"),
		Name:      a.str("spec", "destination", "name"),
		Namespace: a.str("spec", "destination", "namespace"),
	}
}

// SyncStatus is Argo CD's sync status of a (Synced, OutOfSync, Unknown).
func (a App) SyncStatus() string { return a.str("status", "sync", "status") }

// Health is Argo CD's health status of a (Healthy, Progressing, …).
func (a App) Health() string { return a.str("status", "health", "status") }

// SyncPolicy is a deep copy of spec.syncPolicy as it is, nil when unset.
func (a App) SyncPolicy() any {
	policy, _, _ := unstructured.NestedFieldCopy(a.Object, "spec", "syncPolicy")
	return policy
}

// AutomatedOff is whether a's automated sync is set and turned off with
// enabled: false (Argo CD ≥ 3.1).
func (a App) AutomatedOff() bool {
	enabled, set, _ := unstructured.NestedBool(a.Object, "spec", "syncPolicy", "automated", "enabled")
	return set && !enabled
}

// SelfHeals is whether a's automated sync undoes live changes.
func (a App) SelfHeals() bool {
	selfHeal, _, _ := unstructured.NestedBool(a.Object, "spec", "syncPolicy", "automated", "selfHeal")
	return selfHeal
}

// SelfHealing is whether a's automated sync is on and undoes live changes.
func (a App) SelfHealing() bool { return a.SelfHeals() && a.SyncsAutomatically() }

// SyncOptions is spec.syncPolicy.syncOptions.
func (a App) SyncOptions() []string {
	options, _, _ := unstructured.NestedStringSlice(a.Object, "spec", "syncPolicy", "syncOptions")
	return options
}

// IgnoreDifferences is a deep copy of spec.ignoreDifferences, each entry
// as Argo CD reads it.
func (a App) IgnoreDifferences() []any {
	entries, _, _ := unstructured.NestedSlice(a.Object, "spec", "ignoreDifferences")
	return entries
}

// IgnoreDifferencesAsIs is spec.ignoreDifferences exactly as it is (not
// copied: read, never write), and whether it is set at all: a write that
// puts back what a session saved must tell unset from empty.
func (a App) IgnoreDifferencesAsIs() (any, bool) {
	v, set, _ := unstructured.NestedFieldNoCopy(a.Object, "spec", "ignoreDifferences")
	return v, set
}

// SyncOptionsAsIs is spec.syncPolicy.syncOptions exactly as it is (not
// copied: read, never write), and whether it is set at all.
func (a App) SyncOptionsAsIs() (any, bool) {
	v, set, _ := unstructured.NestedFieldNoCopy(a.Object, "spec", "syncPolicy", "syncOptions")
	return v, set
}

// Hydrated is whether a renders through Argo CD's source hydrator.
func (a App) Hydrated() bool {
	_, hydrated, _ := unstructured.NestedMap(a.Object, "spec", "sourceHydrator")
	return hydrated
}

func (a App) str(path ...string) string {
	s, _, _ := unstructured.NestedString(a.Object, path...)
	return s
}

// ErrAppNotFound is an Application the namespace asked does not hold.
var ErrAppNotFound = fmt.Errorf("application %w", ErrNotFound)

// ReadError is an Application the caller may not read. Who is the caller
// as the API server knows them, when the reader has asked; "" reads "you".
type ReadError struct {
	Who string
	App AppRef
	Err error
}

func (e *ReadError) Error() string {
	who := e.Who
	if who == "" {
		who = "you"
	}
	return fmt.Sprintf("%s: %s may not read application %s: %v", ErrForbidden, who, e.App, e.Err)
}

// Is makes a ReadError an ErrForbidden.
func (e *ReadError) Is(target error) bool { return target == ErrForbidden }

// Unwrap is the API server's refusal.
func (e *ReadError) Unwrap() error { return e.Err }

// NameReader says who was refused, once the caller knows.
func NameReader(err error, who string) error {
	var read *ReadError
	if errors.As(err, &read) {
		read.Who = who
	}
	return err
}

// App reads Application ref: an absent one is ErrAppNotFound, one the
// caller may not read an ErrForbidden (a *ReadError).
func (c *Client) App(ctx context.Context, ref AppRef) (App, error) {
	obj, err := c.Dynamic.Resource(ApplicationGVR).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return App{}, fmt.Errorf("%w: %q in namespace %s", ErrAppNotFound, ref.Name, ref.Namespace)
	case apierrors.IsForbidden(err):
		return App{}, &ReadError{App: ref, Err: err}
	case err != nil:
		return App{}, fmt.Errorf("reading application %s: %w", ref, err)
	}
	return App{obj}, nil
}

// Ref names Application name in the client's AppNamespace.
func (c *Client) Ref(name string) AppRef { return AppRef{Namespace: c.AppNamespace, Name: name} }

// AppQuery selects Applications: Application Name of Namespace, or those
// of Namespace ("" for all namespaces) that Selector (a label selector, ""
// for all) selects; of those, the ones that belong to Project ("" for any).
type AppQuery struct {
	Namespace string
	Name      string
	Selector  string
	Project   string
}

// Apps lists the Applications query selects, page by page (limit and
// continue): a thousand Applications never come in one response.
func (c *Client) Apps(ctx context.Context, query AppQuery) ([]App, error) {
	var all []App
	if query.Name != "" {
		app, err := c.App(ctx, AppRef{Namespace: query.Namespace, Name: query.Name})
		if err != nil {
			return nil, err
		}
		all = append(all, app)
	} else {
		var err error
		if all, err = c.listApplications(ctx, query.Namespace, query.Selector); err != nil {
			return nil, fmt.Errorf("listing applications: %w", err)
		}
	}
	out := make([]App, 0, len(all))
	for _, app := range all {
		if query.Project == "" || app.Project() == query.Project {
			out = append(out, app)
		}
	}
	return out, nil
}

// Fingerprint is what a says, as a digest: everything but what changes with
// every write (resourceVersion, managedFields, generation) and Argo CD's
// periodic reconcile stamps (status.reconciledAt, status.observedAt, and
// each condition's lastTransitionTime: Argo CD matches a condition to the
// old one by type alone, so an Application with two conditions of a type,
// such as two shared resources, has the second re-stamped on every
// reconcile), so that a reconcile that found nothing new is no change.
func (a App) Fingerprint() string {
	obj := a.DeepCopy().Object
	unstructured.RemoveNestedField(obj, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(obj, "metadata", "managedFields")
	unstructured.RemoveNestedField(obj, "metadata", "generation")
	unstructured.RemoveNestedField(obj, "status", "reconciledAt")
	unstructured.RemoveNestedField(obj, "status", "observedAt")
	if conditions, ok, _ := unstructured.NestedSlice(obj, "status", "conditions"); ok {
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok {
				delete(c, "lastTransitionTime")
			}
		}
		_ = unstructured.SetNestedSlice(obj, conditions, "status", "conditions")
	}
	b, _ := json.Marshal(obj)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
