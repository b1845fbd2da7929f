//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

func TestStatusAndRestoreFollowGit(t *testing.T) {
	core(t)
	e := environment(t)
	created := deployApp(t, "bg-loop")
	ctx := context.Background()
	oncall := argoUser(t)
	if _, errOut := mustRun(t, oncall, 0, "breakglass", "bg-loop", "deployment/web", "--image", "web=registry.example/web:hotfix", "--reason", "bad release", "-y"); strings.Contains(errOut, "the fix is live") {
		t.Errorf("progress reached a stderr that is not a terminal: %s", errOut)
	}

	st := statusJSON(t, oncall, "bg-loop")
	if st.Git != breakglass.GitWaiting || st.Ready || !st.FieldLevel {
		t.Fatalf("right after breakglass: %+v", st)
	}
	mustRun(t, oncall, 1, "status", "bg-loop", "--exit-code")
	_, errOut := mustRun(t, oncall, 1, "restore", "bg-loop")
	if !strings.Contains(errOut, "sync not restored, deployment.apps/web waiting") {
		t.Errorf("restore while waiting: %q", errOut)
	}

	if _, err := e.Git.Commit("bg-loop: another image", env.AppFiles("apps/bg-loop", "bg-loop", "registry.example/web:other")); err != nil {
		t.Fatal(err)
	}
	if st := statusJSON(t, oncall, "bg-loop"); st.Git != breakglass.GitDiverged || !strings.Contains(st.Targets[0].Detail, `Git has "registry.example/web:other"`) {
		t.Fatalf("after a different image reached Git: %+v", st.Targets)
	}
	_, errOut = mustRun(t, oncall, 1, "restore", "bg-loop")
	if !strings.Contains(errOut, "deployment.apps/web diverged") || !strings.Contains(errOut, "restoring would revert the fix") {
		t.Errorf("restore while diverged: %q", errOut)
	}
	if img := imageIn(ctx, t, "bg-loop"); img != "registry.example/web:hotfix" {
		t.Fatalf("the refusals touched the fix: image %s", img)
	}

	fix, err := e.Git.Commit("bg-loop: the hotfix", env.AppFiles("apps/bg-loop", "bg-loop", "registry.example/web:hotfix"))
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, oncall, 0, "status", "bg-loop", "--wait", "--timeout", "2m")
	out, _ := mustRun(t, oncall, 0, "status", "bg-loop", "--exit-code")
	if !strings.Contains(out, "caught-up") || !strings.Contains(out, "yes") {
		t.Errorf("status table after the fix: %s", out)
	}

	out, _ = mustRun(t, oncall, 0, "restore", "bg-loop", "--wait")
	if !strings.Contains(out, "restored the saved sync policy of bg-loop: Git caught up at revision "+fix[:12]) {
		t.Errorf("restore output: %s", out)
	}
	app, err := appsClient(t).Get(ctx, "bg-loop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(app.Object["spec"].(map[string]any)["syncPolicy"])
	want, _ := json.Marshal(created.Object["spec"].(map[string]any)["syncPolicy"])
	if string(got) != string(want) {
		t.Errorf("restored syncPolicy\n %s\nis not the original\n %s", got, want)
	}
	if _, open := app.GetAnnotations()[breakglass.SessionAnnotation]; open {
		t.Errorf("session annotation left behind")
	}
	if _, errOut := mustRun(t, oncall, 1, "status", "bg-loop"); !strings.Contains(errOut, "no open break-glass session on bg-loop") {
		t.Errorf("status after restore: %q", errOut)
	}

	// Self-heal is really back: a hand-made patch is reverted again.
	oncall.kubectl("-n", "bg-loop", "patch", "deployment", "web", "--type=merge", "-p", `{"spec":{"replicas":7}}`)
	ctxWait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	waitFor(ctxWait, t, "self-heal to revert a patch after restore", func() (bool, string) {
		d, err := kubeFor(t, env.Admin.Name).AppsV1().Deployments("bg-loop").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return *d.Spec.Replicas == 2, fmt.Sprintf("replicas %d", *d.Spec.Replicas)
	})

	var events []string
	for _, r := range allRecords(t) {
		if r.Application != nil && r.Application.Name == "bg-loop" {
			events = append(events, string(r.Event)+"/"+r.Outcome.Status)
		}
	}
	if want := "breakglass.planned/started,breakglass.paused/succeeded,breakglass.patched/succeeded,ticket.queued/queued,breakglass.restored/started,breakglass.restored/succeeded"; strings.Join(events, ",") != want {
		t.Errorf("records %v\nwant %s", events, want)
	}
}

