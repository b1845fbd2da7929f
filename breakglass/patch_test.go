package breakglass

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

func TestPatchSpecBuild(t *testing.T) {
	three := int32(3)
	negative := int32(-1)
	tests := []struct {
		name     string
		spec     PatchSpec
		wantType string
		wantBody string
		wantErr  string
		input    Input
	}{
		{"image shortcut", PatchSpec{Images: map[string]string{"web": "r/web:2", "side": "r/side:1"}}, "strategic",
			`{"spec":{"template":{"spec":{"containers":[{"image":"r/side:1","name":"side"},{"image":"r/web:2","name":"web"}]}}}}`, "", ""},
		{"replicas shortcut", PatchSpec{Replicas: &three}, "strategic", `{"spec":{"replicas":3}}`, "", ""},
		{"yaml body", PatchSpec{Type: "merge", Body: "spec:\n  replicas: 4\n"}, "merge", `{"spec":{"replicas":4}}`, "", ""},
		{"json patch", PatchSpec{Type: "json", Body: `[{"op":"replace","path":"/spec/replicas","value":2}]`}, "json", `[{"op":"replace","path":"/spec/replicas","value":2}]`, "", ""},
		{"default type", PatchSpec{Body: `{"spec":{}}`}, "strategic", `{"spec":{}}`, "", ""},
		{"nothing", PatchSpec{}, "", "", "none given", InputChange},
		{"both ways", PatchSpec{Body: "{}", Replicas: &three}, "", "", "cannot be combined", InputChange},
		{"negative replicas", PatchSpec{Replicas: &negative}, "", "", "must be zero or more", InputReplicas},
		{"bad type", PatchSpec{Type: "apply", Body: "{}"}, "", "", `patch type "apply"`, InputPatchType},
		{"malformed", PatchSpec{Body: "{bad"}, "", "", "the patch is", ""},
		{"json patch object", PatchSpec{Type: "json", Body: `{"spec":{}}`}, "", "", "is an array of operations", InputPatch},
		{"array for merge", PatchSpec{Type: "merge", Body: `[1]`}, "", "", "set the patch type to json", InputPatch},
		{"scalar", PatchSpec{Body: `42`}, "", "", "must be a JSON object", InputPatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			typ, body, err := tt.spec.Build()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				// The engine names inputs, never flags: the plugin spells them.
				var input *InputError
				if strings.Contains(err.Error(), "--") || tt.input != "" && (!errors.As(err, &input) || input.Input != tt.input || !errors.Is(err, ErrPatchInvalid)) {
					t.Errorf("error %v: want an InputError for %q, naming no flag", err, tt.input)
				}
				return
			}
			if err != nil || typ != tt.wantType || string(body) != tt.wantBody {
				t.Errorf("got %s %s %v, want %s %s", typ, body, err, tt.wantType, tt.wantBody)
			}
		})
	}
}

