package controller

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

// client-go's request metrics and the work queues', named and labelled as
// the Kubernetes components name them. client-go takes them once per
// process (metrics.Register, workqueue.SetProvider), so there is one set,
// which every Metrics' registry serves.
var (
	// The buckets are the Kubernetes components': from 5ms to a minute
	// for a request, from 10ns to 10s for the queue.
	requestBuckets = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}
	queueBuckets   = prometheus.ExponentialBuckets(10e-9, 10, 10)

	requestLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "Request latency in seconds. Broken down by verb, and host.",
		Buckets: requestBuckets,
	}, []string{"verb", "host"})
	rateLimiterLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_rate_limiter_duration_seconds",
		Help:    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
		Buckets: requestBuckets,
	}, []string{"verb", "host"})
	requestResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Number of HTTP requests, partitioned by status code, method, and host.",
	}, []string{"code", "method", "host"})

	queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "workqueue_depth",
		Help: "Current depth of workqueue",
	}, []string{"name"})
	queueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workqueue_adds_total",
		Help: "Total number of adds handled by workqueue",
	}, []string{"name"})
	queueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "workqueue_queue_duration_seconds",
		Help:    "How long in seconds an item stays in workqueue before being requested.",
		Buckets: queueBuckets,
	}, []string{"name"})
	workDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "workqueue_work_duration_seconds",
		Help:    "How long in seconds processing an item from workqueue takes.",
		Buckets: queueBuckets,
	}, []string{"name"})
	unfinishedWork = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "workqueue_unfinished_work_seconds",
		Help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration. " +
			"Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
	}, []string{"name"})
	longestRunning = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "workqueue_longest_running_processor_seconds",
		Help: "How many seconds has the longest running processor for workqueue been running.",
	}, []string{"name"})
	queueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workqueue_retries_total",
		Help: "Total number of retries handled by workqueue",
	}, []string{"name"})

	clientGoCollectors = []prometheus.Collector{requestLatency, rateLimiterLatency, requestResults,
		queueDepth, queueAdds, queueLatency, workDuration, unfinishedWork, longestRunning, queueRetries}

	instrumented sync.Once
)

// instrumentClientGo has client-go count into the metrics above, once.
func instrumentClientGo() {
	instrumented.Do(func() {
		metrics.Register(metrics.RegisterOpts{
			RequestLatency:     latency{requestLatency},
			RateLimiterLatency: latency{rateLimiterLatency},
			RequestResult:      results{requestResults},
		})
		workqueue.SetProvider(queueMetrics{})
	})
}

// latency observes client-go's request latencies by verb and host.
type latency struct{ *prometheus.HistogramVec }

func (l latency) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	l.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

// results counts client-go's requests by status code, method and host.
type results struct{ *prometheus.CounterVec }

func (r results) Increment(_ context.Context, code, method, host string) {
	r.WithLabelValues(code, method, host).Inc()
}

// queueMetrics gives each named work queue its series of the metrics above.
type queueMetrics struct{}

func (queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return queueDepth.WithLabelValues(name)
}

func (queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return queueAdds.WithLabelValues(name)
}

func (queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return queueLatency.WithLabelValues(name)
}

func (queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return workDuration.WithLabelValues(name)
}

func (queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return unfinishedWork.WithLabelValues(name)
}

func (queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return longestRunning.WithLabelValues(name)
}

func (queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return queueRetries.WithLabelValues(name)
}
