package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// BenchmarkStatusAtScale times `kubectl gitops status -A` with 1,000
// Applications, 50 of them with an open session, against `kubectl get
// applications -A -o json` on the same server, median of 3 each (goal:
// at most 1.5 times the listing).
func BenchmarkStatusAtScale(b *testing.B) {
	const apps, sessions = 1000, 50
	s := newStage(b, env.Options{})
	ctx := context.Background()
	head, err := s.e.Git.Head()
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				app := s.e.Application(fmt.Sprintf("scale-%04d", i), env.FixtureApp, env.DemoNamespace, nil)
				if i < sessions {
					session, _ := json.Marshal(map[string]any{
						"id": fmt.Sprintf("20261203-000000-s%04d", i), "state": "patched", "openedBy": "bench", "openedAt": time.Now().UTC(),
						"reason": "bench", "savedSyncPolicy": nil, "gitRevision": head,
						"patches": []any{map[string]any{"target": map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": env.DemoNamespace, "name": "web"},
							"type": "strategic", "fields": []any{}, "at": time.Now().UTC(), "argoSawPatch": true}},
					})
					app.SetAnnotations(map[string]string{breakglass.SessionAnnotation: string(session)})
				}
				if _, err := s.apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := 0; i < apps; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	// Let the controller compare every Application once before measuring.
	deadline := time.Now().Add(15 * time.Minute)
	for {
		list, err := s.apps.List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		compared := 0
		for _, a := range list.Items {
			if st, _, _ := unstructured.NestedString(a.Object, "status", "sync", "status"); st != "" {
				compared++
			}
		}
		if compared >= apps || time.Now().After(deadline) {
			b.Logf("%d of %d Applications compared by the controller", compared, len(list.Items))
			break
		}
		time.Sleep(2 * time.Second)
	}
	kubeconfig := s.e.Kubeconfig(env.Admin.Name)
	status := func() {
		out, err := exec.Command(s.plugin, "--kubeconfig", kubeconfig, "status", "-A", "-o", "json").Output()
		var sts []any
		if err != nil || json.Unmarshal(out, &sts) != nil || len(sts) != sessions {
			b.Fatalf("status -A: %v, %d sessions (want %d)", err, len(sts), sessions)
		}
	}
	list := func() {
		cmd := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "applications", "-A", "-o", "json")
		cmd.Stdout, cmd.Stderr = nil, os.Stderr
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
	var statusTimes, listTimes []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for run := 0; run < 3; run++ {
			statusTimes = append(statusTimes, timed(status))
			listTimes = append(listTimes, timed(list))
		}
	}
	b.StopTimer()
	st, l := median(statusTimes), median(listTimes)
	b.ReportMetric(st.Seconds(), "status-A-s")
	b.ReportMetric(l.Seconds(), "kubectl-get-s")
	report("status -A, 1000 Applications, 50 sessions", seconds(st), "", false)
	report("status -A: ratio to kubectl get applications -A", fmt.Sprintf("%.2f", st.Seconds()/l.Seconds()), "<= 1.5", st.Seconds() <= 1.5*l.Seconds())
}
