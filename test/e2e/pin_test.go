//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// TestRepointedSourceHoldsRestoreBack (issue 31, item 3): during a session
// a colleague with Argo CD rights points the Application, through
// argocd-server (which writes as its own ServiceAccount), at a directory
// that holds the fix. Status names the change; a plain restore refuses
// and changes nothing, though Argo CD reports the repointed source in
// sync; the controller records one breakglass.retargeted notice with a
// Warning Event; restore --force ends the session, recorded as forced.
// Before the pin, restore answered "Git caught up" and self-heal reverted
// the fix once the source was pointed back.
func TestRepointedSourceHoldsRestoreBack(t *testing.T) {
	e := environment(t)
	ctx := context.Background()
	const name, fixed = "pin-path", "registry.example/web:hotfix"
	head := createApp(t, name, nil)
	waitSynced(t, name, head)
	oncall := argoUser(t)
	mustRun(t, oncall, 0, "breakglass", name, "deployment/web", "--image", "web="+fixed, "--reason", "bad release", "-y")
	session := sessionOf(t, name)
	side, err := e.Git.Commit("a side directory with the fix", env.AppFiles("apps/"+name+"-side", name, fixed))
	if err != nil {
		t.Fatal(err)
	}
	argoPatch(t, name, `{"spec":{"source":{"path":"apps/`+name+`-side"}}}`)
	want := `the source's path changed from "apps/` + name + `" to "apps/` + name + `-side"`

	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	waitFor(wait, t, "status to name the repointed source at "+side, func() (bool, string) {
		st := statusJSON(t, oncall, name)
		return len(st.Retargeted) == 1 && st.Retargeted[0] == want && !st.Ready, strings.Join(st.Retargeted, "; ")
	})
	if _, errOut := mustRun(t, oncall, 1, "restore", name, "-y"); !strings.Contains(errOut, breakglass.ErrRetargeted.Error()) || !strings.Contains(errOut, want) {
		t.Errorf("restore of a repointed Application: %s", errOut)
	}
	if s := sessionOf(t, name); s == nil || s.ID != session.ID {
		t.Fatalf("the refused restore changed the session: %+v", s)
	}

	before := countEvents(t, audit.EventRetargeted)
	startReplica(t, "pin-1")
	waitFor(wait, t, "the controller to record the repointed source", func() (bool, string) {
		n := countEvents(t, audit.EventRetargeted) - before
		return n >= 1, ""
	})
	time.Sleep(6 * time.Second) // three resyncs and refreshes of the replica
	var notices []*audit.Record
	for _, r := range sessionRecords(t, session.ID) {
		if r.Event == audit.EventRetargeted {
			notices = append(notices, r)
		}
	}
	if len(notices) != 1 || !strings.Contains(notices[0].Outcome.Error+notices[0].Reason, want) {
		t.Errorf("%d breakglass.retargeted records, want one naming %q: %+v", len(notices), want, notices)
	}
	events, err := kubeFor(t, env.Admin.Name).CoreV1().Events(e.ArgoNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	warned := 0
	for _, ev := range events.Items {
		if ev.Type == "Warning" && ev.Reason == breakglass.EventRetargeted {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("%d Warning Events %s, want one", warned, breakglass.EventRetargeted)
	}

	mustRun(t, oncall, 0, "restore", name, "--force", "--reason", "repointed on purpose", "-y")
	if v, open := sessionOfApp(t, name); open {
		t.Fatalf("restore --force left the session open: %s", v)
	}
	forced := false
	for _, r := range sessionRecords(t, session.ID) {
		forced = forced || r.Event == audit.EventForced && r.Outcome.Status == audit.StatusSucceeded
	}
	if !forced {
		t.Error("no succeeded breakglass.forced record for the forced restore")
	}
	app, err := appsClient(t).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if enabled, found, _ := unstructured.NestedBool(app.Object, "spec", "syncPolicy", "automated", "enabled"); found && !enabled {
		t.Errorf("automated sync is still off after the forced restore")
	}
}

// argoPatch merge-patches app's spec through argocd-server as a colleague
// with Argo CD's applications/update right would (the UI's edit posts
// the same); on-call's own Argo CD account is read-only, so this is
// Argo CD's admin.
func argoPatch(t *testing.T, app, patch string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": app, "patch": patch, "patchType": "merge"})
	if err := testEnv.ArgoAdmin(context.Background(), http.MethodPatch, "/api/v1/applications/"+app, body); err != nil {
		t.Fatal(err)
	}
}
