package controller

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// Metrics is what /metrics serves, in Prometheus' text format: the open
// sessions by Application with their age and whether they expired, the
// sessions restored with no person, controller errors, and whether this
// replica leads. Its methods do nothing on a nil Metrics.
type Metrics struct {
	mu           sync.Mutex
	leader       bool
	autoRestores int
	errors       int
	notices      map[audit.Event]int
	// store is the leader's informer cache, which the session gauges are
	// read from when scraped; nil while this replica does not lead.
	store cache.Store
}

type sessionMetric struct {
	namespace, name string
	opened          time.Time
	expired, auto   bool
}

// Leader is whether this replica holds the lease.
func (m *Metrics) Leader() (leader bool) {
	m.with(func() { leader = m.leader })
	return leader
}

// with runs change under the lock; on a nil Metrics it does nothing.
func (m *Metrics) with(change func()) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	change()
}

func (m *Metrics) setLeader(on bool) { m.with(func() { m.leader = on }) }

func (m *Metrics) countAutoRestore() { m.with(func() { m.autoRestores++ }) }

func (m *Metrics) countError() { m.with(func() { m.errors++ }) }

func (m *Metrics) countNotice(event audit.Event) {
	m.with(func() {
		if m.notices == nil {
			m.notices = map[audit.Event]int{}
		}
		m.notices[event]++
	})
}

// watch has the session gauges read from store, the informer's cache,
// at each scrape: a gauge, not a decision (decisions come from the log),
// and no work at all between scrapes.
func (m *Metrics) watch(store cache.Store) { m.with(func() { m.store = store }) }

// sessions are the open sessions store holds at now, as their annotations
// say, by namespace and name.
func sessions(store cache.Store, now time.Time) []sessionMetric {
	if store == nil {
		return nil
	}
	var out []sessionMetric
	for _, obj := range store.List() {
		app, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		s, err := breakglass.ParseSession(app.GetAnnotations()[breakglass.SessionAnnotation])
		if err != nil {
			continue
		}
		out = append(out, sessionMetric{namespace: app.GetNamespace(), name: app.GetName(), opened: s.OpenedAt, expired: s.Expired(now), auto: s.AutoRestore})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].namespace+"/"+out[i].name < out[j].namespace+"/"+out[j].name })
	return out
}

// ServeHTTP writes the metrics.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.write(w, time.Now())
}

func (m *Metrics) write(w io.Writer, now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	open := sessions(m.store, now)
	bit := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	fmt.Fprintln(w, "# HELP kubectl_gitops_leader Whether this replica holds the lease and acts.")
	fmt.Fprintln(w, "# TYPE kubectl_gitops_leader gauge")
	fmt.Fprintf(w, "kubectl_gitops_leader %d\n", bit(m.leader))
	fmt.Fprintln(w, "# HELP kubectl_gitops_open_sessions Open break-glass sessions, by Application.")
	fmt.Fprintln(w, "# TYPE kubectl_gitops_open_sessions gauge")
	for _, s := range open {
		fmt.Fprintf(w, "kubectl_gitops_open_sessions{namespace=%q,application=%q,auto_restore=\"%t\"} 1\n", s.namespace, s.name, s.auto)
	}
	fmt.Fprintln(w, "# HELP kubectl_gitops_session_age_seconds How long each open session has been open.")
	fmt.Fprintln(w, "# TYPE kubectl_gitops_session_age_seconds gauge")
	for _, s := range open {
		fmt.Fprintf(w, "kubectl_gitops_session_age_seconds{namespace=%q,application=%q} %d\n", s.namespace, s.name, int(now.Sub(s.opened).Seconds()))
	}
	fmt.Fprintln(w, "# HELP kubectl_gitops_session_expired Whether each open session's pause has expired.")
	fmt.Fprintln(w, "# TYPE kubectl_gitops_session_expired gauge")
	for _, s := range open {
		fmt.Fprintf(w, "kubectl_gitops_session_expired{namespace=%q,application=%q} %d\n", s.namespace, s.name, bit(s.expired))
	}
	fmt.Fprintln(w, "# HELP kubectl_gitops_auto_restores_total Sessions this replica restored with no person.")
	fmt.Fprintln(w, "# TYPE kubectl_gitops_auto_restores_total counter")
	fmt.Fprintf(w, "kubectl_gitops_auto_restores_total %d\n", m.autoRestores)
	fmt.Fprintln(w, "# HELP kubectl_gitops_expired_total Sessions this replica found expired with Git behind (breakglass.expired).")
	fmt.Fprintln(w, "# TYPE kubectl_gitops_expired_total counter")
	fmt.Fprintf(w, "kubectl_gitops_expired_total %d\n", m.notices[audit.EventExpired])
	fmt.Fprintln(w, "# HELP kubectl_gitops_sync_reenabled_total Sessions this replica found with sync turned back on behind them (breakglass.reenabled).")
	fmt.Fprintln(w, "# TYPE kubectl_gitops_sync_reenabled_total counter")
	fmt.Fprintf(w, "kubectl_gitops_sync_reenabled_total %d\n", m.notices[audit.EventReenabled])
	fmt.Fprintln(w, "# HELP kubectl_gitops_retargeted_total Sessions this replica found repointed behind them (breakglass.retargeted).")
	fmt.Fprintln(w, "# TYPE kubectl_gitops_retargeted_total counter")
	fmt.Fprintf(w, "kubectl_gitops_retargeted_total %d\n", m.notices[audit.EventRetargeted])
	fmt.Fprintln(w, "# HELP kubectl_gitops_reverted_total Sessions this replica found with their live fix reverted (breakglass.reverted).")
	fmt.Fprintln(w, "# TYPE kubectl_gitops_reverted_total counter")
	fmt.Fprintf(w, "kubectl_gitops_reverted_total %d\n", m.notices[audit.EventReverted])
	fmt.Fprintln(w, "# HELP kubectl_gitops_orphaned_pauses_total Applications this replica found paused with a paused-by mark no open session accounts for (breakglass.orphaned).")
	fmt.Fprintln(w, "# TYPE kubectl_gitops_orphaned_pauses_total counter")
	fmt.Fprintf(w, "kubectl_gitops_orphaned_pauses_total %d\n", m.notices[audit.EventOrphaned])
	fmt.Fprintln(w, "# HELP kubectl_gitops_controller_errors_total Reconciles that failed (retried with backoff).")
	fmt.Fprintln(w, "# TYPE kubectl_gitops_controller_errors_total counter")
	fmt.Fprintf(w, "kubectl_gitops_controller_errors_total %d\n", m.errors)
}
