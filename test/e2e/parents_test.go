//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
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

func TestAppOfAppsParentIsPausedToo(t *testing.T) {
	core(t)
	e := environment(t)
	ctx := context.Background()
	files := env.AppFiles("apps/bg-child", "bg-child", env.FixtureImage)
	files["apps/bg-parent/child.yaml"] = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: bg-child
  namespace: argocd
spec:
  project: default
  source:
    repoURL: ` + e.Git.URL() + `
    path: apps/bg-child
    targetRevision: HEAD
  destination:
    server: https://kubernetes.default.svc
    namespace: bg-child
  syncPolicy:
    automated:
      prune: true
      selfHeal: true
`
	if _, err := e.Git.Commit("app of apps", files); err != nil {
		t.Fatal(err)
	}
	if err := env.TeamNamespace(ctx, kubeFor(t, env.Admin.Name), "bg-child"); err != nil {
		t.Fatal(err)
	}
	parentPolicy := map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}}
	parent := e.Application("bg-parent", "apps/bg-parent", e.ArgoNamespace, runtimeCopy(parentPolicy))
	apps := appsClient(t)
	if _, err := apps.Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	automated := func(name string) bool {
		app, err := apps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		policy, _, _ := unstructured.NestedMap(app.Object, "spec", "syncPolicy")
		return autoSyncOn(policy)
	}
	ctxWait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	waitFor(ctxWait, t, "the parent to create a synced child", func() (bool, string) {
		d, err := kubeFor(t, env.Admin.Name).AppsV1().Deployments("bg-child").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Spec.Template.Spec.Containers[0].Image == env.FixtureImage && automated("bg-child"), "child not there yet"
	})
	ctxSynced, cancelSynced := context.WithTimeout(ctx, time.Minute)
	defer cancelSynced()
	waitFor(ctxSynced, t, "the child to report its managed resources", func() (bool, string) {
		child, _ := apps.Get(ctx, "bg-child", metav1.GetOptions{})
		res, _, _ := unstructured.NestedSlice(child.Object, "status", "resources")
		return len(res) > 0, "no resources yet"
	})

	// The problem: pausing the child by hand is undone by the parent.
	admin := newUser(t, env.Admin.Name)
	admin.kubectl("-n", e.ArgoNamespace, "patch", "application", "bg-child", "--type=json", "-p", `[{"op":"remove","path":"/spec/syncPolicy/automated"}]`)
	ctxHeal, cancelHeal := context.WithTimeout(ctx, time.Minute)
	defer cancelHeal()
	waitFor(ctxHeal, t, "the parent to undo a hand-made pause of its child", func() (bool, string) {
		return automated("bg-child"), "child still paused"
	})

	oncall := newUser(t, env.Oncall.Name)
	out, _ := mustRun(t, oncall, 0, "breakglass", "bg-child", "deployment/web", "--image", "web=registry.example/web:hotfix", "--reason", "child hotfix", "-y")
	if !strings.Contains(out, "Also pauses: parent application bg-parent") {
		t.Errorf("breakglass did not say it pauses the parent:\n%s", out)
	}
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		if automated("bg-child") || automated("bg-parent") {
			t.Fatalf("a pause was undone: child automated %v, parent automated %v", automated("bg-child"), automated("bg-parent"))
		}
		if img := imageIn(ctx, t, "bg-child"); img != "registry.example/web:hotfix" {
			t.Fatalf("the fix was reverted: %s", img)
		}
		time.Sleep(500 * time.Millisecond)
	}
	p, _ := apps.Get(ctx, "bg-parent", metav1.GetOptions{})
	if !strings.HasPrefix(p.GetAnnotations()[breakglass.PausedByAnnotation], "bg-child/") {
		t.Errorf("the parent does not say who paused it: %v", p.GetAnnotations())
	}

	mustRun(t, oncall, 0, "restore", "bg-child", "--force", "--reason", "test over", "-y")
	p, _ = apps.Get(ctx, "bg-parent", metav1.GetOptions{})
	if got, _, _ := unstructured.NestedMap(p.Object, "spec", "syncPolicy"); !reflect.DeepEqual(runtimeDeepCopy(got), runtimeDeepCopy(parentPolicy)) {
		t.Errorf("parent policy after restore %v, want %v", got, parentPolicy)
	}
	if _, still := p.GetAnnotations()[breakglass.PausedByAnnotation]; still {
		t.Errorf("the parent is still marked paused")
	}
	if !automated("bg-child") {
		t.Errorf("the child's automated sync is not back")
	}

	// If the child's own pause fails after its parent was paused, the
	// parent must not stay paused: here another session appears on the
	// child between plan and execute.
	ctxBack, cancelBack := context.WithTimeout(ctx, time.Minute)
	defer cancelBack()
	waitFor(ctxBack, t, "self-heal to put Git's image back after the forced restore", func() (bool, string) {
		img := imageIn(ctx, t, "bg-child")
		return img == env.FixtureImage, img
	})
	engine, plan := planHotfix(t, "bg-child")
	if len(plan.Parents) != 1 {
		t.Fatalf("plan parents %v, want bg-parent", plan.Parents)
	}
	admin.kubectl("-n", e.ArgoNamespace, "annotate", "application", "bg-child", breakglass.SessionAnnotation+`={"id":"other","openedBy":"someone","state":"paused"}`)
	if _, err := engine.Execute(ctx, plan); err == nil || !strings.Contains(err.Error(), "session other by someone") {
		t.Fatalf("Execute with a session opened meanwhile: %v", err)
	}
	p, _ = apps.Get(ctx, "bg-parent", metav1.GetOptions{})
	if got, _, _ := unstructured.NestedMap(p.Object, "spec", "syncPolicy"); !reflect.DeepEqual(runtimeDeepCopy(got), runtimeDeepCopy(parentPolicy)) {
		t.Errorf("parent left paused after the child's pause failed: %v", got)
	}
	if by, still := p.GetAnnotations()[breakglass.PausedByAnnotation]; still {
		t.Errorf("parent still marked paused by %s", by)
	}

	// Interrupted right after the parent's pause: the child's session,
	// written first, names the parent, so status shows it and restore
	// puts both back. Nothing is left paused for nobody. The stopped run
	// lives on in this test's process, so for all the tool can tell it may
	// still patch: not ready, and the restore is forced (a run whose
	// process is gone restores plainly, below).
	admin.kubectl("-n", e.ArgoNamespace, "annotate", "application", "bg-child", breakglass.SessionAnnotation+"-")
	engine, plan = planHotfix(t, "bg-child")
	engine.AfterParentPause = func(context.Context) error { return errCrash }
	if _, err := engine.Execute(ctx, plan); !errors.Is(err, errCrash) {
		t.Fatalf("Execute interrupted after the parent's pause: %v", err)
	}
	if automated("bg-parent") {
		t.Fatalf("the parent was not paused before the interruption")
	}
	out, errOut := mustRun(t, oncall, 0, "status", "bg-child")
	if !strings.Contains(out, "bg-child") || strings.Contains(errOut, "not open") {
		t.Errorf("status after the interruption:\n%s\n%s", out, errOut)
	}
	mustRun(t, oncall, 0, "restore", "bg-child", "--force", "--reason", "the break-glass stopped after pausing the parent", "-y")
	p, _ = apps.Get(ctx, "bg-parent", metav1.GetOptions{})
	if got, _, _ := unstructured.NestedMap(p.Object, "spec", "syncPolicy"); !reflect.DeepEqual(runtimeDeepCopy(got), runtimeDeepCopy(parentPolicy)) {
		t.Errorf("parent policy after restoring the interrupted session: %v", got)
	}
	if by, still := p.GetAnnotations()[breakglass.PausedByAnnotation]; still {
		t.Errorf("parent still marked paused by %s", by)
	}

	// Interrupted for real, right after the parent's pause: SIGINT to the
	// process while its next request is held, and a connection that drops.
	for _, drop := range []bool{false, true} {
		proxy := newTripProxy(t, env.Oncall.Name, "PATCH", "/applications/bg-parent", drop)
		cmd := exec.Command(filepath.Join(binDir, "kubectl-gitops"), "breakglass", "bg-child", "deployment/web",
			"--image", "web=registry.example/web:hotfix", "--reason", "interrupted", "-y")
		cmd.Env = proxy.env()
		var output bytes.Buffer
		cmd.Stdout, cmd.Stderr = &output, &output
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-proxy.tripped:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("the break-glass never paused the parent: %s", output.String())
		}
		if !drop {
			_ = cmd.Process.Signal(os.Interrupt)
			time.Sleep(300 * time.Millisecond)
			proxy.Release()
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err == nil {
				t.Errorf("drop=%v: the interrupted break-glass exited 0: %s", drop, output.String())
			}
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("drop=%v: the interrupted break-glass did not exit: %s", drop, output.String())
		}
		p, _ = apps.Get(ctx, "bg-parent", metav1.GetOptions{})
		child, _ := apps.Get(ctx, "bg-child", metav1.GetOptions{})
		session, err := breakglass.ParseSession(child.GetAnnotations()[breakglass.SessionAnnotation])
		by, marked := p.GetAnnotations()[breakglass.PausedByAnnotation]
		t.Logf("drop=%v: parent marked %v (%s), child session %v; the command said: %s", drop, marked, by, err == nil, strings.TrimSpace(output.String()))
		if marked {
			if err != nil || by != "bg-child/"+session.ID || len(session.PausedParents) != 1 {
				t.Fatalf("drop=%v: the parent is paused for %q but the child's session is %+v (%v)", drop, by, session, err)
			}
		}
		if err == nil {
			mustRun(t, oncall, 0, "restore", "bg-child", "-y")
		}
		p, _ = apps.Get(ctx, "bg-parent", metav1.GetOptions{})
		if !automated("bg-parent") || p.GetAnnotations()[breakglass.PausedByAnnotation] != "" {
			t.Errorf("drop=%v: the parent is still paused after restore", drop)
		}
	}

	// A paused-by mark whose session is gone is reported, never silent.
	admin.kubectl("-n", e.ArgoNamespace, "annotate", "application", "bg-parent", breakglass.PausedByAnnotation+"=ghost/20261202-000000-abcde")
	_, errOut, _ = oncall.run("kubectl", "gitops", "status")
	if !strings.Contains(errOut, `warning: application argocd/bg-parent is marked paused for session "ghost/20261202-000000-abcde", which is not open`) {
		t.Errorf("status does not report the orphaned pause: %s", errOut)
	}
	admin.kubectl("-n", e.ArgoNamespace, "annotate", "application", "bg-parent", breakglass.PausedByAnnotation+"-")
}

// TestCopiedTrackingIDIsIgnored: a tracking id copied onto an Application it
// does not describe names no parent (Argo CD ignores it too), so no
// unrelated self-healing Application is paused.
func TestCopiedTrackingIDIsIgnored(t *testing.T) {
	e := environment(t)
	deployApp(t, "tr-other")
	deployApp(t, "tr-copied")
	admin := newUser(t, env.Admin.Name)
	admin.kubectl("-n", e.ArgoNamespace, "annotate", "application", "tr-copied", "argocd.argoproj.io/tracking-id=tr-other:argoproj.io/Application:argocd/somebody-else")
	out, _ := mustRun(t, newUser(t, env.Oncall.Name), 0, "breakglass", "tr-copied", "deployment/web", "--replicas", "3", "--reason", "copied", "--dry-run")
	if strings.Contains(out, "Also pauses") {
		t.Errorf("a copied tracking id made an unrelated Application a parent:\n%s", out)
	}
	admin.kubectl("-n", e.ArgoNamespace, "annotate", "application", "tr-copied", "argocd.argoproj.io/tracking-id=tr-other:argoproj.io/Application:argocd/tr-copied", "--overwrite")
	out, _ = mustRun(t, newUser(t, env.Oncall.Name), 0, "breakglass", "tr-copied", "deployment/web", "--replicas", "3", "--reason", "tracked", "--dry-run")
	if !strings.Contains(out, "Also pauses: parent application tr-other") {
		t.Errorf("a tracking id that describes the Application names its parent:\n%s", out)
	}
}
