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
	if ok, refill := a.take(tenant, 100, low); ok || !refill {
		t.Fatalf("take without a reservation: ok %v, refill %v; want a refill only", ok, refill)
	}
	if ok, refill := a.take(tenant, 100, low); ok || refill {
		t.Fatalf("take without a reservation, a refill on its way: ok %v, refill %v; want neither", ok, refill)
	}
	a.add(tenant, 1000, int64(time.Hour/time.Microsecond), time.Now())
	for i, want := range []bool{false, false, false, false, false, true, false, false, false} {
		ok, refill := a.take(tenant, 100, low)
		if !ok || refill != want {
			t.Fatalf("take %d (%d bytes left before it): ok %v, refill %v; want ok, refill %v", i, 1000-100*i, ok, refill, want)
		}
	}
	if ok, refill := a.take(tenant, 200, low); ok || refill {
		t.Fatalf("take over what is left, a refill on its way: ok %v, refill %v; want neither", ok, refill)
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

// Claims are counted by the read until a new key of the tenant was counted on the Store; then
// the next read refills the reservation, and claims come from it until it is down to the low
// mark, when one read at a time refills it while the others still take from it. A refill that
// found no room closes refills until the interval's end.
func TestAheadClaimPlan(t *testing.T) {
	var a ahead
	const tenant, low = 7, 5
	if p := a.plan(tenant, low); p != planCount {
		t.Fatalf("no new key seen: plan %v, want planCount", p)
	}
	a.noteNew(tenant)
	if p := a.plan(tenant, low); p != planRefill {
		t.Fatalf("a new key seen, no reservation: plan %v, want planRefill", p)
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

func TestAheadClaimRefillsClosed(t *testing.T) {
	var a ahead
	const tenant, low = 7, 5
	a.noteNew(tenant)
	if p := a.plan(tenant, low); p != planRefill {
		t.Fatalf("plan %v, want planRefill", p)
	}
	a.closeRefills(tenant, time.Now().Add(time.Hour))
	for range 3 {
		if p := a.plan(tenant, low); p != planCount {
			t.Fatalf("refills closed: plan %v, want planCount", p)
		}
	}
	a.closeRefills(tenant, time.Now().Add(-time.Second))
	if p := a.plan(tenant, low); p != planRefill {
		t.Errorf("refills closed until a past instant: plan %v, want planRefill", p)
	}
}

// The map keeps about the tenants with a live reservation: entries whose reservation ended,
// with no refill on its way, go at the next sweep.
func TestAheadSweepsEndedTenants(t *testing.T) {
	var a ahead
	for tenant := range int64(10000) {
		a.noteNew(tenant)
		if a.plan(tenant, 5) == planRefill {
			a.refillEnded(tenant)
		}
	}
	if n := len(a.left); n > 128 {
		t.Errorf("%d tenants kept after 10,000 with no reservation, want at most 128", n)
	}
}
