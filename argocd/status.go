package argocd

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RefreshAnnotation asks Argo CD's controller to reconcile an Application now;
// the controller removes it when done.
const RefreshAnnotation = "argocd.argoproj.io/refresh"

// HydrateAnnotation asks Argo CD's source hydrator to render the dry
// source's newest commit now; the controller removes it.
const HydrateAnnotation = "argocd.argoproj.io/hydrate"

// The timestamp annotations name one refresh (or hydrate) request, as
// Argo CD's own refresh sets them (util/argo.RefreshApp, Argo CD >= 3.6): a
// controller finishing a reconcile that began before the request then
// leaves the request in place instead of removing it, so "the refresh
// annotation is gone" means a reconcile that started after the request.
// Older controllers ignore them.
const (
	RefreshTimestampAnnotation = "argocd.argoproj.io/refresh-timestamp"
	HydrateTimestampAnnotation = "argocd.argoproj.io/hydrate-timestamp"
)

// RefreshRequest adds a normal refresh request to annotations, hydrate
// too when set, each with a timestamp of its own.
func RefreshRequest(annotations map[string]any, hydrate bool) map[string]any {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	annotations[RefreshAnnotation], annotations[RefreshTimestampAnnotation] = "normal", now
	if hydrate {
		annotations[HydrateAnnotation], annotations[HydrateTimestampAnnotation] = "normal", now
	}
	return annotations
}

// ManagedStatus finds target among the Application's managed resources and
// returns Argo CD's sync status for it.
func (app App) ManagedStatus(t audit.Target) (string, bool) {
	for _, r := range app.StatusResources() {
		if r.Target.SameObject(t) {
			return r.Status, true
		}
	}
	return "", false
}

// StatusResource is one of the managed resources an Application's
// status.resources lists, with Argo CD's sync status (and health, which
// Argo CD 3.x no longer stores there).
type StatusResource struct {
	Target         audit.Target
	Status, Health string
}

// StatusResources reads an Application's status.resources.
func (app App) StatusResources() []StatusResource {
	resources, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	out := make([]StatusResource, 0, len(resources))
	for _, r := range resources {
		m, _ := r.(map[string]any)
		if m == nil {
			continue
		}
		health, _, _ := unstructured.NestedString(m, "health", "status")
		out = append(out, StatusResource{
			Target: audit.Target{Group: str(m, "group"), Version: str(m, "version"), Kind: str(m, "kind"), Namespace: str(m, "namespace"), Name: str(m, "name")},
			Status: str(m, "status"), Health: health,
		})
	}
	return out
}

// ReconciledAt says when Argo CD last reconciled app (status.reconciledAt),
// "" when it never did.
func (app App) ReconciledAt() string {
	at, _, _ := unstructured.NestedString(app.Object, "status", "reconciledAt")
	if t, err := time.Parse(time.RFC3339, at); err == nil {
		return " (" + t.UTC().Format("15:04:05 UTC") + ")"
	}
	return ""
}

// SyncRunning reports whether app has a sync operation in progress, and
// since when.
func (app App) SyncRunning() (string, bool) {
	_, hasOp, _ := unstructured.NestedFieldNoCopy(app.Object, "operation")
	phase, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "phase")
	started, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "startedAt")
	return started, hasOp && (phase == "Running" || phase == "Terminating")
}

// SyncQueued is whether a sync operation is on app but not yet started:
// Argo CD's SetAppOperation sets operation and clears operationState, and
// an operation worker marks it Running later; the operation goes when it
// ends.
func (app App) SyncQueued() bool {
	_, hasOp, _ := unstructured.NestedFieldNoCopy(app.Object, "operation")
	_, running := app.SyncRunning()
	return hasOp && !running
}

// SyncsAutomatically is whether app's policy has automated sync on:
// automated is set and not enabled: false.
func (app App) SyncsAutomatically() bool {
	automated, ok, _ := unstructured.NestedMap(app.Object, "spec", "syncPolicy", "automated")
	if !ok {
		return false
	}
	enabled, set := automated["enabled"].(bool)
	return !set || enabled
}