func TestAdditivePatchNeedsFieldCheckOrForce(t *testing.T) {
	core(t)
	deployApp(t, "bg-add")
	ctx := context.Background()
	oncall := newUser(t, env.Oncall.Name) // no ARGOCD_SERVER: resource-level rules only
	_, errOut := mustRun(t, oncall, 0, "breakglass", "bg-add", "deployment/web", "--type", "merge",
		"--patch", `{"metadata":{"annotations":{"example.com/debug":"on"}}}`, "--reason", "debug flag", "-y")
	if !strings.Contains(errOut, "the patch only adds fields Git never set") {
		t.Errorf("breakglass did not warn about the additive patch: %q", errOut)
	}
	app, _ := appsClient(t).Get(ctx, "bg-add", metav1.GetOptions{})
	session, _ := breakglass.ParseSession(app.GetAnnotations()[breakglass.SessionAnnotation])
	if session == nil || len(session.Patches) != 1 || session.Patches[0].ArgoSawPatch == nil || *session.Patches[0].ArgoSawPatch {
		t.Fatalf("session should record that Argo CD did not see the patch: %+v", session)
	}
	// Even once Git moves, Synced proves nothing for this patch.
	if _, err := testEnv.Git.Commit("unrelated", map[string]string{"README.md": "moved\n"}); err != nil {
		t.Fatal(err)
	}
	out, _ := mustRun(t, oncall, 1, "status", "bg-add", "-o", "wide", "--exit-code")
	if !strings.Contains(out, "waiting") || !strings.Contains(out, "Synced proves nothing") {
		t.Errorf("status for an additive patch: %s", out)
	}
	_, errOut = mustRun(t, oncall, 1, "restore", "bg-add")
	if !strings.Contains(errOut, "Synced proves nothing") {
		t.Errorf("restore without --force: %q", errOut)
	}
	_, errOut = mustRun(t, oncall, 2, "restore", "bg-add", "--force")
	if !strings.Contains(errOut, "--reason: a forced restore needs one") {
		t.Errorf("--force without --reason: %q", errOut)
	}
	mustRun(t, oncall, 0, "restore", "bg-add", "--force", "--reason", "debug done, Git is right", "-y")
	var forced bool
	for _, r := range allRecords(t) {
		if r.Application != nil && r.Application.Name == "bg-add" && r.Event == "breakglass.forced" && r.Outcome.Status == "succeeded" && r.Reason == "debug done, Git is right" {
			forced = true
		}
	}
	if !forced {
		t.Errorf("no breakglass.forced record with the force reason")
	}
	app, _ = appsClient(t).Get(ctx, "bg-add", metav1.GetOptions{})
	if auto, _, _ := unstructured.NestedMap(app.Object, "spec", "syncPolicy", "automated"); !reflect.DeepEqual(auto, fullPolicy["automated"]) {
		t.Errorf("forced restore did not bring automated back: %v", auto)
	}
}

// TestArgoCDLoginIsReused: without ARGOCD_SERVER, the argocd CLI's own
// configuration (as `argocd login` writes it) reaches the Argo CD API
// server, so the field-level check works; its token is never printed.
func TestArgoCDLoginIsReused(t *testing.T) {
	e := environment(t)
	deployApp(t, "rs-login")
	token, err := e.ArgoToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	configDir := t.TempDir()
	config := "contexts:\n- name: test\n  server: " + e.ArgoServerAddr + "\n  user: test\ncurrent-context: test\n" +
		"servers:\n- server: " + e.ArgoServerAddr + "\n  plain-text: true\nusers:\n- name: test\n  auth-token: " + token + "\n"
	if err := os.WriteFile(filepath.Join(configDir, "config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	oncall := newUser(t, env.Oncall.Name, "ARGOCD_CONFIG_DIR="+configDir)
	mustRun(t, oncall, 0, "breakglass", "rs-login", "deployment/web", "--replicas", "3", "--reason", "login", "-y")
	st := statusJSON(t, oncall, "rs-login")
	if !st.FieldLevel {
		t.Errorf("status did not use the argocd login: %+v", st)
	}
	out, errOut, code := oncall.run("kubectl", "gitops", "status", "rs-login", "--argocd-context", "nope")
	if code != 1 || !strings.Contains(errOut, `--argocd-context "nope": not a context`) {
		t.Errorf("an unknown --argocd-context: exit %d, %q", code, errOut)
	}
	version, _ := mustRun(t, oncall, 0, "version", "-o", "json")
	if !strings.Contains(version, `"source": "http://`+e.ArgoServerAddr+`"`) {
		t.Errorf("version does not ask the API server of the argocd login:\n%s", version)
	}
	if strings.Contains(out+errOut+version, token) {
		t.Errorf("the token was printed")
	}
	mustRun(t, oncall, 0, "restore", "rs-login", "--force", "--reason", "cleanup", "-y")
}
