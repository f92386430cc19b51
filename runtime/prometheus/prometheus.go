// Package prometheus adapts runtime.Observer to github.com/prometheus/client_golang. It registers
// its collectors only on the registry it is given (no global registration), so several runtimes
// or tests never collide.
//
// Metrics:
//   - idemgen_requests_total{operation, mode, outcome}: counter of runtime.Outcome events.
//   - idemgen_claim_duration_seconds{operation, mode}: histogram of claim latency, in seconds.
//   - idemgen_swept_records_total: counter of expired records deleted by sweepers.
package prometheus

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgen/idemgen/runtime"
)

// Observer is a runtime.Observer that records into Prometheus collectors.
type Observer struct {
	outcomes *prometheus.CounterVec
	claims   *prometheus.HistogramVec
	swept    prometheus.Counter
}

var _ runtime.Observer = (*Observer)(nil)

// New creates the collectors and registers them on reg. It returns the registry's error (for
// example a collector of the same name already registered), wrapped.
func New(reg prometheus.Registerer) (*Observer, error) {
	o := &Observer{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idemgen_requests_total",
			Help: "Requests to idempotent operations by how the runtime ended them (executed, replayed, conflict, mismatch, ...).",
		}, []string{"operation", "mode", "outcome"}),
		claims: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idemgen_claim_duration_seconds",
			Help:    "Time to claim an idempotency key or read its record, in seconds.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"operation", "mode"}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idemgen_swept_records_total",
			Help: "Expired idempotency records deleted by sweepers.",
		}),
	}
	for _, c := range []prometheus.Collector{o.outcomes, o.claims, o.swept} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register idemgen metrics: %w", err)
		}
	}
	return o, nil
}

// Outcome counts one request's outcome.
func (o *Observer) Outcome(op string, mode runtime.Mode, out runtime.Outcome) {
	o.outcomes.WithLabelValues(op, mode.String(), string(out)).Inc()
}

// ClaimLatency observes one claim's duration in seconds.
func (o *Observer) ClaimLatency(op string, mode runtime.Mode, d time.Duration) {
	o.claims.WithLabelValues(op, mode.String()).Observe(d.Seconds())
}

// Swept adds rows deleted by one sweeper batch.
func (o *Observer) Swept(rows int64) { o.swept.Add(float64(rows)) }
