package s3

import (
	"errors"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the store's Prometheus figures: operations on the remote by
// kind and outcome, how long they took, how many requests the SDK tried
// again, and how many slots of the concurrency bound are taken. A nil
// *metrics records nothing.
type metrics struct {
	ops     *prometheus.CounterVec
	latency *prometheus.HistogramVec
	retries prometheus.Counter
}

// newMetrics registers the store's metrics with reg (nil: none); inFlight
// reports the requests in flight. Metrics some other store registered
// first are shared: their in-flight gauge stays the first store's.
func newMetrics(reg prometheus.Registerer, inFlight func() float64) *metrics {
	if reg == nil {
		return nil
	}
	const ns, sub = "stratafs", "data_s3"
	m := &metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "operations_total",
			Help: "Operations on the remote bucket (put, get, head, delete, list), by outcome (ok, missing, error), retries included in one.",
		}, []string{"operation", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "operation_duration_seconds",
			Help: "Time an operation on the remote bucket took, retries and body included, by operation.",
			// 1 ms to about a minute: from a HEAD nearby to a chunk over a slow link.
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"operation"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "retries_total",
			Help: "Requests to the remote bucket sent again after a throttle, a 5xx answer, a broken connection or a body cut short.",
		}),
	}
	m.ops = register(reg, m.ops)
	m.latency = register(reg, m.latency)
	m.retries = register(reg, m.retries)
	register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "requests_in_flight",
		Help: "Requests to the remote bucket in flight, at most the store's concurrency.",
	}, inFlight))
	return m
}

// register registers c with reg, or returns the collector registered
// before it under the same name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(C); ok {
				return prev
			}
		}
		panic(err) // a metric of ours clashing with another: a bug
	}
	return c
}

// observe records one operation and its outcome.
func (m *metrics) observe(op string, err error, took time.Duration) {
	if m == nil {
		return
	}
	outcome := "ok"
	switch {
	case err == nil || err == io.EOF:
	case notFound(err):
		outcome = "missing"
	default:
		outcome = "error"
	}
	m.ops.WithLabelValues(op, outcome).Inc()
	m.latency.WithLabelValues(op).Observe(took.Seconds())
}

func (m *metrics) retried() {
	if m != nil {
		m.retries.Inc()
	}
}

// countingRetryer counts the retries of the retryer it wraps: the SDK
// asks for the delay once before each one.
type countingRetryer struct {
	aws.RetryerV2
	m *metrics
}

func (r countingRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	r.m.retried()
	return r.RetryerV2.RetryDelay(attempt, err)
}
