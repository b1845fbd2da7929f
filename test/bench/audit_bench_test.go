package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// BenchmarkAuditAtScale times `kubectl gitops audit verify` and `audit log
// -o jsonl` (the export) over 10,000 and then 100,000 records, against
// listing the same ConfigMaps with `kubectl get -o json`, median of 3 each,
// and the most memory each command held (goals: verify at most 2 times the
// listing at both sizes; verify's memory at 100,000 records at most 1.5
// times its memory at 10,000: the log is read a page at a time).
func BenchmarkAuditAtScale(b *testing.B) {
	e, err := env.Start(context.Background(), env.Options{KubeOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Stop()
	ns := "default"
	plugin := buildPlugin(b)
	kubeconfig := e.Kubeconfig(env.Admin.Name)
	config, err := e.RESTConfig(env.Admin.Name)
	if err != nil {
		b.Fatal(err)
	}
	config.QPS, config.Burst = 1000, 2000
	kube := kubernetes.NewForConfigOrDie(config)

	verify := func() int64 {
		return mustRSS(b, exec.Command(plugin, "--kubeconfig", kubeconfig, "audit", "verify", "--audit-namespace", ns))
	}
	export := func() int64 {
		return mustRSS(b, exec.Command(plugin, "--kubeconfig", kubeconfig, "audit", "log", "-o", "jsonl", "--audit-namespace", ns))
	}
	list := func() int64 {
		return mustRSS(b, exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", ns, "get", "cm", "-l", audit.RecordSelector, "-o", "json"))
	}
	tip := audit.HeadState{}
	rss := map[int]int64{}
	for _, size := range []int{10000, 100000} {
		tip = seedChain(b, kube, ns, tip, size)
		var verifyTimes, exportTimes, listTimes []time.Duration
		var verifyRSS int64
		verify() // warm the API server's caches for all three
		for run := 0; run < 3; run++ {
			verifyTimes = append(verifyTimes, timed(func() { verifyRSS = max(verifyRSS, verify()) }))
			exportTimes = append(exportTimes, timed(func() { export() }))
			listTimes = append(listTimes, timed(func() { list() }))
		}
		rss[size] = verifyRSS
		v, x, l := median(verifyTimes), median(exportTimes), median(listTimes)
		n := fmt.Sprintf("%dk records", size/1000)
		b.ReportMetric(v.Seconds(), fmt.Sprintf("verify-%dk-s", size/1000))
		report("audit verify, "+n, seconds(v), "", false)
		report("audit log -o jsonl, "+n, seconds(x), "", false)
		report("kubectl get cm -o json, "+n, seconds(l), "", false)
		report("audit verify, "+n+": ratio to kubectl get", fmt.Sprintf("%.2f", v.Seconds()/l.Seconds()), "<= 2", v.Seconds() <= 2*l.Seconds())
		report("audit log -o jsonl, "+n+": ratio to kubectl get", fmt.Sprintf("%.2f", x.Seconds()/l.Seconds()), "", false)
		report("audit verify, "+n+": memory (max RSS)", fmt.Sprintf("%d MiB", verifyRSS>>20), "", false)
	}
	ratio := float64(rss[100000]) / float64(rss[10000])
	report("audit verify memory, 100k / 10k records", fmt.Sprintf("%.2f", ratio), "<= 1.5", ratio <= 1.5)
}

// mustRSS runs cmd, discarding its output, and returns the most memory it
// held: its VmHWM, read from /proc while it runs. (The rusage a wait
// returns will not do: a child started by vfork inherits this process's
// high-water mark, which the seeding has made large.)
func mustRSS(b *testing.B, cmd *exec.Cmd) int64 {
	b.Helper()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = nil, &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	var peak int64
	for {
		select {
		case err := <-done:
			if err != nil {
				b.Fatalf("%v: %v: %s", cmd.Args, err, stderr.String())
			}
			return peak
		case <-time.After(20 * time.Millisecond):
			if kb := procMemory(status, "VmHWM"); kb > peak {
				peak = kb
			}
		}
	}
}

// procMemory reads a memory line of a /proc status file (VmHWM, VmRSS),
// in bytes (0 when it cannot).
func procMemory(path, field string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// seedChain extends the chain after tip to size records quickly: sealed in
// this process, created as ConfigMaps by several workers, and one more
// appended through the real store, which also writes the head. It returns
// the new tip.
func seedChain(b *testing.B, kube kubernetes.Interface, ns string, tip audit.HeadState, size int) audit.HeadState {
	b.Helper()
	ctx := context.Background()
	work := make(chan int)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	type sealed struct {
		rec *audit.Record
		doc []byte
	}
	from := int(tip.Seq) + 1
	recs := make([]sealed, size-from) // the last position is the store's append
	prev := tip.Hash
	for i := range recs {
		r := seededRecord(from, i, len(recs))
		doc, err := audit.Seal(r, uint64(from+i), prev)
		if err != nil {
			b.Fatal(err)
		}
		recs[i], prev = sealed{r, doc}, r.Hash
	}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, audit.RecordConfigMap(ns, recs[i].rec, recs[i].doc), metav1.CreateOptions{}); err != nil {
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
	store := audit.NewConfigMapStore(kube, ns)
	last := &audit.Record{Event: audit.EventRestored, Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
	if err := store.Append(ctx, last); err != nil {
		b.Fatal(err)
	}
	if last.Seq != uint64(size) {
		b.Fatalf("seeded up to record %d, want %d", last.Seq, size)
	}
	fmt.Fprintf(os.Stderr, "seeded %d audit records\n", size)
	return audit.HeadState{Seq: last.Seq, Hash: last.Hash}
}

// seededRecord is record i of n seeded after position from, as honest
// runs write them: whole sessions of four records (planned, paused,
// patched, restored) one after the other, each on Application web; the
// n%4 records left over are ticket work outside any session. verify walks
// them through the session state machine, as it walks a real log.
func seededRecord(from, i, n int) *audit.Record {
	actor := audit.Actor{Username: "oncall", Groups: []string{"oncall"}}
	app := &audit.AppRef{Namespace: "argocd", Name: "web"}
	target := &audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}
	done := audit.Outcome{Status: audit.StatusSucceeded}
	if i >= n-n%4 {
		return &audit.Record{Event: audit.EventFailed, Actor: actor, Outcome: audit.Outcome{Status: audit.StatusFailed, Error: "Jira unreachable"}}
	}
	r := &audit.Record{Session: fmt.Sprintf("bench-%d-%d", from, i/4), Actor: actor, Application: app, Outcome: done}
	switch i % 4 {
	case 0:
		r.Event, r.Reason, r.Target = audit.EventPlanned, "benchmark session", target
		r.Outcome = audit.Outcome{Status: audit.StatusStarted}
	case 1:
		r.Event = audit.EventPaused
	case 2:
		r.Event, r.Target = audit.EventPatched, target
		r.Patch = &audit.Patch{Type: "strategic", Body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example/web:1.2.3"}]}}}}`}
		r.Changes = []audit.Change{{Path: "/spec/template/spec/containers/web/image", Before: "registry.example/web:1.2.4", After: "registry.example/web:1.2.3"}}
	case 3:
		r.Event, r.Reason = audit.EventRestored, "Git has the fix"
	}
	return r
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
