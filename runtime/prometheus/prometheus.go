// Package prometheus adapts runtime.Observer to github.com/prometheus/client_golang. It registers
// its collectors only on the registry it is given (no global registration), so several runtimes
// or tests never collide.
//
// Metrics (labels are the operation ID, the mode and the runtime.Outcome: a bounded set, never a
// tenant or a key):
//   - idemgen_requests_total{operation, mode, outcome}: counter of runtime.Outcome events. The
//     409 rate is outcome="conflict", the replay share outcome="replayed", mismatches
//     outcome="mismatch", store errors (503) outcome="store_error", and late retries refused by
//     their key's tombstone (410) outcome="result_expired".
//   - idemgen_claim_duration_seconds{operation, mode}: histogram of claim latency, in seconds.
//   - idemgen_execution_duration_seconds{operation, outcome}: histogram, in seconds, of how long
//     the request that claimed a key held it (the first owner's execution time:
//     runtime.ExecutionObserver).
//   - idemgen_swept_records_total: counter of expired records deleted by sweepers.
//   - idemgen_swept_tombstones_total: counter of tombstones past their horizon deleted by
//     sweepers (store.SweepObserver).
//   - idemgen_sweeps_total{outcome}: counter of sweeps, outcome "ok" or "error"
//     (store.SweepObserver).
//   - idemgen_sweeper_last_success_timestamp_seconds: gauge, Unix time of the last sweep that
//     finished without error.
//   - idemgen_sweeper_lag_seconds: gauge, how long ago the oldest expired record still present
//     expired, sampled after each sweep (0 when the sweeper has caught up).
//   - idemgen_stale_running_records{operation}: gauge, running claims whose lease has ended
//     (older than their lease), sampled after each sweep.
//   - idemgen_uncertain_records{operation}: gauge, lease-mode records whose outcome is
//     uncertain (their call phase recorded provider calls, and no completion is known),
//     sampled after each sweep.
//   - idemgen_uncertain_outcomes_total{operation, reason}: counter of completions that failed
//     after provider calls (reason completion_failed or outcome_unknown: runtime.UncertainObserver).
//
// ReconcileObserver, registered by the process that reconciles with the provider's reports
// (a scheduled job, or `idemgen reconcile --metrics-file`), exports what the last run found:
//   - idemgen_reconcile_findings{class}: gauge, findings of each reconcile.Class.
//   - idemgen_reconcile_report_lines: gauge, lines of the report.
//   - idemgen_reconcile_last_run_timestamp_seconds: gauge, Unix time the run ended.
//
// docs/monitoring holds alert rules and a Grafana dashboard over these names.
package prometheus

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/reconcile"
	"github.com/idemgen/idemgen/runtime/store"
)

// Observer is a runtime.Observer, runtime.ExecutionObserver and store.SweepObserver that
// records into Prometheus collectors. Pass it as runtime.Config.Observer and
// pgstore.Sweeper.Observer.
type Observer struct {
	outcomes    *prometheus.CounterVec
	claims      *prometheus.HistogramVec
	executions  *prometheus.HistogramVec
	swept       prometheus.Counter
	sweptTombs  prometheus.Counter
	sweeps      *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	lag         prometheus.Gauge
	stale       *prometheus.GaugeVec
	uncertain   *prometheus.GaugeVec
	marked      *prometheus.CounterVec

	// staleOps and uncertainOps are the operations the stale and uncertain gauges have a
	// series for: a later sample without them sets them to 0 instead of leaving a stale value.
	mu           sync.Mutex
	staleOps     map[string]bool
	uncertainOps map[string]bool
}

