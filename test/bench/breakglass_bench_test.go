package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// stage is a running environment with a self-healing Application "web"
// and the plugin built.
type stage struct {
	e      *env.Env
	plugin string
	kube   kubernetes.Interface
	apps   dynamic.ResourceInterface
}

func newStage(b *testing.B, opts env.Options) *stage {
	b.Helper()
	s, err := startStage(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.stop)
	return s
}

// startStage starts a stage that lives until stop: one benchmark's, or
// one shared by several (the scale stage).
func startStage(opts env.Options) (*stage, error) {
	e, err := env.Start(context.Background(), opts)
	if err != nil {
		return nil, err
	}
	s := &stage{e: e}
	if s.plugin, err = build(); err != nil {
		s.stop()
		return nil, err
	}
	admin, _ := e.RESTConfig(env.Admin.Name)
	admin.QPS, admin.Burst = 200, 400 // seeding a thousand Applications
	s.kube = kubernetes.NewForConfigOrDie(admin)
	s.apps = dynamic.NewForConfigOrDie(admin).Resource(argocd.ApplicationGVR).Namespace(e.ArgoNamespace)
	app := e.Application("web", env.FixtureApp, env.DemoNamespace, map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}})
	if _, err := s.apps.Create(context.Background(), app, metav1.CreateOptions{}); err != nil {
		s.stop()
		return nil, err
	}
	if err := s.imageWithin(env.DemoNamespace, env.FixtureImage, 2*time.Minute); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// stop stops the environment and removes the plugin.
func (s *stage) stop() {
	s.e.Stop()
	if s.plugin != "" {
		os.RemoveAll(filepath.Dir(s.plugin))
	}
}

// run runs a command as on-call, with exactly deploy/rbac's rights, and
// the plugin on PATH, so that `kubectl gitops` finds it as a user's
// kubectl does.
func (s *stage) run(b *testing.B, name string, args ...string) {
	b.Helper()
	s.runAs(b, env.Oncall.Name, nil, name, args...)
}

// admin runs a command as a cluster admin: the identity the manual path
// needs, since the admission policies let no one else pause an
// Application outside a session.
func (s *stage) admin(b *testing.B, name string, args ...string) {
	b.Helper()
	s.runAs(b, env.Admin.Name, nil, name, args...)
}

// runAs runs a command as user, with extra environment variables.
func (s *stage) runAs(b *testing.B, user string, extra []string, name string, args ...string) {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.e.Kubeconfig(user), "PATH="+filepath.Dir(s.plugin)+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, extra...)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %v as %s: %v\n%s", name, args, user, err, out)
	}
}

