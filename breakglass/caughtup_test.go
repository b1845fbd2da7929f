package breakglass

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/internal/jsontest"
)

// TestCaughtUpAllWaitsForAllTogether: with no controller answering, status
// requests every refresh, waits once (one watch, within the bound) and says
// the state is as of the last reconcile, instead of waiting on each
// Application in turn.
func TestCaughtUpAllWaitsForAllTogether(t *testing.T) {
	client, apps := sessionApps(t, "a", "b", "c")
	e := &Engine{Client: argocd.Client{Dynamic: client, AppNamespace: "argocd"}, Audit: emptyLog(t)}
	statuses, err := e.CaughtUpAll(context.Background(), apps, nil, Refresh{Request: true, Wait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, a := range client.Actions() {
		counts[a.GetVerb()]++
		if p, ok := a.(k8stesting.PatchAction); ok && !strings.Contains(string(p.GetPatch()), argocd.RefreshAnnotation) {
			t.Errorf("unexpected patch %s", p.GetPatch())
		}
	}
	if counts["patch"] != 3 || counts["get"] != 0 || counts["watch"] < 1 {
		t.Errorf("actions %v: want one refresh patch per Application (built from the listed object, no read) and a watch, no per-Application polling", counts)
	}
	for _, st := range statuses {
		if len(st.Notes) == 0 || !strings.Contains(st.Notes[0], "did not refresh in time") || !st.Stale {
			t.Errorf("%s: notes %v, stale %v", st.App.Name, st.Notes, st.Stale)
		}
	}
}

// TestCaughtUpAllWithoutWaiting: a listing requests every refresh and
// reports at once, as of the last reconcile, saying so: no watch, no wait.
func TestCaughtUpAllWithoutWaiting(t *testing.T) {
	client, apps := sessionApps(t, "a", "b")
	unstructured.SetNestedField(apps[0].Object, "2026-12-03T06:00:00Z", "status", "reconciledAt")
	e := &Engine{Client: argocd.Client{Dynamic: client, AppNamespace: "argocd", ControllerWait: time.Hour}, Audit: emptyLog(t)}
	statuses, err := e.CaughtUpAll(context.Background(), apps, nil, Refresh{Request: true})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, a := range client.Actions() {
		counts[a.GetVerb()]++
	}
	if counts["patch"] != 2 || counts["watch"] != 0 || counts["list"] != 0 {
		t.Errorf("actions %v: want the two refresh requests and nothing waiting", counts)
	}
	if n := statuses[0].Notes; len(n) == 0 || !strings.Contains(n[0], "last reconcile (06:00:00 UTC); a refresh was requested, not awaited") || !statuses[0].Stale {
		t.Errorf("notes %v, stale %v", n, statuses[0].Stale)
	}
}

// emptyLog is an audit log with no records in it.
func emptyLog(t *testing.T) audit.Store {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return &audit.FileStore{Path: path}
}

// sessionApps makes a fake cluster holding an Application with an open
// session for each name, and returns the Applications as listed.
func sessionApps(t *testing.T, names ...string) (*dynamicfake.FakeDynamicClient, []argocd.App) {
	t.Helper()
	var objs []runtime.Object
	for _, name := range names {
		session, _ := json.Marshal(Session{ID: "s-" + name, State: StatePatched, GitRevision: "r1"})
		app := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": name, "namespace": "argocd", "resourceVersion": "7", "annotations": map[string]any{SessionAnnotation: string(session)}},
			"spec":     map[string]any{"project": "default"},
		}}
		objs = append(objs, app)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{argocd.ApplicationGVR: "ApplicationList"}, objs...)
	apps, err := (&argocd.Client{Dynamic: client}).Apps(context.Background(), argocd.AppQuery{Namespace: "argocd"})
	if err != nil || len(apps) != len(names) {
		t.Fatalf("listing: %v, %d", err, len(apps))
	}
	client.ClearActions()
	return client, apps
}

