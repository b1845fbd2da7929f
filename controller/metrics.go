package controller

import (
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// Metrics is what /metrics serves, in Prometheus' text format or
// OpenMetrics as the scraper asks: the open sessions by Application with
// their age and whether they expired, the sessions restored with no
// person, controller errors, and whether this replica leads; beside them
// the Go runtime's and the process's, client-go's requests' and the work
// queue's (see NewMetrics). Its counting methods do nothing on a nil
// Metrics.
type Metrics struct {
	mu           sync.Mutex
	leader       bool
	autoRestores int
	errors       int
	notices      map[audit.Event]int
	// proposals counts the controller's proposals by outcome: proposed,
	// failed (tried again), given-up.
	proposals map[string]int
	// mirror is the mirror's state; nil without one.
	mirror *mirrorMetric
	// store is the leader's informer cache, which the session gauges are
	// read from when scraped; nil while this replica does not lead.
	store cache.Store
	// now is the scrape's time (nil: time.Now), which session ages are
	// counted to.
	now     func() time.Time
	handler http.Handler
}

// NewMetrics returns the controller's metrics, served from a registry of
// their own. The first call has client-go count its requests and the work
// queues' metrics into this process (client-go takes those once per
// process), so make it before the clients are used.
func NewMetrics() *Metrics {
	instrumentClientGo()
	m := &Metrics{}
	registry := prometheus.NewRegistry()
	registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		sessionCollector{m},
	)
	registry.MustRegister(clientGoCollectors...)
	m.handler = promhttp.HandlerFor(registry, promhttp.HandlerOpts{EnableOpenMetrics: true})
	return m
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

func (m *Metrics) countProposal(outcome string) {
	m.with(func() {
		if m.proposals == nil {
			m.proposals = map[string]int{}
		}
		m.proposals[outcome]++
	})
}

func (m *Metrics) countNotice(event audit.Event) {
	m.with(func() {
		if m.notices == nil {
			m.notices = map[audit.Event]int{}
		}
		m.notices[event]++
	})
}

// mirrorMetric is where the mirror stands, as the leader last saw it.
type mirrorMetric struct {
	writeOnce       bool
	newest, backlog uint64
	// oldest is when the oldest record not yet mirrored was created
	// (zero: none waits).
	oldest time.Time
	errors int
	// pruned is the last record pruned from the cluster (0: none).
	pruned uint64
}

// SetMirror says a mirror is configured, and whether the bucket is
// write-once (versioning and Object Lock) or was accepted without.
func (m *Metrics) SetMirror(writeOnce bool) {
	m.with(func() { m.mirror = &mirrorMetric{writeOnce: writeOnce} })
}

func (m *Metrics) setMirror(newest, backlog uint64, oldest time.Time) {
	m.with(func() {
		if m.mirror != nil {
			m.mirror.newest, m.mirror.backlog, m.mirror.oldest = newest, backlog, oldest
		}
	})
}

func (m *Metrics) setPruned(through uint64) {
	m.with(func() {
		if m.mirror != nil {
			m.mirror.pruned = through
		}
	})
}

func (m *Metrics) countMirrorError() {
	m.with(func() {
		if m.mirror != nil {
			m.mirror.errors++
		}
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
		s, err := breakglass.SessionOf(app)
		if err != nil {
			continue
		}
		out = append(out, sessionMetric{namespace: app.GetNamespace(), name: app.GetName(), opened: s.OpenedAt, expired: s.Expired(now), auto: s.AutoRestore})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].namespace+"/"+out[i].name < out[j].namespace+"/"+out[j].name })
	return out
}

// ServeHTTP serves the metrics of a Metrics made by NewMetrics, in the
// format the request accepts.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

// The controller's own metrics. Their names, types and labels are what
// dashboards and the README know: keep them.
var (
	leaderDesc = prometheus.NewDesc("kubectl_gitops_leader", "Whether this replica holds the lease and acts.", nil, nil)
	openDesc   = prometheus.NewDesc("kubectl_gitops_open_sessions", "Open break-glass sessions, by Application.",
		[]string{"namespace", "application", "auto_restore"}, nil)
	ageDesc = prometheus.NewDesc("kubectl_gitops_session_age_seconds", "How long each open session has been open.",
		[]string{"namespace", "application"}, nil)
	expiredDesc = prometheus.NewDesc("kubectl_gitops_session_expired", "Whether each open session's pause has expired.",
		[]string{"namespace", "application"}, nil)
	autoRestoresDesc = prometheus.NewDesc("kubectl_gitops_auto_restores_total", "Sessions this replica restored with no person.", nil, nil)
	errorsDesc       = prometheus.NewDesc("kubectl_gitops_controller_errors_total", "Reconciles that failed (retried with backoff).", nil, nil)
	proposalsDesc    = prometheus.NewDesc("kubectl_gitops_proposals_total", "The fixes of sessions marked --propose this replica proposed in Git, by outcome: proposed, failed (tried again), given-up.", []string{"outcome"}, nil)
	// noticeDescs count the notices this replica recorded, by event.
	noticeDescs = []struct {
		event audit.Event
		desc  *prometheus.Desc
	}{
		{audit.EventExpired, prometheus.NewDesc("kubectl_gitops_expired_total", "Sessions this replica found expired with Git behind (breakglass.expired).", nil, nil)},
		{audit.EventReenabled, prometheus.NewDesc("kubectl_gitops_sync_reenabled_total", "Sessions this replica found with sync turned back on behind them (breakglass.reenabled).", nil, nil)},
		{audit.EventRetargeted, prometheus.NewDesc("kubectl_gitops_retargeted_total", "Sessions this replica found repointed behind them (breakglass.retargeted).", nil, nil)},
		{audit.EventReverted, prometheus.NewDesc("kubectl_gitops_reverted_total", "Sessions this replica found with their live fix reverted (breakglass.reverted).", nil, nil)},
		{audit.EventOrphaned, prometheus.NewDesc("kubectl_gitops_orphaned_pauses_total", "Applications this replica found with a paused-by mark or a session annotation no open session of the audit log accounts for (breakglass.orphaned).", nil, nil)},
	}
)

