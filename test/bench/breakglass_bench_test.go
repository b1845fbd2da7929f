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
	s := &stage{e: e, plugin: filepath.Join(b.TempDir(), "kubectl-gitops")}
	build := exec.Command("go", "build", "-o", s.plugin, "./cmd/kubectl-gitops")
	build.Dir = env.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
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

// BenchmarkBreakglassVsKubectlPatch compares the wall time of
// `kubectl gitops breakglass -y` with a bare `kubectl patch` of the same
// change, median of 10 each (goal: at most 2x). Restores between runs are
// not timed.
func BenchmarkBreakglassVsKubectlPatch(b *testing.B) {
	s := newStage(b, env.Options{})
	var bg, plain []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for run := 0; run < 10; run++ {
			img := fmt.Sprintf("registry.example/web:bench-%d-%d", i, run)
			bg = append(bg, timed(func() {
				s.run(b, s.plugin, "breakglass", "web", "deployment/web", "-n", env.DemoNamespace, "--image", "web="+img, "--reason", "bench", "-y")
			}))
			b.StopTimer()
			s.run(b, s.plugin, "restore", "web", "--force", "--reason", "bench reset", "-y")
			s.waitImage(b, env.FixtureImage, time.Minute)
			plain = append(plain, timed(func() {
				s.run(b, "kubectl", "-n", env.DemoNamespace, "patch", "deployment", "web", "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"`+img+`"}]}}}}`)
			}))
			s.waitImage(b, env.FixtureImage, time.Minute) // self-heal undoes the bare patch
			b.StartTimer()
		}
	}
	m, p := median(bg), median(plain)
	b.ReportMetric(m.Seconds(), "breakglass-s")
	b.ReportMetric(p.Seconds(), "kubectl-patch-s")
	b.ReportMetric(m.Seconds()/p.Seconds(), "ratio(goal<=2)")
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
}