func TestParseImages(t *testing.T) {
	if got, err := ParseImages([]string{"web=r/web:1", "side=r/s@sha256:ab"}); err != nil || got["side"] != "r/s@sha256:ab" {
		t.Errorf("ParseImages: %v %v", got, err)
	}
	for _, bad := range [][]string{{"web"}, {"=img"}, {"web="}, {"web=a", "web=b"}} {
		if _, err := ParseImages(bad); err == nil {
			t.Errorf("ParseImages(%q) accepted", bad)
		}
	}
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDiffNamesPathsByListItemName(t *testing.T) {
	before := decode(t, `{"metadata":{"resourceVersion":"1","annotations":{"a/b":"x"}},"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"side","image":"s:1"},{"name":"web","image":"w:1","env":[{"name":"MODE","value":"a"}]}]}}},"status":{"ready":1}}`)
	after := decode(t, `{"metadata":{"resourceVersion":"2","annotations":{"a/b":"y"}},"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"web","image":"w:2","env":[{"name":"MODE","value":"a"}]},{"name":"side","image":"s:1"}]}}},"status":{"ready":3}}`)
	got := Diff(before, after)
	want := []audit.Change{
		{Path: "/metadata/annotations/a~1b", Before: "x", After: "y"},
		{Path: "/spec/replicas", Before: 2.0, After: 3.0},
		{Path: "/spec/template/spec/containers/web/image", Before: "w:1", After: "w:2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Diff:\n got %+v\nwant %+v", got, want)
	}
	if len(Diff(before, before)) != 0 {
		t.Errorf("an object differs from itself")
	}
}

func TestLookupFollowsDiffPaths(t *testing.T) {
	obj := decode(t, `{"metadata":{"annotations":{"a/b":"x"}},"spec":{"ports":[80,443],"template":{"spec":{"containers":[{"name":"web","image":"w:2"}]}}}}`)
	for path, want := range map[string]any{
		"/spec/template/spec/containers/web/image": "w:2",
		"/metadata/annotations/a~1b":               "x",
		"/spec/ports/1":                            443.0,
	} {
		if got, ok := lookup(obj, path); !ok || got != want {
			t.Errorf("lookup %s = %v %v, want %v", path, got, ok, want)
		}
	}
	for _, path := range []string{"/spec/template/spec/containers/other/image", "/spec/ports/9", "/nope"} {
		if _, ok := lookup(obj, path); ok {
			t.Errorf("lookup %s found something", path)
		}
	}
}

func TestCompareFields(t *testing.T) {
	patch := SessionPatch{Fields: patchedFields(audit.Target{Kind: "Deployment", Group: "apps"},
		[]audit.Change{{Path: "/spec/template/spec/containers/web/image", Before: "w:1", After: "w:hotfix"}}, nil)}
	if f := patch.Fields[0]; f.Secret || f.After == "" || strings.Contains(f.After+f.Before, "hotfix") {
		t.Fatalf("the session field should keep digests only: %+v", f)
	}
	git := func(image string) map[string]any {
		return decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"`+image+`"}]}}}}`)
	}
	tests := []struct {
		name     string
		desired  map[string]any
		resource string
		want     GitState
	}{
		{"git has the fix, synced", git("w:hotfix"), "Synced", GitCaughtUp},
		{"git has the fix, not yet synced", git("w:hotfix"), "OutOfSync", GitWaiting},
		{"git still has the old value", git("w:1"), "OutOfSync", GitWaiting},
		{"git has something else", git("w:2"), "OutOfSync", GitDiverged},
		{"git dropped the resource", nil, "", GitDiverged},
	}
	for _, tt := range tests {
		if got, detail := compareFields(patch, tt.desired, tt.resource); got != tt.want {
			t.Errorf("%s: %s (%s), want %s", tt.name, got, detail, tt.want)
		}
	}
	secret := SessionPatch{Fields: patchedFields(audit.Target{Kind: "ConfigMap"}, []audit.Change{{Path: "/data/password", Before: "old", After: "x"}}, nil)}
	if f := secret.Fields[0]; !f.Secret || f.After != "" || f.Before != "" {
		t.Fatalf("a secret field kept a digest: %+v", f)
	}
	if got, _ := compareFields(secret, decode(t, `{"data":{"password":"x"}}`), "Synced"); got != GitWaiting {
		t.Errorf("a secret value counted as caught up: %s", got)
	}
	// With no digest, Argo CD's own comparison decides: a patch it flagged
	// is in Git once it reports the resource Synced again.
	saw := true
	secret.ArgoSawPatch = &saw
	for resource, want := range map[string]GitState{"Synced": GitCaughtUp, "OutOfSync": GitWaiting} {
		if got, _ := compareFields(secret, decode(t, `{"data":{"password":"y"}}`), resource); got != want {
			t.Errorf("an unrecorded value Argo CD saw patched, resource %s: %s, want %s", resource, got, want)
		}
	}
	// A readable name that only contains a secret-looking fragment is
	// compared like any other field (it used to be redacted, so it could
	// never catch up).
	proxy := SessionPatch{Fields: patchedFields(audit.Target{Kind: "Deployment", Group: "apps"},
		[]audit.Change{{Path: "/spec/template/spec/containers/oauth2-proxy/image", Before: "p:1", After: "p:2"}}, nil)}
	desired := decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"oauth2-proxy","image":"p:2"}]}}}}`)
	if got, detail := compareFields(proxy, desired, "Synced"); got != GitCaughtUp {
		t.Errorf("oauth2-proxy's image: %s (%s), want caught-up", got, detail)
	}
}

func TestPausedPolicyKeepsEverythingButAutomated(t *testing.T) {
	policy := decode(t, `{"automated":{"prune":true,"selfHeal":true},"syncOptions":["A=true"],"retry":{"limit":2}}`)
	got := pausedPolicy(policy, false).(map[string]any)
	if _, ok := got["automated"]; ok || !reflect.DeepEqual(got["retry"], policy["retry"]) || !reflect.DeepEqual(got["syncOptions"], policy["syncOptions"]) {
		t.Errorf("pausedPolicy = %v", got)
	}
	disabled := pausedPolicy(policy, true).(map[string]any)
	want := map[string]any{"prune": true, "selfHeal": true, "enabled": false}
	if !reflect.DeepEqual(disabled["automated"], want) || !reflect.DeepEqual(disabled["retry"], policy["retry"]) {
		t.Errorf("pausedPolicy with enabled = %v, want automated %v", disabled, want)
	}
	if _, ok := policy["automated"].(map[string]any)["enabled"]; ok {
		t.Errorf("pausedPolicy changed its input")
	}
	if _, ok := pausedPolicy(decode(t, `{"syncOptions":["A=true"]}`), true).(map[string]any)["automated"]; ok {
		t.Errorf("a manual policy gained automated")
	}
	if pausedPolicy(nil, true) != nil {
		t.Errorf("no policy should stay no policy")
	}
}

