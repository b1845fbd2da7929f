package breakglass

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// PausedByAnnotation marks a parent Application paused on behalf of a
// child's session: CHILD/SESSION.
const PausedByAnnotation = audit.KeyPrefix + "paused-by"

// PausedParent is an app-of-apps parent paused with the session, with the
// policy restore writes back.
type PausedParent struct {
	Name string `json:"name"`
	// Namespace is the parent's, when it is not the child's (apps in any
	// namespace).
	Namespace       string          `json:"namespace,omitempty"`
	SavedSyncPolicy json.RawMessage `json:"savedSyncPolicy"`
}

// Argo CD's resource tracking (argocd-cm).
const (
	trackingIDAnnotation     = "argocd.argoproj.io/tracking-id"
	installationIDAnnotation = "argocd.argoproj.io/installation-id"
	defaultInstanceLabel     = "app.kubernetes.io/instance"
)

// Tracking is how Argo CD records which Application manages a resource, as
// argocd-cm configures it.
type Tracking struct {
	// Method is application.resourceTrackingMethod: annotation (3.x's
	// default), label (2.x's), annotation+label; "" tries both.
	Method string
	// LabelKey is application.instanceLabelKey.
	LabelKey string
	// InstallationID is installationID: resources of another installation
	// carry another one and are not this Argo CD's.
	InstallationID string
}

// tracking reads argocd-cm; an unreadable one means Argo CD's defaults.
// Without a method set, 3.x tracks by annotation: argo3 says the API
// server's schema is 3.1's or newer, and then labels (which Helm charts
// set for their own reasons) name no parent.
func (e *Engine) tracking(ctx context.Context, argo3 bool) Tracking {
	t := Tracking{LabelKey: defaultInstanceLabel}
	if cm, err := e.Kube.CoreV1().ConfigMaps(e.argoNamespace()).Get(ctx, "argocd-cm", metav1.GetOptions{}); err == nil {
		t.Method = cm.Data["application.resourceTrackingMethod"]
		if key := cm.Data["application.instanceLabelKey"]; key != "" {
			t.LabelKey = key
		}
		t.InstallationID = cm.Data["installationID"]
	}
	if t.Method == "" && argo3 {
		t.Method = "annotation"
	}
	return t
}

// ParentOf reads the Application that manages app through Argo CD's
// resource tracking, as Argo CD reads it (util/argo/resource_tracking.go):
// its namespace and name, "" when tracking names none. The label method
// reads only the instance label; annotation and annotation+label read only
// the tracking id, and only on resources of this installation. A tracking
// id that does not describe app itself (copied from another object) is
// ignored, as Argo CD ignores it. An unknown method ("": the version is not
// known) tries the tracking id, then the label.
func (t Tracking) ParentOf(app *unstructured.Unstructured, defaultNamespace string) (string, string) {
	if t.Method != "label" {
		if t.InstallationID != "" && app.GetAnnotations()[installationIDAnnotation] != t.InstallationID {
			return "", ""
		}
		owner, described, _ := strings.Cut(app.GetAnnotations()[trackingIDAnnotation], ":")
		if owner != "" && described == "argoproj.io/Application:"+app.GetNamespace()+"/"+app.GetName() {
			return splitAppName(owner, defaultNamespace)
		}
		if t.Method != "" {
			return "", ""
		}
	}
	key := t.LabelKey
	if key == "" {
		key = defaultInstanceLabel
	}
	if v := app.GetLabels()[key]; v != "" {
		return splitAppName(v, defaultNamespace)
	}
	return "", ""
}

// splitAppName reads Argo CD's qualified name: NAME, or NAMESPACE_NAME for
// an Application outside Argo CD's own namespace.
func splitAppName(s, defaultNamespace string) (string, string) {
	if ns, name, ok := strings.Cut(s, "_"); ok && ns != "" && name != "" {
		return ns, name
	}
	return defaultNamespace, s
}

// parentFromStatus finds, when the child carries no tracking at all, the
// Application whose managed resources list it.
func (e *Engine) parentFromStatus(ctx context.Context, child *unstructured.Unstructured) (string, string, error) {
	// A parent lives in Argo CD's namespace or beside the child.
	apps, err := e.ListApplications(ctx, e.argoNamespace(), "")
	if err != nil {
		return "", "", nil // a narrower role may not list everywhere: no fallback then
	}
	if child.GetNamespace() != e.argoNamespace() {
		if beside, err := e.ListApplications(ctx, child.GetNamespace(), ""); err == nil {
			apps = append(apps, beside...)
		}
	}
	target := audit.Target{Group: "argoproj.io", Kind: "Application", Namespace: child.GetNamespace(), Name: child.GetName()}
	for _, candidate := range apps {
		if candidate.GetName() == child.GetName() && candidate.GetNamespace() == child.GetNamespace() {
			continue
		}
		if _, managed := managedStatus(candidate, target); managed {
			return candidate.GetNamespace(), candidate.GetName(), nil
		}
	}
	return "", "", nil
}

// selfHealingParents walks up the app-of-apps chain and returns every parent
// that would undo the child's pause: it self-heals and does not ignore
// /spec/syncPolicy of the Applications it manages.
func (e *Engine) selfHealingParents(ctx context.Context, app *unstructured.Unstructured, argo3 bool) ([]*unstructured.Unstructured, error) {
	var parents []*unstructured.Unstructured
	tracking := e.tracking(ctx, argo3)
	seen := map[string]bool{app.GetNamespace() + "/" + app.GetName(): true}
	for child := app; len(parents) < 5; {
		namespace, name := tracking.ParentOf(child, e.argoNamespace())
		if name == "" && len(child.GetAnnotations()[trackingIDAnnotation]) == 0 && child.GetLabels()[tracking.LabelKey] == "" {
			var err error
			if namespace, name, err = e.parentFromStatus(ctx, child); err != nil {
				return nil, err
			}
		}
		if name == "" || seen[namespace+"/"+name] {
			return parents, nil
		}
		seen[namespace+"/"+name] = true
		parent, err := e.Dynamic.Resource(ApplicationGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return parents, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s, the parent Application of %s: %w", name, child.GetName(), err)
		}
		selfHeal, _, _ := unstructured.NestedBool(parent.Object, "spec", "syncPolicy", "automated", "selfHeal")
		if selfHeal && syncsAutomatically(parent) && !ignoresChildSyncPolicy(parent, child.GetName()) {
			parents = append(parents, parent)
		}
		child = parent
	}
	return parents, nil
}

