package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// BenchmarkMirrorLag writes a burst of 1,000 records into the audit log
// while the controller mirrors it to the environment's S3 server (Object
// Lock on), and times each record from its append to its object in the
// mirror: the 99th percentile (goal: at most 5 s behind), and the
// controller's resident memory afterwards (it holds the mirror's newest
// sequence number, not the mirror).
func BenchmarkMirrorLag(b *testing.B) {
	const burst = 1000
	s := newStage(b, env.Options{})
	ctx := context.Background()
	server, err := s.e.S3(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := server.CreateBucket(ctx, "bench-mirror", true); err != nil {
		b.Fatal(err)
	}
	for _, kv := range server.Env() {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
	ns := s.e.ArgoNamespace
	address := freeAddress(b)
	controller := exec.Command(s.plugin, "controller", "--app-namespace", ns, "--audit-namespace", ns, "--lease-namespace", ns,
		"--address", address, "--identity", "bench-mirror", "--mirror", "s3://bench-mirror/log", "--mirror-endpoint", server.Endpoint,
		"--mirror-every", "500ms")
	controller.Env = append(os.Environ(), "KUBECONFIG="+s.e.Kubeconfig(env.Admin.Name), "HOME="+b.TempDir())
	if err := controller.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = controller.Process.Signal(syscall.SIGTERM); _ = controller.Wait() })
	for deadline := time.Now().Add(2 * time.Minute); !leading(address); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the controller did not lead within 2m")
		}
	}
	mirror, err := audit.OpenMirror(ctx, audit.MirrorOptions{Location: audit.MirrorLocation{Bucket: "bench-mirror", Prefix: "log/"}, Endpoint: server.Endpoint, PathStyle: true})
	if err != nil {
		b.Fatal(err)
	}
	store := audit.NewConfigMapStore(s.kube, ns)
	seqs, written := make([]uint64, burst), make([]time.Time, burst)
	done := make(chan error, 1)
	go func() {
		for i := range burst {
			r := &audit.Record{Event: audit.EventPlanned, Session: fmt.Sprintf("bench-mirror-%d", i), Reason: "mirror lag",
				Actor: audit.Actor{Username: env.Admin.Name}, Application: &audit.AppRef{Namespace: ns, Name: fmt.Sprintf("bench-%d", i)}}
			if err := store.Append(ctx, r); err != nil {
				done <- err
				return
			}
			seqs[i], written[i] = r.Seq, time.Now()
		}
		done <- nil
	}()
	seen := map[uint64]time.Time{}
	var newest uint64
	appended := false
	for deadline := time.Now().Add(10 * time.Minute); !appended || newest < seqs[burst-1]; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			if err != nil {
				b.Fatal(err)
			}
			appended = true
		default:
		}
		n, err := mirror.Newest(ctx, newest)
		if err != nil {
			b.Fatal(err)
		}
		for seq := newest + 1; seq <= n; seq++ {
			seen[seq] = time.Now()
		}
		newest = n
		if time.Now().After(deadline) {
			b.Fatalf("the mirror reached record %d of %d within 10m", newest, seqs[burst-1])
		}
	}
	lags := make([]time.Duration, burst)
	for i, seq := range seqs {
		lags[i] = max(seen[seq].Sub(written[i]), 0)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	p99 := lags[burst*99/100-1]
	rss := procMemory(fmt.Sprintf("/proc/%d/status", controller.Process.Pid), "VmRSS")
	b.ReportMetric(p99.Seconds(), "mirror-lag-p99-s(goal<=5)")
	b.ReportMetric(float64(rss)/(1<<20), "controller-rss-MiB")
	report("mirror: lag behind a burst of 1,000 records, p99", fmt.Sprintf("%.2f s (median %.2f s)", p99.Seconds(), lags[burst/2].Seconds()), "≤ 5 s", p99 <= 5*time.Second)
	report("mirror: controller resident memory after the burst", fmt.Sprintf("%.0f MiB", float64(rss)/(1<<20)), "", true)
}

// BenchmarkMirrorAtScale has the controller mirror into a bucket that
// already holds 100,000 records and measures its resident memory once it
// has found the mirror's newest: it finds it by probing (exponential, then
// binary search), never by listing, and holds only that number.
func BenchmarkMirrorAtScale(b *testing.B) {
	const records = 100_000
	s := newStage(b, env.Options{})
	ctx := context.Background()
	server, err := s.e.S3(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := server.CreateBucket(ctx, "bench-scale", true); err != nil {
		b.Fatal(err)
	}
	for _, kv := range server.Env() {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
	mirror, err := audit.OpenMirror(ctx, audit.MirrorOptions{Location: audit.MirrorLocation{Bucket: "bench-scale", Prefix: "log/"}, Endpoint: server.Endpoint, PathStyle: true})
	if err != nil {
		b.Fatal(err)
	}
	// The objects' bodies are never read by the controller: a record's
	// shape is enough. Sixteen writers at once.
	start := time.Now()
	seqs := make(chan uint64)
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			for seq := range seqs {
				if err := mirror.PutRecord(ctx, seq, []byte(fmt.Sprintf(`{"seq":%d}`, seq)), env.Admin.Name); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for seq := uint64(1); seq <= records; seq++ {
		seqs <- seq
	}
	close(seqs)
	for range 16 {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("seeded %d mirror objects in %s", records, time.Since(start).Round(time.Second))
	ns := s.e.ArgoNamespace
	address := freeAddress(b)
	controller := exec.Command(s.plugin, "controller", "--app-namespace", ns, "--audit-namespace", ns, "--lease-namespace", ns,
		"--address", address, "--identity", "bench-scale", "--mirror", "s3://bench-scale/log", "--mirror-endpoint", server.Endpoint,
		"--mirror-every", "500ms")
	controller.Env = append(os.Environ(), "KUBECONFIG="+s.e.Kubeconfig(env.Admin.Name), "HOME="+b.TempDir())
	if err := controller.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = controller.Process.Signal(syscall.SIGTERM); _ = controller.Wait() })
	for deadline := time.Now().Add(2 * time.Minute); metricValue(address, "kubectl_gitops_mirror_newest_record") != records; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the controller did not find the mirror's newest record %d within 2m (it says %v)", records, metricValue(address, "kubectl_gitops_mirror_newest_record"))
		}
	}
	time.Sleep(5 * time.Second) // ten passes more
	rss := procMemory(fmt.Sprintf("/proc/%d/status", controller.Process.Pid), "VmRSS")
	b.ReportMetric(float64(rss)/(1<<20), "controller-rss-MiB")
	report("mirror: controller resident memory over a 100,000-record mirror", fmt.Sprintf("%.0f MiB", float64(rss)/(1<<20)), "≤ 100 MiB", rss <= 100<<20)
}

// metricValue is the value of an unlabelled metric on the controller's
// /metrics at address, -1 when it cannot be read.
func metricValue(address, name string) float64 {
	resp, err := http.Get("http://" + address + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