func TestAutomatedInSchema(t *testing.T) {
	doc := func(automated string) []byte {
		return []byte(`{"components":{"schemas":{"io.argoproj.v1alpha1.ApplicationList":{},"io.argoproj.v1alpha1.Application":{"properties":{"spec":{"properties":{"syncPolicy":{"properties":{"automated":` + automated + `}}}}}}}}}`)
	}
	for _, tt := range []struct {
		name             string
		doc              []byte
		found, withField bool
	}{
		{"Argo CD 2.x", doc(`{"properties":{"prune":{},"selfHeal":{},"allowEmpty":{}}}`), true, false},
		{"Argo CD 3.1", doc(`{"properties":{"enabled":{},"prune":{},"selfHeal":{}}}`), true, true},
		{"no syncPolicy schema", []byte(`{"components":{"schemas":{"io.argoproj.v1alpha1.Application":{"properties":{"spec":{}}}}}}`), false, false},
		{"not JSON", []byte(`<html>`), false, false},
	} {
		found, enabled := automatedInSchema(tt.doc)
		if found != tt.found || enabled != tt.withField {
			t.Errorf("%s: found %v enabled %v, want %v %v", tt.name, found, enabled, tt.found, tt.withField)
		}
	}
}

func TestMergePatchForReplacesExactly(t *testing.T) {
	current := decode(t, `{"syncOptions":["A=true"],"retry":{"limit":2,"backoff":{"duration":"5s"}},"added":"meanwhile"}`)
	saved := decode(t, `{"automated":{"prune":true},"syncOptions":["A=true"],"retry":{"limit":2}}`)
	patch := mergePatchFor(current, saved)
	want := decode(t, `{"automated":{"prune":true},"retry":{"backoff":null},"added":null}`)
	if !reflect.DeepEqual(patch, want) {
		t.Errorf("mergePatchFor = %v, want %v", patch, want)
	}
	if mergePatchFor(current, nil) != nil {
		t.Errorf("a nil policy must delete syncPolicy")
	}
}

func TestIgnoresSyncPolicy(t *testing.T) {
	set := func(spec string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": decode(t, spec)}}
	}
	tests := []struct {
		spec string
		want bool
	}{
		{`{}`, false},
		{`{"syncPolicy":{"applicationsSync":"create-only"}}`, true},
		{`{"syncPolicy":{"applicationsSync":"create-update"}}`, false},
		{`{"ignoreApplicationDifferences":[{"jsonPointers":["/spec/syncPolicy"]}]}`, true},
		{`{"ignoreApplicationDifferences":[{"jsonPointers":["/spec/source/targetRevision"]}]}`, false},
		{`{"ignoreApplicationDifferences":[{"name":"web","jqPathExpressions":[".spec.syncPolicy"]}]}`, true},
		{`{"ignoreApplicationDifferences":[{"name":"other","jsonPointers":["/spec/syncPolicy"]}]}`, false},
	}
	for _, tt := range tests {
		if got := ignoresSyncPolicy(set(tt.spec), "web"); got != tt.want {
			t.Errorf("ignoresSyncPolicy(%s) = %v, want %v", tt.spec, got, tt.want)
		}
	}
}

