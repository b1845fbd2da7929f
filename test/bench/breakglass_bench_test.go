package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
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
	e, err := env.Start(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Stop)
	s := &stage{e: e, plugin: buildPlugin(b)}
	admin, _ := e.RESTConfig(env.Admin.Name)
	s.kube = kubernetes.NewForConfigOrDie(admin)
	s.apps = dynamic.NewForConfigOrDie(admin).Resource(breakglass.ApplicationGVR).Namespace(e.ArgoNamespace)
	app := e.Application("web", env.FixtureApp, env.DemoNamespace, map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}})
	if _, err := s.apps.Create(context.Background(), app, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	s.waitImage(b, env.FixtureImage, 2*time.Minute)
	return s
}

func (s *stage) run(b *testing.B, name string, args ...string) {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.e.Kubeconfig(env.Oncall.Name), "PATH="+filepath.Dir(s.plugin)+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func (s *stage) image() string {
	d, err := s.kube.AppsV1().Deployments(env.DemoNamespace).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

func (s *stage) waitImage(b *testing.B, want string, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for s.image() != want {
		if time.Now().After(deadline) {
			b.Fatalf("image %s, want %s after %s", s.image(), want, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reverted watches the live image for d and reports whether it ever left want.
func (s *stage) reverted(want string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if s.image() != want {
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
// (T_live) and until the command ends (T_total), for:
//   - kubectl gitops breakglass -y;
//   - the manual path: pause the Application by hand with a JSON patch,
//     then kubectl patch the Deployment (two processes);
//   - a bare kubectl patch, which self-heal reverts: no fix at all.
//
// Goal: the tool's T_live at most 1.5 times the manual path's.
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
				s.run(b, s.plugin, "breakglass", "web", "deployment/web", "--image", "web="+img, "--reason", "bench", "-y")
			})
			toolLive, toolTotal = append(toolLive, live), append(toolTotal, total)
			s.run(b, s.plugin, "restore", "web", "--force", "--reason", "bench reset", "-y")
			s.waitImage(b, env.FixtureImage, time.Minute)

			img = fmt.Sprintf("registry.example/web:manual-%d-%d", i, run)
			live, total = measure(img, func() {
				s.run(b, "kubectl", "-n", s.e.ArgoNamespace, "patch", "application", "web", "--type", "json", "-p", `[{"op":"remove","path":"/spec/syncPolicy/automated"}]`)
				s.run(b, "kubectl", "-n", env.DemoNamespace, "patch", "deployment", "web", "-p", patch(img))
			})
			manualLive, manualTotal = append(manualLive, live), append(manualTotal, total)
			s.run(b, "kubectl", "-n", s.e.ArgoNamespace, "patch", "application", "web", "--type", "merge", "-p", `{"spec":{"syncPolicy":{"automated":{"prune":true,"selfHeal":true}}}}`)
			s.waitImage(b, env.FixtureImage, time.Minute)

			img = fmt.Sprintf("registry.example/web:bare-%d-%d", i, run)
			live, _ = measure(img, func() { s.run(b, "kubectl", "-n", env.DemoNamespace, "patch", "deployment", "web", "-p", patch(img)) })
			bareLive = append(bareLive, live)
			s.waitImage(b, env.FixtureImage, time.Minute) // self-heal undoes the bare patch
		}
	}
	b.StopTimer()
	tl, tt, ml, mt, bl := median(toolLive), median(toolTotal), median(manualLive), median(manualTotal), median(bareLive)
	b.ReportMetric(tl.Seconds(), "breakglass-live-s")
	b.ReportMetric(tt.Seconds(), "breakglass-total-s")
	b.ReportMetric(ml.Seconds(), "manual-live-s")
	b.ReportMetric(tl.Seconds()/ml.Seconds(), "live-ratio(goal<=1.5)")
	report("T_live: breakglass -y", seconds(tl), "", false)
	report("T_total: breakglass -y", seconds(tt), "", false)
	report("T_live: manual path (pause by hand, kubectl patch)", seconds(ml), "", false)
	report("T_total: manual path", seconds(mt), "", false)
	report("T_live: bare kubectl patch (reverted by self-heal)", seconds(bl), "", false)
	report("T_live ratio, breakglass / manual path", fmt.Sprintf("%.2f", tl.Seconds()/ml.Seconds()), "<= 1.5", tl.Seconds() <= 1.5*ml.Seconds())
}

// BenchmarkSelfHealReverts runs break-glass BENCH_RUNS times (default 50)
// against an aggressive controller (self-heal timeout 0, 2s resync, Git
// moving every second) and counts how often self-heal still reverted the
// patch (goal 0), beside the naive "pause by hand, then kubectl patch".
func BenchmarkSelfHealReverts(b *testing.B) {
	runs := 50
	if n, err := strconv.Atoi(os.Getenv("BENCH_RUNS")); err == nil && n > 0 {
		runs = n
	}
	s := newStage(b, env.Options{AppResync: 2 * time.Second, SelfHealTimeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // Git keeps moving underneath
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = s.e.Git.Commit("noise", map[string]string{"noise.txt": strconv.Itoa(i)})
			time.Sleep(time.Second)
		}
	}()
	bgReverts, naiveReverts := 0, 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for run := 0; run < runs; run++ {
			img := fmt.Sprintf("registry.example/web:heal-%d-%d", i, run)
			s.run(b, s.plugin, "breakglass", "web", "deployment/web", "--image", "web="+img, "--reason", "bench", "-y")
			if s.reverted(img, 3*time.Second) {
				bgReverts++
			}
			s.run(b, s.plugin, "restore", "web", "--force", "--reason", "bench reset", "-y")
			s.waitImage(b, env.FixtureImage, time.Minute)

			s.run(b, "kubectl", "-n", s.e.ArgoNamespace, "patch", "application", "web", "--type", "merge", "-p", `{"spec":{"syncPolicy":{"automated":null}}}`)
			s.run(b, "kubectl", "-n", env.DemoNamespace, "set", "image", "deployment/web", "web="+img)
			if s.reverted(img, 3*time.Second) {
				naiveReverts++
			}
			s.run(b, "kubectl", "-n", s.e.ArgoNamespace, "patch", "application", "web", "--type", "merge", "-p", `{"spec":{"syncPolicy":{"automated":{"prune":true,"selfHeal":true}}}}`)
			s.waitImage(b, env.FixtureImage, time.Minute)
		}
	}
	b.ReportMetric(float64(bgReverts), "breakglass-reverts(goal=0)")
	b.ReportMetric(float64(naiveReverts), "naive-reverts")
	b.ReportMetric(float64(runs*b.N), "runs")
	report("reverts, aggressive self-heal: breakglass", fmt.Sprintf("%d of %d", bgReverts, runs*b.N), "0", bgReverts == 0)
	report("reverts, aggressive self-heal: manual path", fmt.Sprintf("%d of %d", naiveReverts, runs*b.N), "", false)
}
