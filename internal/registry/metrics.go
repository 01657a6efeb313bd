package registry

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus metrics of registry requests. Every HTTP
// attempt counts, retries included.
type Metrics struct {
	// Requests counts requests by registry host and HTTP status code ("error"
	// when no response came back): uprev_registry_requests_total.
	Requests *prometheus.CounterVec
	// Duration observes the time to the response headers by registry host:
	// uprev_registry_request_duration_seconds.
	Duration *prometheus.HistogramVec
}

// NewMetrics returns unregistered registry metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uprev_registry_requests_total",
			Help: "Requests sent to OCI registries, by host and HTTP status code.",
		}, []string{"host", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "uprev_registry_request_duration_seconds",
			Help:    "Time from sending a request to an OCI registry to its response headers, by host.",
			Buckets: prometheus.DefBuckets,
		}, []string{"host"}),
	}
}

// Register registers the metrics with r, e.g. controller-runtime's
// metrics.Registry.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Requests, m.Duration} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("registering registry metrics: %w", err)
		}
	}
	return nil
}

func (m *Metrics) observe(host, code string, d time.Duration) {
	m.Requests.WithLabelValues(host, code).Inc()
	m.Duration.WithLabelValues(host).Observe(d.Seconds())
}
