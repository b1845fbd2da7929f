package controller

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// openMetricsAccept is the Accept header of a Prometheus server that
// prefers OpenMetrics.
const openMetricsAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

// scrape is a scrape of h asking for accept: the response's content type
// and body.
func scrape(t *testing.T, h http.Handler, accept string) (string, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", accept)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Header().Get("Content-Type"), rec.Body.String()
}

// scrapeText is a scrape of h in Prometheus' text format, parsed.
func scrapeText(t *testing.T, h http.Handler) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	contentType, body := scrape(t, h, "text/plain")
	if !strings.HasPrefix(contentType, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %s, want Prometheus' text format", contentType)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	return body, families
}

// sample is the value of the sample of family name with labels (a
// histogram's count), and whether there is one.
func sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, m := range families[name].GetMetric() {
		matches := 0
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
				matches++
			}
		}
		if matches != len(labels) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		default:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsSayWhatExists: the open sessions come from the informer's
// cache, each with its age and whether it expired; the counters count;
// the names, types and labels are those dashboards know, in Prometheus'
// text format and in OpenMetrics, beside the Go runtime's and the
// process's.
func TestMetricsSayWhatExists(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	opened := time.Now().Add(-90 * time.Second).UTC().Truncate(time.Second)
	add := func(name, session string) {
		app := &unstructured.Unstructured{Object: map[string]any{}}
		app.SetNamespace("argocd")
		app.SetName(name)
		if session != "" {
			app.SetAnnotations(map[string]string{breakglass.SessionAnnotation: session})
		}
		if err := store.Add(app); err != nil {
			t.Fatal(err)
		}
	}
	add("web", `{"id":"s1","openedAt":"`+opened.Format(time.RFC3339)+`","autoRestore":true,"expires":"2000-01-01T00:00:00Z"}`)
	add("api", "")
	m := NewMetrics()
	m.now = func() time.Time { return opened.Add(90 * time.Second) }
	m.watch(store)
	m.setLeader(true)
	m.countAutoRestore()
	m.countNotice(audit.EventExpired)
	m.countError()
	text, families := scrapeText(t, m)
	contentType, openMetrics := scrape(t, m, openMetricsAccept)
	if !strings.HasPrefix(contentType, "application/openmetrics-text; version=1.0.0") || !strings.HasSuffix(openMetrics, "\n# EOF\n") {
		t.Errorf("asked for OpenMetrics, got %s:\n%s", contentType, openMetrics)
	}
	web := map[string]string{"namespace": "argocd", "application": "web"}
	for _, want := range []struct {
		name   string
		kind   dto.MetricType
		labels map[string]string
		value  int
	}{
		{"kubectl_gitops_leader", dto.MetricType_GAUGE, nil, 1},
		{"kubectl_gitops_open_sessions", dto.MetricType_GAUGE, map[string]string{"namespace": "argocd", "application": "web", "auto_restore": "true"}, 1},
		{"kubectl_gitops_session_age_seconds", dto.MetricType_GAUGE, web, 90},
		{"kubectl_gitops_session_expired", dto.MetricType_GAUGE, web, 1},
		{"kubectl_gitops_auto_restores_total", dto.MetricType_COUNTER, nil, 1},
		{"kubectl_gitops_expired_total", dto.MetricType_COUNTER, nil, 1},
		{"kubectl_gitops_sync_reenabled_total", dto.MetricType_COUNTER, nil, 0},
		{"kubectl_gitops_retargeted_total", dto.MetricType_COUNTER, nil, 0},
		{"kubectl_gitops_reverted_total", dto.MetricType_COUNTER, nil, 0},
		{"kubectl_gitops_orphaned_pauses_total", dto.MetricType_COUNTER, nil, 0},
		{"kubectl_gitops_controller_errors_total", dto.MetricType_COUNTER, nil, 1},
	} {
		if kind := families[want.name].GetType(); kind != want.kind {
			t.Errorf("%s is a %s, want a %s", want.name, kind, want.kind)
		}
		if v, ok := sample(families, want.name, want.labels); !ok || v != float64(want.value) {
			t.Errorf("%s%v = %v (%t), want %d:\n%s", want.name, want.labels, v, ok, want.value, text)
		}
		// OpenMetrics names a counter's family without its _total, and
		// writes its labels sorted.
		family := want.name
		if want.kind == dto.MetricType_COUNTER {
			family = strings.TrimSuffix(family, "_total")
		}
		var labels []string
		for k, v := range want.labels {
			labels = append(labels, k+"="+strconv.Quote(v))
		}
		sort.Strings(labels)
		series := want.name
		if len(labels) > 0 {
			series += "{" + strings.Join(labels, ",") + "}"
		}
		for _, line := range []string{"# TYPE " + family + " " + strings.ToLower(want.kind.String()), fmt.Sprintf("%s %d.0", series, want.value)} {
			if !strings.Contains(openMetrics, "\n"+line+"\n") {
				t.Errorf("OpenMetrics lacks %q:\n%s", line, openMetrics)
			}
		}
	}
	if strings.Contains(text, `application="api"`) || strings.Contains(openMetrics, `application="api"`) {
		t.Errorf("an Application without a session is counted:\n%s", text)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes", "process_start_time_seconds"} {
		if _, ok := families[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	var none *Metrics
	none.countError() // a nil Metrics counts nothing, and does not panic
}

// TestMetricsCountClientGo: client-go's requests, by code, method and
// host, and the named work queues are counted, however many Metrics the
// process makes (client-go takes its metrics once per process).
func TestMetricsCountClientGo(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"31","gitVersion":"v1.31.2"}`))
	}))
	defer api.Close()
	first, second := NewMetrics(), NewMetrics()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "test"})
	defer queue.ShutDown()
	queue.Add("argocd/web")
	queue.AddRateLimited("argocd/api")
	host, _ := url.Parse(api.URL)
	for _, m := range []*Metrics{first, second} {
		body, families := scrapeText(t, m)
		for _, want := range []struct {
			name   string
			labels map[string]string
		}{
			{"rest_client_requests_total", map[string]string{"code": "200", "method": "GET", "host": host.Host}},
			{"rest_client_request_duration_seconds", map[string]string{"verb": "GET", "host": host.Host}},
			{"rest_client_rate_limiter_duration_seconds", map[string]string{"verb": "GET", "host": host.Host}},
			{"workqueue_adds_total", map[string]string{"name": "test"}},
			{"workqueue_depth", map[string]string{"name": "test"}},
			{"workqueue_retries_total", map[string]string{"name": "test"}},
		} {
			if v, ok := sample(families, want.name, want.labels); !ok || v < 1 {
				t.Errorf("%s%v = %v (%t), want 1 or more:\n%s", want.name, want.labels, v, ok, body)
			}
		}
		for _, name := range []string{"workqueue_queue_duration_seconds", "workqueue_work_duration_seconds", "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"} {
			if _, ok := sample(families, name, map[string]string{"name": "test"}); !ok {
				t.Errorf("no %s{name=\"test\"}", name)
			}
		}
	}
}

// TestMirrorMetrics: without a mirror none of its metrics is served;
// with one, the backlog and the age of its oldest record, counted to the
// scrape, and whether the bucket is write-once.
func TestMirrorMetrics(t *testing.T) {
	m := NewMetrics()
	if body, _ := scrapeText(t, m); strings.Contains(body, "kubectl_gitops_mirror_") {
		t.Fatalf("mirror metrics without a mirror:\n%s", body)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return now }
	m.SetMirror(false)
	m.setMirror(40, 3, now.Add(-90*time.Second))
	m.countMirrorError()
	body, _ := scrapeText(t, m)
	for _, want := range []string{
		"kubectl_gitops_mirror_write_once 0\n",
		"kubectl_gitops_mirror_newest_record 40\n",
		"kubectl_gitops_mirror_backlog_records 3\n",
		"kubectl_gitops_mirror_oldest_unmirrored_age_seconds 90\n",
		"kubectl_gitops_mirror_errors_total 1\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	m.setMirror(43, 0, time.Time{})
	if body, _ := scrapeText(t, m); !strings.Contains(body, "kubectl_gitops_mirror_oldest_unmirrored_age_seconds 0\n") {
		t.Errorf("a caught-up mirror's oldest age is not 0:\n%s", body)
	}
}
