package prometheus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/reconcile"
	"github.com/idemgen/idemgen/runtime/store"
)

func TestObserverRecords(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	o.Outcome("createPayment", runtime.ModeAtomic, runtime.OutcomeExecuted)
	o.Outcome("createPayment", runtime.ModeAtomic, runtime.OutcomeReplayed)
	o.Outcome("createPayment", runtime.ModeAtomic, runtime.OutcomeReplayed)
	o.Outcome("charge", runtime.ModeLease, runtime.OutcomeLeaseLost)
	o.ClaimLatency("createPayment", runtime.ModeAtomic, 3*time.Millisecond)
	o.Swept(42)

	want := `
# HELP idemgen_requests_total Requests to idempotent operations by how the runtime ended them (executed, replayed, conflict, mismatch, ...).
# TYPE idemgen_requests_total counter
idemgen_requests_total{mode="atomic",operation="createPayment",outcome="executed"} 1
idemgen_requests_total{mode="atomic",operation="createPayment",outcome="replayed"} 2
idemgen_requests_total{mode="lease",operation="charge",outcome="lease_lost"} 1
# HELP idemgen_swept_records_total Expired idempotency records deleted by sweepers.
# TYPE idemgen_swept_records_total counter
idemgen_swept_records_total 42
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idemgen_requests_total", "idemgen_swept_records_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(o.claims); n != 1 {
		t.Fatalf("claim histogram series = %d", n)
	}
	// A second adapter on the same registry is refused, not silently merged.
	if _, err := New(reg); err == nil {
		t.Fatal("registering twice must fail")
	}
	// Separate registries never collide (no global registration).
	if _, err := New(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
}

// The sweeper's report sets the backlog gauges; an operation that leaves the sample drops to 0
// rather than keeping its last value; sweeps are counted by outcome.
func TestObserverSweepReports(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	o.Execution("createPayment", runtime.ModeAtomic, runtime.OutcomeExecuted, 40*time.Millisecond)
	o.SweepDone(store.SweepReport{Sampled: true, Lag: 90 * time.Second, StaleRunning: map[string]int64{"charge": 3, "refund": 1}})
	o.SweepDone(store.SweepReport{Sampled: true, Lag: 0, StaleRunning: map[string]int64{"charge": 2}, Tombstones: 7})
	o.SweepDone(store.SweepReport{Err: errors.New("connection refused")})

	want := `
# HELP idemgen_stale_running_records Running idempotency claims whose lease has ended (older than their lease), sampled after each sweep.
# TYPE idemgen_stale_running_records gauge
idemgen_stale_running_records{operation="charge"} 2
idemgen_stale_running_records{operation="refund"} 0
# HELP idemgen_sweeper_lag_seconds How long ago the oldest expired idempotency record still present expired, sampled after each sweep; 0 when the sweeper has caught up.
# TYPE idemgen_sweeper_lag_seconds gauge
idemgen_sweeper_lag_seconds 0
# HELP idemgen_swept_tombstones_total Tombstones past their horizon (keys no longer remembered after their retention) deleted by sweepers.
# TYPE idemgen_swept_tombstones_total counter
idemgen_swept_tombstones_total 7
# HELP idemgen_sweeps_total Sweeps of expired idempotency records, by outcome (ok, error).
# TYPE idemgen_sweeps_total counter
idemgen_sweeps_total{outcome="error"} 1
idemgen_sweeps_total{outcome="ok"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idemgen_stale_running_records", "idemgen_sweeper_lag_seconds", "idemgen_swept_tombstones_total", "idemgen_sweeps_total"); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(o.lastSuccess); v < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last success %v", v)
	}
	if n := testutil.CollectAndCount(o.executions); n != 1 {
		t.Errorf("execution series = %d", n)
	}
}

// The uncertain gauge follows the sweeper's samples (an operation that drops out goes to 0), the
// counter counts the runtime's marks, and the reconciliation gauges hold the last run's counts,
// every class included.
func TestUncertainAndReconcileMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	o.SweepDone(store.SweepReport{Sampled: true, Uncertain: map[string]int64{"createCharge": 4, "refund": 1}})
	o.SweepDone(store.SweepReport{Sampled: true, Uncertain: map[string]int64{"createCharge": 3}})
	o.Uncertain("createCharge", store.UncertainOutcomeUnknown)
	o.Uncertain("createCharge", store.UncertainOutcomeUnknown)
	ro, err := NewReconcileObserver(reg)
	if err != nil {
		t.Fatal(err)
	}
	ro.Reconciled(reconcile.Summary{Counts: map[reconcile.Class]int64{reconcile.ChargedNoRecord: 2, reconcile.AmountMismatch: 1}, Lines: 1000, At: time.Unix(1793615400, 0)})
	want := `
# HELP idemgen_uncertain_records Lease-mode records whose outcome is uncertain (provider calls recorded, no completion known), sampled after each sweep.
# TYPE idemgen_uncertain_records gauge
idemgen_uncertain_records{operation="createCharge"} 3
idemgen_uncertain_records{operation="refund"} 0
# HELP idemgen_uncertain_outcomes_total Lease-mode completions that failed after provider calls, leaving an uncertain record, by reason (completion_failed, outcome_unknown).
# TYPE idemgen_uncertain_outcomes_total counter
idemgen_uncertain_outcomes_total{operation="createCharge",reason="outcome_unknown"} 2
# HELP idemgen_reconcile_findings Findings of the last reconciliation with the provider's report, by class (charged_no_record: money moved, the client may not know).
# TYPE idemgen_reconcile_findings gauge
idemgen_reconcile_findings{class="amount_mismatch"} 1
idemgen_reconcile_findings{class="charged_no_record"} 2
idemgen_reconcile_findings{class="record_no_charge"} 0
idemgen_reconcile_findings{class="uncertain_not_charged"} 0
idemgen_reconcile_findings{class="uncertain_unreported"} 0
# HELP idemgen_reconcile_report_lines Lines of the provider's report the last reconciliation read.
# TYPE idemgen_reconcile_report_lines gauge
idemgen_reconcile_report_lines 1000
# HELP idemgen_reconcile_last_run_timestamp_seconds Unix time the last reconciliation with the provider's report ended.
# TYPE idemgen_reconcile_last_run_timestamp_seconds gauge
idemgen_reconcile_last_run_timestamp_seconds 1.7936154e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idemgen_uncertain_records", "idemgen_uncertain_outcomes_total",
		"idemgen_reconcile_findings", "idemgen_reconcile_report_lines", "idemgen_reconcile_last_run_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
	// reconcile.WriteMetrics (`idemgen reconcile --metrics-file`) writes the same metrics.
	var file strings.Builder
	if err := reconcile.WriteMetrics(&file, reconcile.Summary{Counts: map[reconcile.Class]int64{reconcile.ChargedNoRecord: 2, reconcile.AmountMismatch: 1},
		Lines: 1000, At: time.Unix(1793615400, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(file.String()), "idemgen_reconcile_findings", "idemgen_reconcile_report_lines",
		"idemgen_reconcile_last_run_timestamp_seconds"); err != nil {
		t.Fatalf("reconcile.WriteMetrics differs from ReconcileObserver: %v\n%s", err, file.String())
	}
}
