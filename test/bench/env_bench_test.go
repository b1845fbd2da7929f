// Package bench holds the benchmarks `make bench` prints. Timing goals live
// here, never in tests.
package bench

import (
	"context"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// BenchmarkEnvironmentStartup measures how long the full test environment
// (etcd, kube-apiserver, Argo CD CRDs, redis, repo-server, controller, API
// server) takes from nothing to ready.
func BenchmarkEnvironmentStartup(b *testing.B) {
	if _, err := env.FindBinaries(true); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		e, err := env.Start(context.Background(), env.Options{})
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		e.Stop()
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s-to-ready/op")
	report("test environment: start to ready", seconds(total/time.Duration(b.N)), "", false)
}
