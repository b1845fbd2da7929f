package argocd

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AppSet is the typed face of an ApplicationSet: what decides whether it
// rewrites the Applications it generates. Its field paths are spelt here
// and nowhere else.
type AppSet struct{ *unstructured.Unstructured }

// AppSetOwners are the owner references of app that name an Argo CD
// ApplicationSet.
func AppSetOwners(app App) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, ref := range app.GetOwnerReferences() {
		if ref.Kind == "ApplicationSet" && strings.HasPrefix(ref.APIVersion, "argoproj.io/") {
			out = append(out, ref)
		}
	}
	return out
}

// AppSet reads ApplicationSet name of namespace; the API server's error as
// it is (NotFound included), for the caller to judge.
func (c *Client) AppSet(ctx context.Context, namespace, name string) (AppSet, error) {
	obj, err := c.Dynamic.Resource(ApplicationSetGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return AppSet{}, err
	}
	return AppSet{obj}, nil
}

// Strategy is spec.strategy.type: "RollingSync" starts syncs itself.
func (s AppSet) Strategy() string {
	v, _, _ := unstructured.NestedString(s.Object, "spec", "strategy", "type")
	return v
}

// NeverUpdates is whether the set's applicationsSync policy leaves
// existing Applications alone (create-only, create-delete).
func (s AppSet) NeverUpdates() bool {
	policy, _, _ := unstructured.NestedString(s.Object, "spec", "syncPolicy", "applicationsSync")
	return policy == "create-only" || policy == "create-delete"
}

// PreservedAnnotations are spec.preservedFields.annotations: the keys the
// set keeps on what it generates.
func (s AppSet) PreservedAnnotations() []string {
	keys, _, _ := unstructured.NestedStringSlice(s.Object, "spec", "preservedFields", "annotations")
	return keys
}

// IgnoreRules are the set's ignoreApplicationDifferences rules that apply
// to Application app: those naming it and those naming none.
func (s AppSet) IgnoreRules(app string) []map[string]any {
	rules, _, _ := unstructured.NestedSlice(s.Object, "spec", "ignoreApplicationDifferences")
	var out []map[string]any
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		if name, _ := rule["name"].(string); name != "" && name != app {
			continue
		}
		out = append(out, rule)
	}
	return out
}