var (
	_ runtime.Observer          = (*Observer)(nil)
	_ runtime.ExecutionObserver = (*Observer)(nil)
	_ store.SweepObserver       = (*Observer)(nil)
	_ runtime.UncertainObserver = (*Observer)(nil)
)

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
		executions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idemgen_execution_duration_seconds",
			Help:    "How long the request that claimed an idempotency key held it (handler and completion), in seconds, by how it ended.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"operation", "outcome"}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idemgen_swept_records_total",
			Help: "Expired idempotency records deleted by sweepers.",
		}),
		sweptTombs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idemgen_swept_tombstones_total",
			Help: "Tombstones past their horizon (keys no longer remembered after their retention) deleted by sweepers.",
		}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idemgen_sweeps_total",
			Help: "Sweeps of expired idempotency records, by outcome (ok, error).",
		}, []string{"outcome"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idemgen_sweeper_last_success_timestamp_seconds",
			Help: "Unix time of the last sweep that finished without error.",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idemgen_sweeper_lag_seconds",
			Help: "How long ago the oldest expired idempotency record still present expired, sampled after each sweep; 0 when the sweeper has caught up.",
		}),
		stale: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "idemgen_stale_running_records",
			Help: "Running idempotency claims whose lease has ended (older than their lease), sampled after each sweep.",
		}, []string{"operation"}),
		uncertain: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "idemgen_uncertain_records",
			Help: "Lease-mode records whose outcome is uncertain (provider calls recorded, no completion known), sampled after each sweep.",
		}, []string{"operation"}),
		marked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idemgen_uncertain_outcomes_total",
			Help: "Lease-mode completions that failed after provider calls, leaving an uncertain record, by reason (completion_failed, outcome_unknown).",
		}, []string{"operation", "reason"}),
		staleOps:     map[string]bool{},
		uncertainOps: map[string]bool{},
	}
	for _, c := range []prometheus.Collector{o.outcomes, o.claims, o.executions, o.swept, o.sweptTombs, o.sweeps, o.lastSuccess, o.lag, o.stale, o.uncertain, o.marked} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register idemgen metrics: %w", err)
		}
	}
	// Both outcomes exist from the start, so that rate() sees the first error.
	o.sweeps.WithLabelValues("ok")
	o.sweeps.WithLabelValues("error")
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

// Execution observes how long the first owner of a key held it, in seconds.
func (o *Observer) Execution(op string, _ runtime.Mode, out runtime.Outcome, d time.Duration) {
	o.executions.WithLabelValues(op, string(out)).Observe(d.Seconds())
}

// Swept adds rows deleted by one sweeper batch.
func (o *Observer) Swept(rows int64) { o.swept.Add(float64(rows)) }

// SweepDone records one sweep: its outcome, and when the backlog was sampled, the sweeper's lag
// and the stale running claims by operation (operations absent from the sample are set to 0).
func (o *Observer) SweepDone(r store.SweepReport) {
	o.sweptTombs.Add(float64(r.Tombstones))
	if r.Err != nil {
		o.sweeps.WithLabelValues("error").Inc()
	} else {
		o.sweeps.WithLabelValues("ok").Inc()
		o.lastSuccess.Set(float64(time.Now().UnixNano()) / 1e9)
	}
	if !r.Sampled {
		return
	}
	o.lag.Set(r.Lag.Seconds())
	o.mu.Lock()
	defer o.mu.Unlock()
	for op := range o.staleOps {
		if _, ok := r.StaleRunning[op]; !ok {
			o.stale.WithLabelValues(op).Set(0)
		}
	}
	for op, n := range r.StaleRunning {
		o.staleOps[op] = true
		o.stale.WithLabelValues(op).Set(float64(n))
	}
	for op := range o.uncertainOps {
		if _, ok := r.Uncertain[op]; !ok {
			o.uncertain.WithLabelValues(op).Set(0)
		}
	}
	for op, n := range r.Uncertain {
		o.uncertainOps[op] = true
		o.uncertain.WithLabelValues(op).Set(float64(n))
	}
}

// Uncertain counts a completion that failed after provider calls.
func (o *Observer) Uncertain(op string, reason store.Uncertainty) {
	o.marked.WithLabelValues(op, reason.String()).Inc()
}

// ReconcileObserver is a reconcile.Observer that records what each reconciliation run found.
// Register it in the process that reconciles (docs/monitoring alerts on it).
type ReconcileObserver struct {
	findings *prometheus.GaugeVec
	lines    prometheus.Gauge
	last     prometheus.Gauge
}

var _ reconcile.Observer = (*ReconcileObserver)(nil)

// NewReconcileObserver creates the reconciliation gauges and registers them on reg. It returns
// the registry's error, wrapped.
func NewReconcileObserver(reg prometheus.Registerer) (*ReconcileObserver, error) {
	o := &ReconcileObserver{
		findings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "idemgen_reconcile_findings",
			Help: reconcile.HelpFindings,
		}, []string{"class"}),
		lines: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idemgen_reconcile_report_lines",
			Help: reconcile.HelpLines,
		}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idemgen_reconcile_last_run_timestamp_seconds",
			Help: reconcile.HelpLastRun,
		}),
	}
	for _, c := range []prometheus.Collector{o.findings, o.lines, o.last} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register idemgen reconcile metrics: %w", err)
		}
	}
	return o, nil
}

// Reconciled records one run: every class's count (zeros included), the report's lines, and
// when it ended.
func (o *ReconcileObserver) Reconciled(s reconcile.Summary) {
	for _, c := range reconcile.Classes {
		o.findings.WithLabelValues(string(c)).Set(float64(s.Counts[c]))
	}
	o.lines.Set(float64(s.Lines))
	o.last.Set(float64(s.At.UnixNano()) / 1e9)
}