func TestParentTracking(t *testing.T) {
	app := func(labels, annotations map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
			"name": "child", "namespace": "argocd", "labels": labels, "annotations": annotations}}}
	}
	id := func(s string) map[string]any { return map[string]any{"argocd.argoproj.io/tracking-id": s} }
	for _, tc := range []struct {
		name     string
		tracking Tracking
		app      *unstructured.Unstructured
		ns, want string
	}{
		{"label (2.x default)", Tracking{}, app(map[string]any{"app.kubernetes.io/instance": "root"}, nil), "argocd", "root"},
		{"annotation wins over a stale label", Tracking{}, app(map[string]any{"app.kubernetes.io/instance": "stale"}, id("root:argoproj.io/Application:argocd/child")), "argocd", "root"},
		{"annotation method ignores labels", Tracking{Method: "annotation"}, app(map[string]any{"app.kubernetes.io/instance": "root"}, nil), "", ""},
		{"label method ignores the annotation", Tracking{Method: "label"}, app(nil, id("root:argoproj.io/Application:argocd/child")), "", ""},
		{"annotation+label", Tracking{Method: "annotation+label"}, app(map[string]any{"app.kubernetes.io/instance": "root"}, id("root:argoproj.io/Application:argocd/child")), "argocd", "root"},
		{"custom instance label key", Tracking{Method: "label", LabelKey: "team.example/app"}, app(map[string]any{"team.example/app": "root", "app.kubernetes.io/instance": "other"}, nil), "argocd", "root"},
		{"parent in another namespace", Tracking{Method: "annotation"}, app(nil, id("platform_root:argoproj.io/Application:argocd/child")), "platform", "root"},
		{"a tracking id copied from another object", Tracking{Method: "annotation"}, app(nil, id("root:argoproj.io/Application:argocd/other")), "", ""},
		{"another installation's resource", Tracking{InstallationID: "prod"}, app(nil, id("root:argoproj.io/Application:argocd/child")), "", ""},
		{"annotation+label reads only the tracking id", Tracking{Method: "annotation+label"}, app(map[string]any{"app.kubernetes.io/instance": "root"}, nil), "", ""},
		{"3.x default: a Helm instance label is no parent", Tracking{Method: "annotation"}, app(map[string]any{"app.kubernetes.io/instance": "my-release"}, nil), "", ""},
		{"label method has no installation id", Tracking{Method: "label", InstallationID: "prod"}, app(map[string]any{"app.kubernetes.io/instance": "root"}, nil), "argocd", "root"},
		{"a tracking id without an owner", Tracking{Method: "annotation"}, app(nil, id(":argoproj.io/Application:argocd/child")), "", ""},
		{"this installation's resource", Tracking{InstallationID: "prod"}, app(nil, map[string]any{"argocd.argoproj.io/tracking-id": "root:argoproj.io/Application:argocd/child", "argocd.argoproj.io/installation-id": "prod"}), "argocd", "root"},
	} {
		if ns, name := tc.tracking.ParentOf(tc.app, "argocd"); ns != tc.ns || name != tc.want {
			t.Errorf("%s: ParentOf = %q/%q, want %q/%q", tc.name, ns, name, tc.ns, tc.want)
		}
	}
	parent := func(spec string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": decode(t, spec)}}
	}
	tests := []struct {
		spec string
		want bool
	}{
		{`{}`, false},
		{`{"ignoreDifferences":[{"group":"argoproj.io","kind":"Application","jsonPointers":["/spec/syncPolicy"]}]}`, true},
		{`{"ignoreDifferences":[{"group":"argoproj.io","kind":"Application","name":"child","jqPathExpressions":[".spec.syncPolicy"]}]}`, true},
		{`{"ignoreDifferences":[{"group":"argoproj.io","kind":"Application","name":"other","jsonPointers":["/spec/syncPolicy"]}]}`, false},
		{`{"ignoreDifferences":[{"group":"apps","kind":"Deployment","jsonPointers":["/spec/syncPolicy"]}]}`, false},
	}
	for _, tt := range tests {
		if got := ignoresChildSyncPolicy(parent(tt.spec), "child"); got != tt.want {
			t.Errorf("ignoresChildSyncPolicy(%s) = %v, want %v", tt.spec, got, tt.want)
		}
	}
}

// TestPatchesOfOneTargetAreCheckedTogether: a second patch of the same
// target used to hide the first one's fields from the catch-up check, so a
// restore could revert the image once Git had the replicas.
func TestPatchesOfOneTargetAreCheckedTogether(t *testing.T) {
	yes, no := true, false
	s := &Session{Patches: []SessionPatch{
		{Target: deployment, ArgoSawPatch: &yes, Fields: []PatchedField{{Path: "/spec/template/spec/containers/web/image", After: digest("w:hotfix")}, {Path: "/spec/replicas", After: digest(3)}}},
		{Target: deployment, ArgoSawPatch: &no, Fields: []PatchedField{{Path: "/spec/replicas", After: digest(5)}}},
	}}
	got := latestPatches(s)
	if len(got) != 1 || len(got[0].Fields) != 2 || got[0].Fields[1].After != digest(5) || got[0].ArgoSawPatch == nil || *got[0].ArgoSawPatch {
		t.Fatalf("merged patches %+v: want the image kept, the replicas of the later patch, and not seen (one patch was not)", got)
	}
	if len(s.Patches[0].Fields) != 2 || s.Patches[0].Fields[1].After != digest(3) {
		t.Errorf("merging changed the session: %+v", s.Patches[0])
	}
	desired := decode(t, `{"spec":{"replicas":5,"template":{"spec":{"containers":[{"name":"web","image":"w:1"}]}}}}`)
	if state, _ := compareFields(got[0], desired, "OutOfSync"); state == GitCaughtUp {
		t.Errorf("Git without the image fix counted as caught up")
	}
}
