package pgstore

import (
	"testing"
	"time"
)

// A reservation is refilled by one commit at a time, from the moment it is down to the low
// mark, while it still serves: the commits behind the refilling one use what is left, and ask
// for no refill of their own until that one has ended, by add or by refillEnded.
func TestAheadRefillsOneAtATime(t *testing.T) {
	var a ahead
	const tenant, low = 7, 500
	if ok, refill := a.take(tenant, 100, low); ok || refill {
		t.Fatalf("take without a reservation: ok %v, refill %v; want neither", ok, refill)
	}
	a.add(tenant, 1000, int64(time.Hour/time.Microsecond), time.Now())
	for i, want := range []bool{false, false, false, false, false, true, false, false, false} {
		ok, refill := a.take(tenant, 100, low)
		if !ok || refill != want {
			t.Fatalf("take %d (%d bytes left before it): ok %v, refill %v; want ok, refill %v", i, 1000-100*i, ok, refill, want)
		}
	}
	if ok, refill := a.take(tenant, 200, low); ok || refill {
		t.Fatalf("take over what is left: ok %v, refill %v; want neither", ok, refill)
	}
	a.refillEnded(tenant)
	if ok, refill := a.take(tenant, 50, low); !ok || !refill {
		t.Fatalf("take after the refill ended without a reservation: ok %v, refill %v; want both", ok, refill)
	}
	a.add(tenant, 1000, int64(time.Hour/time.Microsecond), time.Now())
	if ok, refill := a.take(tenant, 100, low); !ok || refill {
		t.Fatalf("take after the refill added its reservation: ok %v, refill %v; want ok only", ok, refill)
	}
	if a.left[tenant].bytes != 1000+50-100 {
		t.Errorf("%d bytes left, want the rest of the old reservation and the new one: %d", a.left[tenant].bytes, 1000+50-100)
	}
}

// A refill that never reported back holds up the next one for refillStale only.
func TestAheadStaleRefill(t *testing.T) {
	var a ahead
	const tenant = 7
	a.add(tenant, 1000, int64(time.Hour/time.Microsecond), time.Now())
	if _, refill := a.take(tenant, 600, 500); !refill {
		t.Fatal("no refill asked at the low mark")
	}
	r := a.left[tenant]
	r.refilling = time.Now().Add(-refillStale - time.Second)
	a.left[tenant] = r
	if ok, refill := a.take(tenant, 100, 500); !ok || !refill {
		t.Errorf("take behind a stale refill: ok %v, refill %v; want both", ok, refill)
	}
}

// Claims are counted by the read until the tenant has a reservation; then from it, until it is
// down to the low mark, when one read at a time refills it while the others still take from it.
func TestAheadClaimPlan(t *testing.T) {
	var a ahead
	const tenant, low = 7, 5
	if p := a.plan(tenant, low); p != planRefill {
		t.Fatalf("no reservation: plan %v, want planRefill", p)
	}
	if p := a.plan(tenant, low); p != planCount {
		t.Fatalf("no reservation, a refill on its way: plan %v, want planCount", p)
	}
	a.add(tenant, 10, int64(time.Hour/time.Microsecond), time.Now())
	for i := range 6 {
		if p := a.plan(tenant, low); p != planLocal {
			t.Fatalf("claim %d of 10: plan %v, want planLocal", i, p)
		}
		if ok, _ := a.take(tenant, 1, 0); !ok {
			t.Fatalf("claim %d of 10: not taken", i)
		}
	}
	if p := a.plan(tenant, low); p != planRefill {
		t.Fatalf("below the low mark: plan %v, want planRefill", p)
	}
	if p := a.plan(tenant, low); p != planLocal {
		t.Fatalf("below the low mark, a refill on its way: plan %v, want planLocal", p)
	}
	a.refillEnded(tenant)
	if p := a.plan(tenant, low); p != planRefill {
		t.Fatalf("after a refill that counted nothing: plan %v, want planRefill", p)
	}
}
