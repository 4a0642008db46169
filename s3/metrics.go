package s3

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the endpoint's Prometheus figures: requests answered and
// how long they took, by S3 operation and HTTP status.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics returns the endpoint's metrics, registered with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"operation", "status"}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "stratafs", Subsystem: "s3", Name: "requests_total",
			Help: "S3 requests answered, by operation and HTTP status.",
		}, labels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "stratafs", Subsystem: "s3", Name: "request_duration_seconds",
			Help: "Time from a request's arrival to the end of its response, by operation and HTTP status.",
			// 1 ms to about a minute: from a HEAD to a 5 GiB part.
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, labels),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// observe records one request; op is "unknown" for requests that named
// no operation stratafs knows.
func (m *Metrics) observe(op string, status int, took time.Duration) {
	if m == nil {
		return
	}
	if op == "" {
		op = "unknown"
	}
	s := strconv.Itoa(status)
	m.requests.WithLabelValues(op, s).Inc()
	m.latency.WithLabelValues(op, s).Observe(took.Seconds())
}