// The mirror's metrics, served only with a mirror (controller --mirror).
var (
	mirrorWriteOnceDesc = prometheus.NewDesc("kubectl_gitops_mirror_write_once", "Whether the mirror's bucket has versioning and Object Lock (0: accepted without, --mirror-accept-unlocked).", nil, nil)
	mirrorNewestDesc    = prometheus.NewDesc("kubectl_gitops_mirror_newest_record", "The newest audit record the mirror holds.", nil, nil)
	mirrorBacklogDesc   = prometheus.NewDesc("kubectl_gitops_mirror_backlog_records", "Audit records in the cluster not yet in the mirror.", nil, nil)
	mirrorOldestDesc    = prometheus.NewDesc("kubectl_gitops_mirror_oldest_unmirrored_age_seconds", "How long the oldest audit record not yet in the mirror has waited (0: none waits).", nil, nil)
	mirrorErrorsDesc    = prometheus.NewDesc("kubectl_gitops_mirror_errors_total", "Mirroring passes that failed (retried).", nil, nil)
	prunedDesc          = prometheus.NewDesc("kubectl_gitops_audit_pruned_through_record", "The last audit record pruned from the cluster, which the mirror holds under lock (0: none; controller --prune-after).", nil, nil)
)

// sessionCollector reads the controller's metrics from its Metrics at
// each scrape.
type sessionCollector struct{ m *Metrics }

func (c sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{leaderDesc, openDesc, ageDesc, expiredDesc, autoRestoresDesc, errorsDesc, proposalsDesc} {
		ch <- d
	}
	for _, n := range noticeDescs {
		ch <- n.desc
	}
	for _, d := range []*prometheus.Desc{mirrorWriteOnceDesc, mirrorNewestDesc, mirrorBacklogDesc, mirrorOldestDesc, mirrorErrorsDesc, prunedDesc} {
		ch <- d
	}
}

func (c sessionCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if m.now != nil {
		now = m.now()
	}
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, bit(m.leader))
	for _, s := range sessions(m.store, now) {
		ch <- prometheus.MustNewConstMetric(openDesc, prometheus.GaugeValue, 1, s.namespace, s.name, strconv.FormatBool(s.auto))
		ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, float64(int(now.Sub(s.opened).Seconds())), s.namespace, s.name)
		ch <- prometheus.MustNewConstMetric(expiredDesc, prometheus.GaugeValue, bit(s.expired), s.namespace, s.name)
	}
	ch <- prometheus.MustNewConstMetric(autoRestoresDesc, prometheus.CounterValue, float64(m.autoRestores))
	for _, n := range noticeDescs {
		ch <- prometheus.MustNewConstMetric(n.desc, prometheus.CounterValue, float64(m.notices[n.event]))
	}
	ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(m.errors))
	for _, outcome := range []string{"proposed", "failed", "given-up"} {
		ch <- prometheus.MustNewConstMetric(proposalsDesc, prometheus.CounterValue, float64(m.proposals[outcome]), outcome)
	}
	if mm := m.mirror; mm != nil {
		age := 0.0
		if !mm.oldest.IsZero() {
			age = float64(int(now.Sub(mm.oldest).Seconds()))
		}
		ch <- prometheus.MustNewConstMetric(mirrorWriteOnceDesc, prometheus.GaugeValue, bit(mm.writeOnce))
		ch <- prometheus.MustNewConstMetric(mirrorNewestDesc, prometheus.GaugeValue, float64(mm.newest))
		ch <- prometheus.MustNewConstMetric(mirrorBacklogDesc, prometheus.GaugeValue, float64(mm.backlog))
		ch <- prometheus.MustNewConstMetric(mirrorOldestDesc, prometheus.GaugeValue, age)
		ch <- prometheus.MustNewConstMetric(mirrorErrorsDesc, prometheus.CounterValue, float64(mm.errors))
		ch <- prometheus.MustNewConstMetric(prunedDesc, prometheus.GaugeValue, float64(mm.pruned))
	}
}
