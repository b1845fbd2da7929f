package breakglass

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// TestASessionBeingOpenedIsNotCaughtUp: between the pause and the patch a
// session has no patch yet. It used to count as caught up ("nothing live
// differs from Git"), so the controller auto-restored a session that was
// still being opened, and the break-glass then failed to mark its patch.
// Only a run that can no longer finish leaves a session whose restore
// just undoes the pause.
func TestASessionBeingOpenedIsNotCaughtUp(t *testing.T) {
	finished := exec.Command("true")
	if err := finished.Run(); err != nil {
		t.Skip("no true(1) to make an ended process:", err)
	}
	for name, tc := range map[string]struct {
		pid   int
		ready bool
		note  string
	}{
		"its run may still be patching": {os.Getpid(), false, "has not recorded its patch yet"},
		"its run's process has ended":   {finished.Process.Pid, true, "before any patch: restore undoes the pause"},
	} {
		t.Run(name, func(t *testing.T) {
			e, app := openingSession(t, tc.pid)
			st, err := e.CaughtUp(context.Background(), app, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			if st.Ready != tc.ready || !strings.Contains(strings.Join(st.Notes, "\n"), tc.note) {
				t.Errorf("ready %v, notes %q; want ready %v and a note %q", st.Ready, st.Notes, tc.ready, tc.note)
			}
		})
	}
}

// openingSession is an auto-restore session on argocd/web whose run by
// process pid has paused the Application and not yet patched.
func openingSession(t *testing.T, pid int) (*Engine, argocd.App) {
	t.Helper()
	web := audit.AppRef{Namespace: "argocd", Name: "web"}
	log := emptyLog(t)
	host, _ := os.Hostname()
	alice := audit.Actor{Username: "alice"}
	policy := map[string]any{"automated": map[string]any{"selfHeal": true}}
	now := time.Now().UTC()
	for _, r := range []*audit.Record{
		{Time: now, Event: audit.EventPlanned, Session: "s", Actor: alice, Client: audit.Client{Host: host, PID: pid}, Application: &web, Target: &deployment, AutoRestore: true,
			Patch: &audit.Patch{Type: "merge"}, Changes: []audit.Change{{Path: "/spec/replicas", Before: 1.0, After: 2.0}},
			SyncPolicy: &audit.SyncPolicy{Before: policy}, Git: &audit.Git{Revision: "abc"}, Outcome: audit.Outcome{Status: audit.StatusStarted}},
		{Time: now, Event: audit.EventPaused, Session: "s", Actor: alice, Client: audit.Client{Host: host, PID: pid}, Application: &web, Target: &deployment,
			SyncPolicy: &audit.SyncPolicy{Before: policy}, Git: &audit.Git{Revision: "abc"}, Outcome: audit.Outcome{Status: audit.StatusSucceeded}},
	} {
		if err := log.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	saved, _ := json.Marshal(policy)
	session, _ := json.Marshal(Session{ID: "s", State: StatePaused, OpenedBy: "alice", OpenedAt: now, GitRevision: "abc", SavedSyncPolicy: saved, AutoRestore: true})
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "web", "namespace": "argocd", "resourceVersion": "7", "annotations": map[string]any{SessionAnnotation: string(session)}},
		"spec":     map[string]any{"project": "default"},
	}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{argocd.ApplicationGVR: "ApplicationList"}, app.DeepCopy())
	return &Engine{Client: argocd.Client{Dynamic: client, AppNamespace: "argocd"}, Audit: log}, argocd.AppOf(app)
}
