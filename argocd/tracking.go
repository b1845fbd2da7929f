package argocd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

// Tracking reads argocd-cm; an unreadable one means Argo CD's defaults.
// Without a method set, 3.x tracks by annotation: argo3 says whether the
// API server's schema is 3.1's or newer (asked only then, so that argocd-cm
// is read while the schema is), and then labels (which Helm charts set for
// their own reasons) name no parent.
func (c *Client) Tracking(ctx context.Context, argo3 func() bool) Tracking {
	t := Tracking{LabelKey: defaultInstanceLabel}
	if cm, err := c.Kube.CoreV1().ConfigMaps(c.ArgoNS()).Get(ctx, "argocd-cm", metav1.GetOptions{}); err == nil {
		t.Method = cm.Data["application.resourceTrackingMethod"]
		if key := cm.Data["application.instanceLabelKey"]; key != "" {
			t.LabelKey = key
		}
		t.InstallationID = cm.Data["installationID"]
	}
	if t.Method == "" && argo3() {
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
func (t Tracking) ParentOf(app App, defaultNamespace string) (string, string) {
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
func (c *Client) parentFromStatus(ctx context.Context, child App) (string, string) {
	// A parent lives in Argo CD's namespace or beside the child.
	apps, err := c.listApplications(ctx, c.ArgoNS(), "")
	if err != nil {
		return "", "" // a narrower role may not list everywhere: no fallback then
	}
	if child.GetNamespace() != c.ArgoNS() {
		if beside, err := c.listApplications(ctx, child.GetNamespace(), ""); err == nil {
			apps = append(apps, beside...)
		}
	}
	target := audit.Target{Group: "argoproj.io", Kind: "Application", Namespace: child.GetNamespace(), Name: child.GetName()}
	for _, candidate := range apps {
		if candidate.GetName() == child.GetName() && candidate.GetNamespace() == child.GetNamespace() {
			continue
		}
		if _, managed := candidate.ManagedStatus(target); managed {
			return candidate.GetNamespace(), candidate.GetName()
		}
	}
	return "", ""
}

// SelfHealingParents walks up the app-of-apps chain and returns every parent
// that would undo the child's pause: it self-heals and does not ignore
// /spec/syncPolicy of the Applications it manages (nor, for app's own
// parent when held, /spec/ignoreDifferences, where the hold lives).
// tracking is argocd-cm's, as Client.Tracking read it.
func (c *Client) SelfHealingParents(ctx context.Context, app App, tracking Tracking, held bool) ([]App, error) {
	var parents []App
	seen := map[string]bool{app.GetNamespace() + "/" + app.GetName(): true}
	for child := app; len(parents) < 5; {
		namespace, name := tracking.ParentOf(child, c.ArgoNS())
		if name == "" && len(child.GetAnnotations()[trackingIDAnnotation]) == 0 && child.GetLabels()[tracking.LabelKey] == "" {
			namespace, name = c.parentFromStatus(ctx, child)
		}
		if name == "" || seen[namespace+"/"+name] {
			return parents, nil
		}
		seen[namespace+"/"+name] = true
		parent, err := c.App(ctx, AppRef{Namespace: namespace, Name: name})
		if errors.Is(err, ErrNotFound) {
			return parents, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s, the parent Application of %s: %w", name, child.GetName(), err)
		}
		if parent.SelfHeals() && parent.SyncsAutomatically() && !ignoresChildSpec(parent, child.GetName(), held && child.Unstructured == app.Unstructured) {
			parents = append(parents, parent)
		}
		child = parent
	}
	return parents, nil
}

// ignoresChildSpec is whether parent's ignoreDifferences covers
// /spec/syncPolicy of its child Application and, when held (a session
// holding fields writes the child's ignoreDifferences too),
// /spec/ignoreDifferences.
func ignoresChildSpec(parent App, child string, held bool) bool {
	rules := parent.IgnoreDifferences()
	policy, ignores := false, !held
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		group, _ := rule["group"].(string)
		kind, _ := rule["kind"].(string)
		name, _ := rule["name"].(string)
		if group != "argoproj.io" || kind != "Application" || (name != "" && name != child) {
			continue
		}
		policy = policy || CoversSyncPolicy(rule)
		ignores = ignores || CoversIgnoreDifferences(rule)
	}
	return policy && ignores
}

// CoversIgnoreDifferences is whether an ignore rule's JSON pointers or jq
// paths include /spec/ignoreDifferences.
func CoversIgnoreDifferences(rule map[string]any) bool {
	return RulePath(rule, "/spec/ignoreDifferences", "/spec") || RuleJQ(rule, ".spec.ignoreDifferences", ".spec")
}

// RulePath is whether an ignore rule's JSON pointers include one of paths.
func RulePath(rule map[string]any, paths ...string) bool {
	return ruleLists(rule, "jsonPointers", paths)
}

// RuleJQ is whether an ignore rule's jq path expressions include one of exprs.
func RuleJQ(rule map[string]any, exprs ...string) bool {
	return ruleLists(rule, "jqPathExpressions", exprs)
}

// ruleLists is whether the ignore rule's list key holds one of want.
func ruleLists(rule map[string]any, key string, want []string) bool {
	list, _ := rule[key].([]any)
	for _, x := range list {
		if s, _ := x.(string); slices.Contains(want, s) {
			return true
		}
	}
	return false
}

// CoversSyncPolicy is whether an ignore rule's JSON pointers or jq paths
// include /spec/syncPolicy.
func CoversSyncPolicy(rule map[string]any) bool {
	return RulePath(rule, "/spec/syncPolicy", "/spec") || RuleJQ(rule, ".spec.syncPolicy", ".spec")
}
