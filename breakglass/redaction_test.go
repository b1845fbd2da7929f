package breakglass

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

var deployment = audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}

func TestImagePatchRefusesUnknownContainers(t *testing.T) {
	live := decode(t, `{"spec":{"template":{"spec":{"initContainers":[{"name":"migrate","image":"m:1"}],"containers":[{"name":"web","image":"w:1"},{"name":"oauth2-proxy","image":"p:1"}]}}}}`)
	_, err := PatchSpec{Images: map[string]string{"wbe": "w:2"}}.imagePatch(deployment, live)
	if !errors.Is(err, ErrPatchInvalid) || !strings.Contains(err.Error(), "wbe") || !strings.Contains(err.Error(), "web, oauth2-proxy") || !strings.Contains(err.Error(), "migrate (init)") {
		t.Fatalf("unknown container: %v", err)
	}
	body, err := PatchSpec{Images: map[string]string{"web": "w:2", "migrate": "m:2"}}.imagePatch(deployment, live)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"spec":{"template":{"spec":{"containers":[{"image":"w:2","name":"web"}],"initContainers":[{"image":"m:2","name":"migrate"}]}}}}`
	if string(body) != want {
		t.Errorf("image patch = %s, want %s", body, want)
	}
	cron := decode(t, `{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"job","image":"j:1"}]}}}}}}`)
	if body, err := (PatchSpec{Images: map[string]string{"job": "j:2"}}).imagePatch(audit.Target{Group: "batch", Kind: "CronJob", Name: "c"}, cron); err != nil || !strings.Contains(string(body), "jobTemplate") {
		t.Errorf("cronjob image patch = %s, %v", body, err)
	}
	if _, err := (PatchSpec{Images: map[string]string{"x": "y"}}).imagePatch(audit.Target{Kind: "ConfigMap", Name: "c"}, decode(t, `{"data":{}}`)); !errors.Is(err, ErrPatchInvalid) {
		t.Errorf("--image on a ConfigMap: %v", err)
	}
}

func TestRedactPatchAgainstTheLiveObject(t *testing.T) {
	live := decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"DB_PASSWORD","value":"old-secret-1"}]}]}}}}`)
	body := []byte(`[{"op":"replace","path":"/spec/template/spec/containers/0/env/0/value","value":"canary-by-index"}]`)
	red, err := redactPatch(deployment, "json", body, live)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(red.body, "canary") {
		t.Errorf("redacted body kept the value: %s", red.body)
	}
	patched := decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"DB_PASSWORD","value":"canary-by-index"}]}]}}}}`)
	changes := red.changes(deployment, Diff(live, patched), live, patched)
	out, _ := json.Marshal(changes)
	if strings.Contains(string(out), "canary") || strings.Contains(string(out), "old-secret-1") {
		t.Errorf("changes kept a value: %s", out)
	}
	if got := red.redactor.Text(`Invalid value: "canary-by-index"`); strings.Contains(got, "canary") {
		t.Errorf("a server error echoing the value: %s", got)
	}
	fields := patchedFields(deployment, Diff(live, patched), live, patched)
	if len(fields) != 1 || !fields[0].Secret || fields[0].After != "" {
		t.Errorf("session fields of a secret change: %+v", fields)
	}
}

func TestCheckSizeRefusesWhatCannotBeStored(t *testing.T) {
	big := strings.Repeat("x", MaxRecordBytes)
	p := &Plan{Target: deployment, PatchType: "merge", PatchRedacted: `{"metadata":{"annotations":{"a":"` + big + `"}}}`,
		Changes: []audit.Change{{Path: "/metadata/annotations/a", After: big}},
		fields:  []PatchedField{{Path: "/metadata/annotations/a", After: digest(big)}}}
	if err := p.checkSize(); !errors.Is(err, ErrPatchInvalid) || !strings.Contains(err.Error(), "too large to record") {
		t.Errorf("an oversized record: %v", err)
	}
	var many []PatchedField
	for i := 0; i < 2000; i++ {
		many = append(many, PatchedField{Path: "/metadata/labels/l" + strings.Repeat("x", 20), After: digest(i)})
	}
	p = &Plan{Target: deployment, PatchRedacted: "{}", fields: many}
	if err := p.checkSize(); !errors.Is(err, ErrPatchInvalid) || !strings.Contains(err.Error(), "session annotation") {
		t.Errorf("a session too large: %v", err)
	}
	p = &Plan{Target: deployment, PatchRedacted: `{"spec":{"replicas":3}}`, fields: []PatchedField{{Path: "/spec/replicas", After: digest(3)}}}
	if err := p.checkSize(); err != nil {
		t.Errorf("a small patch: %v", err)
	}
}

// TestLegacySessionsKeepTheirChanges: a session written by v0.1 kept
// values, not digests; it must not read as having changed nothing (which
// would let restore revert the fix).
func TestLegacySessionsKeepTheirChanges(t *testing.T) {
	s, err := ParseSession(`{"id":"s","patches":[{"target":{"kind":"Deployment"},"changes":[` +
		`{"path":"/spec/replicas","before":2,"after":6},{"path":"/data/password","before":"[REDACTED]","after":"[REDACTED]"}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	f := s.Patches[0].Fields
	if len(f) != 2 || f[0].After != digest(6) || !f[1].Secret || s.Patches[0].LegacyChanges != nil {
		t.Fatalf("legacy changes became %+v", f)
	}
	if got, _ := compareFields(SessionPatch{}, decode(t, `{"spec":{}}`), "Synced"); got != GitWaiting {
		t.Errorf("a patch with no fields counted as %s", got)
	}
}

// TestArgsAfterASecretFlagInThePatchedObject: the flag may only exist
// after the patch, as when the patch sets all the args.
func TestArgsAfterASecretFlagInThePatchedObject(t *testing.T) {
	live := decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","args":["--v=2","--verbose"]}]}}}}`)
	patched := decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","args":["--v=2","--db-password","hunter2xyz"]}]}}}}`)
	red, err := redactPatch(deployment, "strategic", []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","args":["--v=2","--db-password","hunter2xyz"]}]}}}}`), live, patched)
	if err != nil {
		t.Fatal(err)
	}
	changes, _ := json.Marshal(red.changes(deployment, Diff(live, patched), live, patched))
	fields := patchedFields(deployment, Diff(live, patched), live, patched)
	if strings.Contains(string(changes), "hunter2xyz") || strings.Contains(red.body, "hunter2xyz") {
		t.Errorf("the argument leaked: %s %s", changes, red.body)
	}
	for _, f := range fields {
		if f.Path == "/spec/template/spec/containers/web/args/1" && !f.Secret {
			t.Errorf("a digest of the argument after --db-password: %+v", f)
		}
	}
	// A secret before the patch keeps no digest either.
	gone := patchedFields(deployment, Diff(patched, live), patched, live)
	for _, f := range gone {
		if f.Path == "/spec/template/spec/containers/web/args/2" && !f.Secret {
			t.Errorf("a digest of the removed argument: %+v", f)
		}
	}
}

func TestWithResourceVersion(t *testing.T) {
	for _, tc := range []struct{ typ, body, want string }{
		{"strategic", `{"spec":{"replicas":3}}`, `{"metadata":{"resourceVersion":"42"},"spec":{"replicas":3}}`},
		{"merge", `{"metadata":{"labels":{"a":"b"}}}`, `{"metadata":{"labels":{"a":"b"},"resourceVersion":"42"}}`},
		{"json", `[{"op":"replace","path":"/spec/replicas","value":3}]`, `[{"op":"replace","path":"/metadata/resourceVersion","value":"42"},{"op":"replace","path":"/spec/replicas","value":3}]`},
	} {
		got, err := withResourceVersion(tc.typ, []byte(tc.body), "42")
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.typ, got, err, tc.want)
		}
	}
}

func TestApplicationSetsThatUndoThePause(t *testing.T) {
	set := func(spec string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": decode(t, spec)}}
		u.SetName("web-set")
		u.SetNamespace("argocd")
		return u
	}
	both := `"ignoreApplicationDifferences":[{"jsonPointers":["/spec/syncPolicy"]}],"preservedFields":{"annotations":["kubectl-gitops.io/session"]}`
	for _, tc := range []struct {
		name, spec, want string
	}{
		{"rewrites everything", `{}`, ignoreSyncPolicySnippet + " and " + preserveSessionSnippet},
		{"ignores the policy, drops the session", `{"ignoreApplicationDifferences":[{"jsonPointers":["/spec/syncPolicy"]}]}`, "drop its session: add to its spec (kubectl edit applicationset web-set -n argocd): " + preserveSessionSnippet},
		{"keeps both", `{` + both + `}`, ""},
		{"ignores all annotations by jq", `{"ignoreApplicationDifferences":[{"jqPathExpressions":[".spec.syncPolicy",".metadata.annotations"]}]}`, ""},
		{"a rule for another app", `{"ignoreApplicationDifferences":[{"name":"other","jsonPointers":["/spec","/metadata"]}]}`, ignoreSyncPolicySnippet},
		{"create-only", `{"syncPolicy":{"applicationsSync":"create-only"}}`, ""},
		{"create-delete", `{"syncPolicy":{"applicationsSync":"create-delete"}}`, ""},
		{"create-update", `{"syncPolicy":{"applicationsSync":"create-update"}}`, ignoreSyncPolicySnippet},
		{"RollingSync, whatever it ignores", `{"strategy":{"type":"RollingSync"},` + both + `}`, "RollingSync strategy, which starts sync operations itself"},
	} {
		err := undoesPause(set(tc.spec), "web")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrOwnedByApplicationSet) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestArgoServerFromConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	config := `contexts:
- name: prod
  server: argocd.example.com
  user: prod-user
- name: local
  server: 127.0.0.1:8080
  user: local-user
current-context: prod
servers:
- server: argocd.example.com
  grpc-web: true
- server: 127.0.0.1:8080
  plain-text: true
  insecure: true
users:
- name: prod-user
  auth-token: tok-prod-9f8e7d
- name: local-user
  auth-token: tok-local-1a2b3c
`
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	s, ok, err := ArgoServerFromConfig(path, "")
	if err != nil || !ok || s.Addr != "argocd.example.com" || s.Token != "tok-prod-9f8e7d" || s.Plaintext || s.URL() != "https://argocd.example.com" {
		t.Errorf("current context: %+v %v %v", s, ok, err)
	}
	s, ok, err = ArgoServerFromConfig(path, "local")
	if err != nil || !ok || s.Token != "tok-local-1a2b3c" || !s.Plaintext || !s.Insecure || s.URL() != "http://127.0.0.1:8080" {
		t.Errorf("named context: %+v %v %v", s, ok, err)
	}
	_, _, err = ArgoServerFromConfig(path, "staging")
	if err == nil || !strings.Contains(err.Error(), `argocd context "staging": not a context`) || strings.Contains(err.Error(), "tok-") {
		t.Errorf("unknown context: %v", err)
	}
	if _, ok, err := ArgoServerFromConfig(filepath.Join(t.TempDir(), "none"), ""); ok || err != nil {
		t.Errorf("no configuration: %v %v", ok, err)
	}
}