// TestRefreshRequestsCarryTheirOwnTimestamp: every refresh request names
// itself with a timestamp, as Argo CD's own refresh does, so that Argo CD
// >= 3.6 does not clear it with the end of a reconcile that began before
// it (and status or a break-glass read a stale "Synced" as fresh).
func TestRefreshRequestsCarryTheirOwnTimestamp(t *testing.T) {
	annotations := func(patch map[string]any) map[string]any {
		return patch["metadata"].(map[string]any)["annotations"].(map[string]any)
	}
	first := annotations(sessionPatch(&Session{ID: "s"}, nil))
	time.Sleep(time.Millisecond)
	second := annotations(sessionPatch(&Session{ID: "s"}, nil))
	if first[argocd.RefreshAnnotation] != "normal" || first[argocd.RefreshTimestampAnnotation] == nil || first[argocd.RefreshTimestampAnnotation] == second[argocd.RefreshTimestampAnnotation] {
		t.Errorf("two refresh requests: %v and %v; want each with a timestamp of its own", first, second)
	}
	client, apps := sessionApps(t, "a")
	unstructured.SetNestedMap(apps[0].Object, map[string]any{"drySource": map[string]any{"repoURL": "x"}}, "spec", "sourceHydrator")
	e := &Engine{Client: argocd.Client{Dynamic: client, AppNamespace: "argocd"}, Audit: emptyLog(t)}
	if _, err := e.CaughtUpAll(context.Background(), apps, nil, Refresh{Request: true}); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			for _, key := range []string{argocd.RefreshTimestampAnnotation, argocd.HydrateTimestampAnnotation} {
				if !strings.Contains(string(p.GetPatch()), key) {
					t.Errorf("status's refresh %s has no %s", p.GetPatch(), key)
				}
			}
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
		return jsontest.Decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"`+image+`"}]}}}}`)
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
	if got, _ := compareFields(secret, jsontest.Decode(t, `{"data":{"password":"x"}}`), "Synced"); got != GitWaiting {
		t.Errorf("a secret value counted as caught up: %s", got)
	}
	// With no digest, Argo CD's own comparison decides: a patch it flagged
	// is in Git once it reports the resource Synced again.
	saw := true
	secret.ArgoSawPatch = &saw
	for resource, want := range map[string]GitState{"Synced": GitCaughtUp, "OutOfSync": GitWaiting} {
		if got, _ := compareFields(secret, jsontest.Decode(t, `{"data":{"password":"y"}}`), resource); got != want {
			t.Errorf("an unrecorded value Argo CD saw patched, resource %s: %s, want %s", resource, got, want)
		}
	}
	// A readable name that only contains a secret-looking fragment is
	// compared like any other field (it used to be redacted, so it could
	// never catch up).
	proxy := SessionPatch{Fields: patchedFields(audit.Target{Kind: "Deployment", Group: "apps"},
		[]audit.Change{{Path: "/spec/template/spec/containers/oauth2-proxy/image", Before: "p:1", After: "p:2"}}, nil)}
	desired := jsontest.Decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"oauth2-proxy","image":"p:2"}]}}}}`)
	if got, detail := compareFields(proxy, desired, "Synced"); got != GitCaughtUp {
		t.Errorf("oauth2-proxy's image: %s (%s), want caught-up", got, detail)
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
	desired := jsontest.Decode(t, `{"spec":{"replicas":5,"template":{"spec":{"containers":[{"name":"web","image":"w:1"}]}}}}`)
	if state, _ := compareFields(got[0], desired, "OutOfSync"); state == GitCaughtUp {
		t.Errorf("Git without the image fix counted as caught up")
	}
}

// TestCaughtUpAllReadsTheLogOnce: many sessions' records are read in one
// listing for the sessions and one for their Applications, not two
// listings a session (status -A with fifty sessions sent a hundred).
func TestCaughtUpAllReadsTheLogOnce(t *testing.T) {
	client, apps := sessionApps(t, "a", "b", "c", "d")
	kube := kubefake.NewSimpleClientset()
	e := &Engine{Client: argocd.Client{Dynamic: client, AppNamespace: "argocd"}, Audit: audit.NewConfigMapStore(kube, "argocd")}
	statuses, err := e.CaughtUpAll(context.Background(), apps, nil, Refresh{})
	if err != nil || len(statuses) != len(apps) {
		t.Fatalf("%v, %d statuses", err, len(statuses))
	}
	lists := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "configmaps" {
			lists++
		}
	}
	if lists != 2 {
		t.Errorf("%d listings of the audit log for %d sessions; want 2", lists, len(apps))
	}
	for _, st := range statuses {
		if st.trusted || st.Untrusted == "" {
			t.Errorf("%s: trusted %v, untrusted %q; a session the log does not hold is not trusted", st.App.Name, st.trusted, st.Untrusted)
		}
	}
}