// ignoresChildSyncPolicy is whether parent's ignoreDifferences covers
// /spec/syncPolicy of its child Application.
func ignoresChildSyncPolicy(parent *unstructured.Unstructured, child string) bool {
	rules, _, _ := unstructured.NestedSlice(parent.Object, "spec", "ignoreDifferences")
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		group, _ := rule["group"].(string)
		kind, _ := rule["kind"].(string)
		name, _ := rule["name"].(string)
		if group != "argoproj.io" || kind != "Application" || (name != "" && name != child) {
			continue
		}
		if coversSyncPolicy(rule) {
			return true
		}
	}
	return false
}

// savedParent is parent's policy as the session keeps it.
func savedParent(parent *unstructured.Unstructured) PausedParent {
	policy, _, _ := unstructured.NestedFieldCopy(parent.Object, "spec", "syncPolicy")
	saved, _ := json.Marshal(policy)
	return PausedParent{Name: parent.GetName(), Namespace: parent.GetNamespace(), SavedSyncPolicy: saved}
}

// namespaceOr is namespace, or fallback when it is "".
func namespaceOr(namespace, fallback string) string {
	if namespace == "" {
		return fallback
	}
	return namespace
}

// pauseParent pauses parent for session, keeping its policy.
func (e *Engine) pauseParent(ctx context.Context, parent *unstructured.Unstructured, child string, session *Session, disable bool) error {
	policy, _, _ := unstructured.NestedFieldCopy(parent.Object, "spec", "syncPolicy")
	name := parent.GetName()
	return e.updateAppIn(ctx, namespaceOr(parent.GetNamespace(), e.AppNamespace), name, func(app *unstructured.Unstructured) error {
		if by, ok := app.GetAnnotations()[PausedByAnnotation]; ok {
			return fmt.Errorf("%w: parent application %s is already paused for %s", ErrSessionOpen, name, by)
		}
		if current, _, _ := unstructured.NestedFieldNoCopy(app.Object, "spec", "syncPolicy"); !equalJSON(current, policy) {
			return fmt.Errorf("%w: the sync policy of parent %s changed meanwhile; run the command again", ErrConflict, name)
		}
		return nil
	}, func(app *unstructured.Unstructured) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"annotations": refreshRequest(map[string]any{PausedByAnnotation: child + "/" + session.ID}, false)},
			"spec":     map[string]any{"syncPolicy": policyPatch(app, pausedPolicy(policy, disable))},
		}
	})
}

// restoreParents writes back the saved policy of every parent paused for
// session, newest first.
func (e *Engine) restoreParents(ctx context.Context, child string, session *Session) error {
	for i := len(session.PausedParents) - 1; i >= 0; i-- {
		p := session.PausedParents[i]
		var saved any
		if err := json.Unmarshal(p.SavedSyncPolicy, &saved); err != nil {
			return fmt.Errorf("the saved policy of parent %s is unreadable: %w", p.Name, err)
		}
		err := e.updateAppIn(ctx, namespaceOr(p.Namespace, e.AppNamespace), p.Name, func(app *unstructured.Unstructured) error {
			switch by, marked := app.GetAnnotations()[PausedByAnnotation]; {
			case !marked:
				// Never paused (interrupted before) or already restored.
				return errNotPausedHere
			case by != child+"/"+session.ID:
				return fmt.Errorf("%w: parent %s is paused for another session (%q)", ErrConflict, p.Name, by)
			}
			return nil
		}, func(app *unstructured.Unstructured) map[string]any {
			return map[string]any{
				"metadata": map[string]any{"annotations": refreshRequest(map[string]any{PausedByAnnotation: nil}, false)},
				"spec":     map[string]any{"syncPolicy": policyPatch(app, saved)},
			}
		})
		if err != nil && !errors.Is(err, errNotPausedHere) {
			return fmt.Errorf("restoring parent %s: %w", p.Name, err)
		}
	}
	return nil
}

// errNotPausedHere is a parent the session lists but never paused (or
// already restored): there is nothing to put back.
var errNotPausedHere = errors.New("not paused by this session")

// OrphanedPauses describes the Applications among apps that carry this
// project's paused-by mark for a session that is no longer open: their sync
// stays off for nobody, exactly what a break-glass must never leave behind.
func OrphanedPauses(apps []*unstructured.Unstructured) []string {
	open := map[string]bool{}
	for _, a := range apps {
		if s, err := ParseSession(a.GetAnnotations()[SessionAnnotation]); err == nil {
			open[a.GetName()+"/"+s.ID] = true
		}
	}
	var out []string
	for _, a := range apps {
		by, marked := a.GetAnnotations()[PausedByAnnotation]
		if !marked || open[by] {
			continue
		}
		out = append(out, fmt.Sprintf("application %s/%s is marked paused for session %q, which is not open: its automated sync may stay off for nobody; find its saved policy with `kubectl gitops audit log --app %s --event breakglass.paused -o yaml`",
			a.GetNamespace(), a.GetName(), by, a.GetName()))
	}
	return out
}
