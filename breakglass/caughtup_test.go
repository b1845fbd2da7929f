package breakglass

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// TestCaughtUpAllWaitsForAllTogether: with no controller answering, status
// requests every refresh, waits once (one watch, within the bound) and says
// the state is as of the last reconcile, instead of waiting on each
// Application in turn.
func TestCaughtUpAllWaitsForAllTogether(t *testing.T) {
	client, apps := sessionApps(t, "a", "b", "c")
	e := &Engine{Dynamic: client, AppNamespace: "argocd", Audit: emptyLog(t)}
	statuses, err := e.CaughtUpAll(context.Background(), apps, nil, Refresh{Request: true, Wait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, a := range client.Actions() {
		counts[a.GetVerb()]++
		if p, ok := a.(k8stesting.PatchAction); ok && !strings.Contains(string(p.GetPatch()), RefreshAnnotation) {
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
	e := &Engine{Dynamic: client, AppNamespace: "argocd", ControllerWait: time.Hour, Audit: emptyLog(t)}
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
func sessionApps(t *testing.T, names ...string) (*dynamicfake.FakeDynamicClient, []*unstructured.Unstructured) {
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
		map[schema.GroupVersionResource]string{ApplicationGVR: "ApplicationList"}, objs...)
	apps, err := (&Engine{Dynamic: client}).ListApplications(context.Background(), "argocd", "")
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
	if first[RefreshAnnotation] != "normal" || first[RefreshTimestampAnnotation] == nil || first[RefreshTimestampAnnotation] == second[RefreshTimestampAnnotation] {
		t.Errorf("two refresh requests: %v and %v; want each with a timestamp of its own", first, second)
	}
	client, apps := sessionApps(t, "a")
	unstructured.SetNestedMap(apps[0].Object, map[string]any{"drySource": map[string]any{"repoURL": "x"}}, "spec", "sourceHydrator")
	e := &Engine{Dynamic: client, AppNamespace: "argocd", Audit: emptyLog(t)}
	if _, err := e.CaughtUpAll(context.Background(), apps, nil, Refresh{Request: true}); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			for _, key := range []string{RefreshTimestampAnnotation, HydrateTimestampAnnotation} {
				if !strings.Contains(string(p.GetPatch()), key) {
					t.Errorf("status's refresh %s has no %s", p.GetPatch(), key)
				}
			}
		}
	}
}

// TestNoOtherSyncGuardsThePatch: the last write before the patch refuses
// an Application on which a sync runs that the break-glass did not
// terminate (it would apply Git over the fix), and accepts the one it
// terminated while it winds down.
func TestNoOtherSyncGuardsThePatch(t *testing.T) {
	app := func(phase, started string) *unstructured.Unstructured {
		a := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "web"}}}
		if phase != "" {
			a.Object["operation"] = map[string]any{"sync": map[string]any{}}
			a.Object["status"] = map[string]any{"operationState": map[string]any{"phase": phase, "startedAt": started}}
		}
		return a
	}
	tests := []struct {
		name, phase, started, terminated string
		refused                          bool
	}{
		{"no sync", "", "", "", false},
		{"a sync started meanwhile", "Running", "2026-12-03T08:00:01Z", "", true},
		{"the terminated sync winding down", "Terminating", "2026-12-03T08:00:00Z", "2026-12-03T08:00:00Z", false},
		{"another sync after the terminated one", "Running", "2026-12-03T08:00:05Z", "2026-12-03T08:00:00Z", true},
	}
	for _, tt := range tests {
		err := noOtherSync("web", tt.terminated)(app(tt.phase, tt.started))
		if (err != nil) != tt.refused || (err != nil && !errors.Is(err, ErrConflict)) {
			t.Errorf("%s: %v, want refused=%v", tt.name, err, tt.refused)
		}
	}
}