// AutomatedSchema reads the Application schema the API server publishes
// (OpenAPI v3, readable by every authenticated user) and reports whether
// it has spec.syncPolicy.automated and, within it, enabled (Argo CD ≥ 3.1).
// The answer is kept in CacheDir under the name the API server gives the
// document: the next command reads a few bytes instead of the document,
// whose megabytes took a break-glass 15 ms to scan before its patch.
func (c *Client) AutomatedSchema() (found, enabled bool, err error) {
	paths, err := c.Kube.Discovery().OpenAPIV3().Paths()
	if err != nil {
		return false, false, fmt.Errorf("reading the API server's OpenAPI v3 paths: %w", err)
	}
	gv, ok := paths["apis/"+ApplicationGVR.Group+"/"+ApplicationGVR.Version]
	if !ok {
		return false, false, fmt.Errorf("the API server publishes no OpenAPI schema for %s/%s", ApplicationGVR.Group, ApplicationGVR.Version)
	}
	cache := c.schemaCache(gv.ServerRelativeURL())
	if a, ok := cache.load(); ok {
		return a.Found, a.Enabled, nil
	}
	doc, err := gv.Schema("application/json")
	if err != nil {
		return false, false, fmt.Errorf("reading the OpenAPI schema of %s: %w", ApplicationGVR.Group, err)
	}
	found, enabled = automatedInSchema(doc)
	cache.store(schemaAnswer{Found: found, Enabled: enabled})
	return found, enabled, nil
}

// automatedInSchema walks an OpenAPI v3 document to the Application's
// spec.syncPolicy.automated properties.
func automatedInSchema(doc []byte) (found, enabled bool) {
	type schema struct {
		Properties map[string]*schema `json:"properties"`
	}
	// Only the Application's schema is decoded: the document holds every
	// type of the group, and decoding them all took a break-glass tens of
	// milliseconds.
	var d struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return false, false
	}
	for name, raw := range d.Components.Schemas {
		if !strings.HasSuffix(name, ".argoproj.v1alpha1.Application") {
			continue
		}
		var s *schema
		if json.Unmarshal(raw, &s) != nil {
			return false, false
		}
		for _, p := range []string{"spec", "syncPolicy", "automated"} {
			if s == nil || s.Properties[p] == nil {
				return false, false
			}
			s = s.Properties[p]
		}
		_, enabled = s.Properties["enabled"]
		return true, enabled
	}
	return false, false
}

// Refreshed is whether the controller has reconciled the Application as
// last written: it removes the refresh annotation when it has.
func (app App) Refreshed() bool {
	_, pending := app.GetAnnotations()[RefreshAnnotation]
	return !pending
}

// RefreshSkew is how much older than a refresh request a reconcile may be
// stamped and still count as its answer: the API server's clock and Argo
// CD controller's differ a little. A state that old is as good as fresh.
const RefreshSkew = 5 * time.Second

// RefreshedSince is whether the controller has reconciled the Application
// since a refresh requested at since: the request is gone, and
// status.reconciledAt (which Argo CD stamps on a refresh, and which the
// break-glass group cannot write: deploy/policy) is not older. Anyone who
// may patch the Application can remove the request; that alone is not
// taken for a refresh. A zero since asks only that the request is gone.
func (app App) RefreshedSince(since time.Time) bool {
	if !app.Refreshed() {
		return false
	}
	if since.IsZero() {
		return true
	}
	stamp, _, _ := unstructured.NestedString(app.Object, "status", "reconciledAt")
	at, err := time.Parse(time.RFC3339, stamp)
	return err == nil && !at.Before(since.Add(-RefreshSkew))
}

// ManagerWroteSince is whether manager wrote obj at or after since, as
// obj's managedFields say (whole seconds, the API server's clock).
func ManagerWroteSince(obj *unstructured.Unstructured, manager string, since time.Time) bool {
	for _, f := range obj.GetManagedFields() {
		if f.Manager == manager && f.Time != nil && !f.Time.Time.Before(since.Truncate(time.Second)) {
			return true
		}
	}
	return false
}

// WrittenAt is when the API server took this tool's newest write of obj,
// as obj's managedFields say (whole seconds, the API server's clock); now
// when they do not say (an API server that keeps no managedFields).
func WrittenAt(obj *unstructured.Unstructured) time.Time {
	var at time.Time
	for _, f := range obj.GetManagedFields() {
		if f.Manager == FieldManager && f.Time != nil && f.Time.After(at) {
			at = f.Time.Time
		}
	}
	if at.IsZero() {
		return time.Now()
	}
	return at
}
