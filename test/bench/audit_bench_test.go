package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// BenchmarkAuditVerify10k compares `kubectl gitops audit verify` over 10,000
// records with merely listing the same ConfigMaps with kubectl, and reports
// the ratio (goal: at most 2).
func BenchmarkAuditVerify10k(b *testing.B) {
	const records = 10000
	e, err := env.Start(context.Background(), env.Options{KubeOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Stop()
	ns := "default"
	seedChain(b, e, ns, records)

	plugin := buildPlugin(b)
	kubeconfig := e.Kubeconfig(env.Admin.Name)
	verify := func() {
		if out, err := exec.Command(plugin, "--kubeconfig", kubeconfig, "audit", "verify", "--audit-namespace", ns).CombinedOutput(); err != nil {
			b.Fatalf("audit verify: %v: %s", err, out)
		}
	}
	list := func() {
		cmd := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", ns, "get", "cm", "-l", audit.RecordSelector, "-o", "json")
		cmd.Stdout = nil
		if err := cmd.Run(); err != nil {
			b.Fatalf("kubectl get: %v", err)
		}
	}
	verify() // warm the API server's caches for both
	var verifyTimes, listTimes []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		verifyTimes = append(verifyTimes, timed(verify))
		b.StopTimer()
		listTimes = append(listTimes, timed(list))
		b.StartTimer()
	}
	v, l := median(verifyTimes), median(listTimes)
	b.ReportMetric(v.Seconds(), "verify-s")
	b.ReportMetric(l.Seconds(), "kubectl-get-s")
	b.ReportMetric(v.Seconds()/l.Seconds(), "ratio(goal<=2)")
	report("audit verify, 10k records", seconds(v), "", false)
	report("audit verify, 10k records: ratio to kubectl get cm", fmt.Sprintf("%.2f", v.Seconds()/l.Seconds()), "<= 2", v.Seconds() <= 2*l.Seconds())
}

// seedChain writes a valid chain of n records quickly: sealed locally in a
// JSONL file, then created as ConfigMaps by several workers.
func seedChain(b *testing.B, e *env.Env, ns string, n int) {
	b.Helper()
	ctx := context.Background()
	file := &audit.FileStore{Path: filepath.Join(b.TempDir(), "seed.jsonl")}
	for i := 0; i < n; i++ {
		r := &audit.Record{Event: audit.EventPatched, Session: fmt.Sprintf("s-%d", i/4), Actor: audit.Actor{Username: "oncall", Groups: []string{"oncall"}},
			Reason: "benchmark record", Application: &audit.AppRef{Namespace: ns, Name: "web"},
			Target:  &audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"},
			Patch:   &audit.Patch{Type: "strategic", Body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example/web:1.2.3"}]}}}}`},
			Changes: []audit.Change{{Path: "/spec/template/spec/containers/web/image", Before: "registry.example/web:1.2.4", After: "registry.example/web:1.2.3"}},
			Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
		if err := file.Append(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	entries, err := file.Entries(ctx, audit.Filter{})
	if err != nil {
		b.Fatal(err)
	}
	config, err := e.RESTConfig(env.Admin.Name)
	if err != nil {
		b.Fatal(err)
	}
	config.QPS, config.Burst = 1000, 2000
	kube := kubernetes.NewForConfigOrDie(config)
	recs := audit.Records(entries)
	work := make(chan int)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, audit.RecordConfigMap(ns, recs[i], entries[i].Doc), metav1.CreateOptions{}); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		}()
	}
	for i := range recs {
		work <- i
	}
	close(work)
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	// Seal one more record through the real store: it also writes the head.
	store := audit.NewConfigMapStore(kube, ns)
	if err := store.Append(ctx, &audit.Record{Event: audit.EventRestored, Outcome: audit.Outcome{Status: audit.StatusSucceeded}}); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "seeded %d audit records\n", n+1)
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