// argoEnv is on-call's Argo CD configuration as a real install gives it:
// the API server and a read-only account's token.
func (s *stage) argoEnv(b *testing.B) []string {
	b.Helper()
	token, err := s.e.ArgoToken(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return []string{"ARGOCD_SERVER=" + s.e.ArgoServerAddr, "ARGOCD_AUTH_TOKEN=" + token, "ARGOCD_OPTS=--plaintext"}
}

func (s *stage) image() string { return s.imageIn(env.DemoNamespace) }

// imageIn is the live image of Deployment web in namespace.
func (s *stage) imageIn(namespace string) string {
	d, err := s.kube.AppsV1().Deployments(namespace).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

func (s *stage) waitImage(b *testing.B, want string, timeout time.Duration) {
	b.Helper()
	s.waitImageIn(b, env.DemoNamespace, want, timeout)
}

func (s *stage) waitImageIn(b *testing.B, namespace, want string, timeout time.Duration) {
	b.Helper()
	if err := s.imageWithin(namespace, want, timeout); err != nil {
		b.Fatal(err)
	}
}

// imageWithin waits, at most timeout, for Deployment web in namespace to
// run want; the error says what every Application was doing.
func (s *stage) imageWithin(namespace, want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for s.imageIn(namespace) != want {
		if time.Now().After(deadline) {
			var states []string
			if list, err := s.apps.List(context.Background(), metav1.ListOptions{}); err == nil {
				for _, a := range list.Items {
					policy, _, _ := unstructured.NestedFieldNoCopy(a.Object, "spec", "syncPolicy")
					op, _, _ := unstructured.NestedFieldNoCopy(a.Object, "status", "operationState")
					sync, _, _ := unstructured.NestedFieldNoCopy(a.Object, "status", "sync")
					states = append(states, fmt.Sprintf("%s: policy %v, sync %v, operation %v", a.GetName(), policy, sync, op))
				}
			}
			return fmt.Errorf("image %s in %s, want %s after %s; Applications:\n%s", s.imageIn(namespace), namespace, want, timeout, strings.Join(states, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// selfHealing is the automated sync policy of the self-healing
// Applications, as JSON.
const selfHealing = `{"prune":true,"selfHeal":true}`

// resumeByHand ends a manual-path run: automated sync back on for app
// (policy, as JSON), and Git's image back on its Deployment in namespace.
// Removing automated by hand can leave an empty syncPolicy, which Argo CD's
// controller normalises away with a patch computed from its cache and sent
// without a precondition: a re-enable that lands first is wiped. So the
// policy is written until it stays.
func (s *stage) resumeByHand(b *testing.B, app, namespace, policy string) {
	b.Helper()
	for attempt := 0; ; attempt++ {
		s.admin(b, "kubectl", "-n", s.e.ArgoNamespace, "patch", "application", app, "--type", "merge", "-p", `{"spec":{"syncPolicy":{"automated":`+policy+`}}}`)
		time.Sleep(time.Second)
		a, err := s.apps.Get(context.Background(), app, metav1.GetOptions{})
		if _, on, _ := unstructured.NestedMap(a.Object, "spec", "syncPolicy", "automated"); err == nil && on {
			break
		}
		if attempt == 10 {
			b.Fatalf("automated sync of %s did not stay on", app)
		}
	}
	s.imageBack(b, namespace)
}

// imageBack puts Git's image back on the Deployment in namespace and waits
// for it. Self-heal usually has done so already, but Argo CD skips an
// automated sync to a revision whose last attempt did not succeed (a
// terminated one), and the next run must start from Git's state.
func (s *stage) imageBack(b *testing.B, namespace string) {
	b.Helper()
	s.admin(b, "kubectl", "-n", namespace, "set", "image", "deployment/web", "web="+env.FixtureImage)
	s.waitImageIn(b, namespace, env.FixtureImage, time.Minute)
}

// reverted watches the live image in namespace for d and reports whether
// it ever left want.
func (s *stage) reverted(namespace, want string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if s.imageIn(namespace) != want {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// liveAt watches the Deployment until its image is want, and sends when
// that happened: the moment the fix is live on the API server.
func (s *stage) liveAt(b *testing.B, want string) <-chan time.Time {
	b.Helper()
	at := make(chan time.Time, 1)
	w, err := s.kube.AppsV1().Deployments(env.DemoNamespace).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=web"})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok && d.Spec.Template.Spec.Containers[0].Image == want {
				at <- time.Now()
				return
			}
		}
	}()
	return at
}

// BenchmarkTimeToLiveFix measures, median of 10 runs each, the time from
// the command's start until the patched image is live on the API server
// (T_live, seen by one watch started before the command) and until the
// command ends (T_total), everything through kubectl, for:
//   - kubectl gitops breakglass -y, as on-call;
//   - the manual path: pause the Application with a JSON patch, then
//     kubectl patch the Deployment (two processes), as a cluster admin,
//     the only identity the admission policies let pause outside a
//     session;
//   - a bare kubectl patch, which self-heal reverts: no fix at all.
//
// Goal: the tool's T_live at most the manual path's.
func BenchmarkTimeToLiveFix(b *testing.B) {
	s := newStage(b, env.Options{})
	var toolLive, toolTotal, manualLive, manualTotal, bareLive []time.Duration
	patch := func(img string) string {
		return `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"` + img + `"}]}}}}`
	}
	measure := func(img string, do func()) (live, total time.Duration) {
		at := s.liveAt(b, img)
		start := time.Now()
		do()
		total = time.Since(start)
		select {
		case t := <-at:
			return t.Sub(start), total
		case <-time.After(time.Minute):
			b.Fatalf("%s never went live", img)
		}
		return 0, 0
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for run := 0; run < 10; run++ {
			img := fmt.Sprintf("registry.example/web:tool-%d-%d", i, run)
			live, total := measure(img, func() {
				s.run(b, "kubectl", "gitops", "breakglass", "web", "deployment/web", "--image", "web="+img, "--reason", "bench", "-y")
			})
			toolLive, toolTotal = append(toolLive, live), append(toolTotal, total)
			s.run(b, "kubectl", "gitops", "restore", "web", "--force", "--reason", "bench reset", "-y")
			s.waitImage(b, env.FixtureImage, time.Minute)

			img = fmt.Sprintf("registry.example/web:manual-%d-%d", i, run)
			live, total = measure(img, func() {
				s.admin(b, "kubectl", "-n", s.e.ArgoNamespace, "patch", "application", "web", "--type", "json", "-p", `[{"op":"remove","path":"/spec/syncPolicy/automated"}]`)
				s.admin(b, "kubectl", "-n", env.DemoNamespace, "patch", "deployment", "web", "-p", patch(img))
			})
			manualLive, manualTotal = append(manualLive, live), append(manualTotal, total)
			s.resumeByHand(b, "web", env.DemoNamespace, selfHealing)

			img = fmt.Sprintf("registry.example/web:bare-%d-%d", i, run)
			live, _ = measure(img, func() { s.admin(b, "kubectl", "-n", env.DemoNamespace, "patch", "deployment", "web", "-p", patch(img)) })
			bareLive = append(bareLive, live)
			s.waitImage(b, env.FixtureImage, time.Minute) // self-heal undoes the bare patch
		}
	}
	b.StopTimer()
	tl, tt, ml, mt, bl := median(toolLive), median(toolTotal), median(manualLive), median(manualTotal), median(bareLive)
	b.ReportMetric(tl.Seconds(), "breakglass-live-s")
	b.ReportMetric(tt.Seconds(), "breakglass-total-s")
	b.ReportMetric(ml.Seconds(), "manual-live-s")
	b.ReportMetric(tl.Seconds()/ml.Seconds(), "live-ratio(goal<=1.0)")
	report("T_live: kubectl gitops breakglass -y (on-call)", seconds(tl), "", false)
	report("T_total: kubectl gitops breakglass -y (on-call)", seconds(tt), "", false)
	report("T_live: manual path (cluster admin: kubectl patch the Application, kubectl patch)", seconds(ml), "", false)
	report("T_total: manual path", seconds(mt), "", false)
	report("T_live: bare kubectl patch (reverted by self-heal)", seconds(bl), "", false)
	report("T_live ratio, breakglass / manual path", fmt.Sprintf("%.2f", tl.Seconds()/ml.Seconds()), "<= 1.0", tl <= ml)
}

// A revertCondition is an adversarial setting for a break-glass: the
// Application (whose Deployment web runs in namespace), what to do before
// the fix is applied and after it is live.
type revertCondition struct {
	// metric names the condition in the benchmark's metrics.
	name, metric, app, namespace string
	// policy is the Application's automated sync policy, as JSON.
	policy        string
	before, after func(b *testing.B)
}

// BenchmarkSelfHealReverts runs break-glass BENCH_RUNS times (default 10)
// in each adversarial condition and counts how often the fix was still
// reverted (goal 0), beside the manual path (a cluster admin pauses by
// hand, then kubectl set image). Break-glass runs as on-call with the
// read-only Argo CD account a real install gives it. The controller is
// aggressive throughout: self-heal timeout 0, 2s resync, Git moving every
// second. The conditions:
//   - self-heal alone;
//   - a self-healing app-of-apps parent, which puts a child's paused
//     policy back;
//   - a sync operation running when the fix starts, which goes on to apply
//     Git's Deployment once its earlier wave is healthy;
//   - a colleague pressing Sync in Argo CD once the fix is live (through
//     argocd-server, as an Argo CD admin).
func BenchmarkSelfHealReverts(b *testing.B) {
	runs := 10
	if n, err := strconv.Atoi(os.Getenv("BENCH_RUNS")); err == nil && n > 0 {
		runs = n
	}
	s := newStage(b, env.Options{AppResync: 2 * time.Second, SelfHealTimeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conditions := []revertCondition{
		{name: "aggressive self-heal", metric: "self-heal", app: "web", namespace: env.DemoNamespace, policy: selfHealing, before: func(*testing.B) {}, after: func(*testing.B) {}},
		s.parentCondition(b),
		s.runningSyncCondition(b),
		s.manualSyncCondition(b),
	}
	argo := s.argoEnv(b)
	go func() { // Git keeps moving underneath
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = s.e.Git.Commit("noise", map[string]string{"noise.txt": strconv.Itoa(i)})
			time.Sleep(time.Second)
		}
	}()
	b.ResetTimer()
	for _, c := range conditions {
		toolReverts, manualReverts := 0, 0
		for i := 0; i < b.N; i++ {
			for run := 0; run < runs; run++ {
				img := fmt.Sprintf("registry.example/web:heal-%s-%d-%d", c.app, i, run)
				c.before(b)
				s.runAs(b, env.Oncall.Name, argo, "kubectl", "gitops", "breakglass", c.app, "deployment/web", "--image", "web="+img, "--reason", "bench", "-y")
				c.after(b)
				if s.reverted(c.namespace, img, 5*time.Second) {
					toolReverts++
				}
				s.runAs(b, env.Oncall.Name, argo, "kubectl", "gitops", "restore", c.app, "--force", "--reason", "bench reset", "-y")
				s.imageBack(b, c.namespace)

				c.before(b)
				s.admin(b, "kubectl", "-n", s.e.ArgoNamespace, "patch", "application", c.app, "--type", "merge", "-p", `{"spec":{"syncPolicy":{"automated":null}}}`)
				s.admin(b, "kubectl", "-n", c.namespace, "set", "image", "deployment/web", "web="+img)
				c.after(b)
				if s.reverted(c.namespace, img, 5*time.Second) {
					manualReverts++
				}
				s.resumeByHand(b, c.app, c.namespace, c.policy)
			}
		}
		n := runs * b.N
		b.ReportMetric(float64(toolReverts), c.metric+"-breakglass-reverts(goal=0)")
		report("reverts, "+c.name+": breakglass", fmt.Sprintf("%d of %d", toolReverts, n), "0", toolReverts == 0)
		report("reverts, "+c.name+": manual path", fmt.Sprintf("%d of %d", manualReverts, n), "", false)
	}
}

// deployChild commits an application like the fixture's at apps/NAME with
// extra files, and creates its namespace NAME.
func (s *stage) deployChild(b *testing.B, name string, extra map[string]string) {
	b.Helper()
	files := env.AppFiles("apps/"+name, name, env.FixtureImage)
	for k, v := range extra {
		files[k] = v
	}
	if _, err := s.e.Git.Commit(name, files); err != nil {
		b.Fatal(err)
	}
	if err := env.TeamNamespace(context.Background(), s.kube, name); err != nil {
		b.Fatal(err)
	}
}

// parentCondition: Application heal-child, self-healing, is declared in Git
// and created by heal-parent, which self-heals too.
func (s *stage) parentCondition(b *testing.B) revertCondition {
	b.Helper()
	s.deployChild(b, "heal-child", map[string]string{"apps/heal-parent/child.yaml": `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: heal-child
  namespace: ` + s.e.ArgoNamespace + `
spec:
  project: default
  source:
    repoURL: ` + s.e.Git.URL() + `
    path: apps/heal-child
    targetRevision: HEAD
  destination:
    server: https://kubernetes.default.svc
    namespace: heal-child
  syncPolicy:
    automated:
      prune: true
      selfHeal: true
`})
	parent := s.e.Application("heal-parent", "apps/heal-parent", s.e.ArgoNamespace, map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}})
	if _, err := s.apps.Create(context.Background(), parent, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	s.waitImageIn(b, "heal-child", env.FixtureImage, 2*time.Minute)
	nothing := func(*testing.B) {}
	return revertCondition{name: "self-healing app-of-apps parent", metric: "parent", app: "heal-child", namespace: "heal-child", policy: selfHealing, before: nothing, after: nothing}
}

// runningSyncCondition: Application gated syncs automatically (no
// self-heal, which would sync only the resources out of sync) and has a Pod
// in sync wave -1, which never runs here (no kubelet): a full sync waits on
// it before applying the Deployment in wave 0. Before a fix the gate is
// deleted and a full sync started, as `argocd app sync` does; once the fix
// is live the gate is marked Succeeded, and the sync goes on to apply Git's
// Deployment, unless it was terminated.
func (s *stage) runningSyncCondition(b *testing.B) revertCondition {
	b.Helper()
	const policy = `{"prune":true}`
	s.deployChild(b, "gated", map[string]string{"apps/gated/gate.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: gate
  namespace: gated
  annotations:
    argocd.argoproj.io/sync-wave: "-1"
spec:
  restartPolicy: Never
  containers:
  - name: gate
    image: registry.example/gate:1
`})
	var automated map[string]any
	_ = json.Unmarshal([]byte(policy), &automated)
	app := s.e.Application("gated", "apps/gated", "gated", map[string]any{"automated": automated})
	if _, err := s.apps.Create(context.Background(), app, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	pods := s.kube.CoreV1().Pods("gated")
	open := func(b *testing.B) {
		b.Helper()
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if p, err := pods.Get(context.Background(), "gate", metav1.GetOptions{}); err == nil && p.Status.Phase != corev1.PodSucceeded {
				p.Status.Phase = corev1.PodSucceeded
				if _, err := pods.UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err == nil {
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.Fatal("the gate Pod never appeared")
	}
	open(b)
	s.waitImageIn(b, "gated", env.FixtureImage, 2*time.Minute)
	running := func() bool {
		a, err := s.apps.Get(context.Background(), "gated", metav1.GetOptions{})
		phase, _, _ := unstructured.NestedString(a.Object, "status", "operationState", "phase")
		p, perr := pods.Get(context.Background(), "gate", metav1.GetOptions{})
		return err == nil && phase == "Running" && perr == nil && p.Status.Phase != corev1.PodSucceeded
	}
	before := func(b *testing.B) {
		b.Helper()
		_ = pods.Delete(context.Background(), "gate", metav1.DeleteOptions{})
		sync := []byte(`{"operation":{"initiatedBy":{"username":"bench"},"sync":{"prune":true}}}`)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if _, err := s.apps.Patch(context.Background(), "gated", types.MergePatchType, sync, metav1.PatchOptions{}); err != nil {
				b.Fatal(err)
			}
			for wait := time.Now().Add(5 * time.Second); time.Now().Before(wait); time.Sleep(100 * time.Millisecond) {
				if running() {
					return
				}
			}
		}
		b.Fatal("no sync started waiting on the gate")
	}
	return revertCondition{name: "sync running at the start", metric: "running-sync", app: "gated", namespace: "gated", policy: policy, before: before, after: open}
}

// manualSyncCondition: once the fix is live, a colleague presses Sync on
// Application web in Argo CD's UI: a POST to argocd-server's sync API as an
// Argo CD admin, which argocd-server writes as its own ServiceAccount. The
// run waits for that sync to end before the fix is checked.
func (s *stage) manualSyncCondition(b *testing.B) revertCondition {
	b.Helper()
	after := func(b *testing.B) {
		b.Helper()
		ctx := context.Background()
		startedAt := func() (string, string) {
			a, err := s.apps.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return "", ""
			}
			at, _, _ := unstructured.NestedString(a.Object, "status", "operationState", "startedAt")
			phase, _, _ := unstructured.NestedString(a.Object, "status", "operationState", "phase")
			return at, phase
		}
		before, _ := startedAt()
		// startedAt has seconds only: a Sync started in the second the
		// last sync started (self-heal's, putting the image back) would
		// look like no Sync at all.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
		if err := s.e.ArgoAdmin(ctx, http.MethodPost, "/api/v1/applications/web/sync", []byte(`{}`)); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			at, phase := startedAt()
			if at != before && phase != "" && phase != "Running" && phase != "Terminating" {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("the Sync of web did not end within a minute (phase %q)", phase)
			}
		}
	}
	return revertCondition{name: "a colleague's Sync in Argo CD", metric: "manual-sync", app: "web", namespace: env.DemoNamespace, policy: selfHealing,
		before: func(*testing.B) {}, after: after}
}
