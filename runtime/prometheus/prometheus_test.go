package prometheus

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idemgen/idemgen/runtime"
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
