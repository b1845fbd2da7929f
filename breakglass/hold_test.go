package breakglass

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

func TestJQPathSpellsSessionPaths(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{
		"replicas": 3,
		"template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"a.b/c": "x"}},
			"spec": map[string]any{
				"containers": []any{map[string]any{"name": "web", "image": "a", "args": []any{"-v", "-q"}}},
			}},
	}}
	for path, want := range map[string]string{
		"/spec/replicas": ".spec.replicas",
		"/spec/template/spec/containers/web/image":         `.spec.template.spec.containers[] | select(.name == "web") | .image`,
		"/spec/template/spec/containers/web/args/1":        `.spec.template.spec.containers[] | select(.name == "web") | .args[1]`,
		"/spec/template/metadata/annotations/a.b~1c":       `.spec.template.metadata.annotations["a.b/c"]`,
		"/spec/template/spec/containers/web/resources/cpu": `.spec.template.spec.containers[] | select(.name == "web") | .resources.cpu`,
		"/spec/new-field": `.spec["new-field"]`,
	} {
		if got := jqPath(path, obj); got != want {
			t.Errorf("jqPath(%s) = %s, want %s", path, got, want)
		}
	}
}

// The hold adds the session's entry and option; the close puts back the
// Application's own ignoreDifferences and sync options exactly.
func TestHoldIsReleasedExactly(t *testing.T) {
	target := audit.Target{Group: "apps", Kind: "Deployment", Namespace: "demo", Name: "web"}
	fields := []PatchedField{{Path: "/spec/replicas"}}
	for name, spec := range map[string]map[string]any{
		"none":  {"syncPolicy": map[string]any{"automated": map[string]any{"enabled": false}}},
		"own":   {"ignoreDifferences": []any{map[string]any{"kind": "ConfigMap", "jsonPointers": []any{"/data"}}}, "syncPolicy": map[string]any{"syncOptions": []any{"CreateNamespace=true"}}},
		"has":   {"syncPolicy": map[string]any{"syncOptions": []any{RespectIgnoreDifferences}}},
		"empty": {"ignoreDifferences": []any{}, "syncPolicy": map[string]any{"automated": map[string]any{"prune": true}}},
	} {
		t.Run(name, func(t *testing.T) {
			app := argocd.AppOf(&unstructured.Unstructured{Object: map[string]any{"spec": spec}})
			before := app.DeepCopy()
			policy, _, _ := unstructured.NestedFieldCopy(app.Object, "spec", "syncPolicy")
			savedPolicy, _ := json.Marshal(policy)
			s := &Session{Hold: HoldApp, SavedIgnoreDifferences: savedIgnore(app), SavedSyncPolicy: savedPolicy}
			held := holdPatch(app, target, fields, nil)
			if held == nil {
				t.Fatal("the hold changes nothing")
			}
			applyMerge(t, app, held)
			entries, _, _ := unstructured.NestedSlice(app.Object, "spec", "ignoreDifferences")
			if last := entries[len(entries)-1].(map[string]any); last["name"] != "web" || last["namespace"] != "demo" || last["group"] != "apps" {
				t.Fatalf("held entry %v", last)
			}
			if again := holdPatch(app, target, fields, nil); again != nil {
				t.Fatalf("holding twice changes %v", again)
			}
			if id, h := HeldEntries(withSession(app, s)); id != s.ID || len(h) != 1 {
				t.Fatalf("HeldEntries = %s %v, want the session's one entry", id, h)
			}
			release, err := releasePatch(app, s, false)
			if err != nil {
				t.Fatal(err)
			}
			applyMerge(t, app, release)
			if !equalJSON(app.Object, before.Object) {
				t.Fatalf("after the release %v, want %v", app.Object, before.Object)
			}
		})
	}
}

func withSession(app argocd.App, s *Session) argocd.App {
	s.ID = "20261205-000000-abcde"
	v, _ := json.Marshal(s)
	c := app.DeepCopy()
	c.SetAnnotations(map[string]string{SessionAnnotation: string(v)})
	return argocd.AppOf(c)
}

// applyMerge applies spec patch p to app as a JSON merge patch would.
func applyMerge(t *testing.T, app argocd.App, p map[string]any) {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(app.Object, "spec")
	app.Object["spec"] = mergeInto(spec, p)
}

func mergeInto(dst map[string]any, patch map[string]any) map[string]any {
	if dst == nil {
		dst = map[string]any{}
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(dst, k)
		case map[string]any:
			d, _ := dst[k].(map[string]any)
			dst[k] = mergeInto(d, pv)
		default:
			dst[k] = v
		}
	}
	return dst
}

// TestHeldEntriesAreWhatThePolicyLets: every entry the hold writes has the
// shape deploy/policy lets the break-glass group append (its heldEntry and
// heldPath patterns, the same RE2 that CEL's matches() runs), and the
// entries an attacker appended to blind Argo CD (a glob kind, an empty
// name, a whole spec, jq of another shape) do not.
func TestHeldEntriesAreWhatThePolicyLets(t *testing.T) {
	policy, err := os.ReadFile("../deploy/policy/applications.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pattern := func(name string) *regexp.Regexp {
		m := regexp.MustCompile(`(?m)- name: ` + name + `\n\s+expression: >-\n\s+r'(.*)'$`).FindSubmatch(policy)
		if m == nil {
			t.Fatalf("deploy/policy/applications.yaml has no variable %s", name)
		}
		return regexp.MustCompile(string(m[1]))
	}
	names, paths := pattern("heldEntry"), pattern("heldPath")
	obj := map[string]any{
		"spec": map[string]any{"replicas": 3, "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "a", "args": []any{"-v"}}},
			"volumes":    []any{map[string]any{"name": `quote"d`}},
		}}},
		"data": map[string]any{"config.yaml": "x", "a\\b": "y"},
	}
	target := audit.Target{Group: "apps", Kind: "Deployment", Namespace: "demo", Name: "web-1.v2"}
	entry := heldEntry(target, []PatchedField{
		{Path: "/spec/replicas"}, {Path: "/spec/template/spec/containers/web/image"}, {Path: "/spec/template/spec/containers/web"},
		{Path: "/spec/template/spec/containers/web/args/0"}, {Path: "/spec/template/spec/volumes/quote\"d/secret"},
		{Path: "/data/config.yaml"}, {Path: "/data/a\\b"}, {Path: "/metadata/annotations/example.com~1owner"}, {Path: "/spec/new-field"},
	}, obj)
	for _, k := range []string{"group", "name", "namespace"} {
		if !names.MatchString(entry[k].(string)) {
			t.Errorf("the policy refuses the hold's own %s %q", k, entry[k])
		}
	}
	for _, p := range entry["jqPathExpressions"].([]any) {
		if !paths.MatchString(p.(string)) {
			t.Errorf("the policy refuses the hold's own path %s", p)
		}
	}
	for _, bad := range []string{"*", "", "web-*", "web?", "[a-z]*", "{web,api}"} {
		if names.MatchString(bad) {
			t.Errorf("the policy lets the name or group %q through", bad)
		}
	}
	for _, bad := range []string{".", "..", ".spec | ..", ".spec[]", ".[]", ".spec | del(.replicas)", "(.spec)", ".spec // .", `.spec["a"] | .`, ".spec,.status", ""} {
		if paths.MatchString(bad) {
			t.Errorf("the policy lets the jq path %q through", bad)
		}
	}
}
