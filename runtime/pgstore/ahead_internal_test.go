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
	if ok, refill, _ := a.take(tenant, 100, low); ok || !refill {
		t.Fatalf("take without a reservation: ok %v, refill %v; want a refill only", ok, refill)
	}
	if ok, refill, _ := a.take(tenant, 100, low); ok || refill {
		t.Fatalf("take without a reservation, a refill on its way: ok %v, refill %v; want neither", ok, refill)
	}
	a.add(tenant, 1000, int64(time.Hour/time.Microsecond), time.Now())
	for i, want := range []bool{false, false, false, false, false, true, false, false, false} {
		ok, refill, _ := a.take(tenant, 100, low)
		if !ok || refill != want {
			t.Fatalf("take %d (%d bytes left before it): ok %v, refill %v; want ok, refill %v", i, 1000-100*i, ok, refill, want)
		}
	}
	if ok, refill, _ := a.take(tenant, 200, low); ok || refill {
		t.Fatalf("take over what is left, a refill on its way: ok %v, refill %v; want neither", ok, refill)
	}
	a.refillEnded(tenant)
	if ok, refill, _ := a.take(tenant, 50, low); !ok || !refill {
		t.Fatalf("take after the refill ended without a reservation: ok %v, refill %v; want both", ok, refill)
	}
	a.add(tenant, 1000, int64(time.Hour/time.Microsecond), time.Now())
	if ok, refill, _ := a.take(tenant, 100, low); !ok || refill {
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
	if _, refill, _ := a.take(tenant, 600, 500); !refill {
		t.Fatal("no refill asked at the low mark")
	}
	r := a.left[tenant]
	r.refilling = time.Now().Add(-refillStale - time.Second)
	a.left[tenant] = r
	if ok, refill, _ := a.take(tenant, 100, 500); !ok || !refill {
		t.Errorf("take behind a stale refill: ok %v, refill %v; want both", ok, refill)
	}
}

// Refills that found no room are closed until the instant given: take still serves what is
// left, and asks for no refill before then.
func TestAheadRefillsClosed(t *testing.T) {
	var a ahead
	const tenant, low = 7, 5
	if _, refill, _ := a.take(tenant, 1, low); !refill {
		t.Fatal("no refill asked for an empty reservation")
	}
	a.closeRefills(tenant, time.Now().Add(time.Hour))
	for range 3 {
		if ok, refill, _ := a.take(tenant, 1, low); ok || refill {
			t.Fatalf("refills closed, nothing left: ok %v, refill %v; want neither", ok, refill)
		}
	}
	a.closeRefills(tenant, time.Now().Add(-time.Second))
	if _, refill, _ := a.take(tenant, 1, low); !refill {
		t.Error("refills closed until a past instant: no refill asked")
	}
}

// The map keeps about the tenants with a live reservation: entries whose reservation ended,
// with no refill on its way, go at a later sweep.
func TestAheadSweepsEndedTenants(t *testing.T) {
	var a ahead
	for tenant := range int64(10000) {
		if _, refill, _ := a.take(tenant, 1, 5); refill {
			a.refillEnded(tenant)
		}
	}
	if n := len(a.left); n > 128 {
		t.Errorf("%d tenants kept after 10,000 with no reservation, want at most 128", n)
	}
}

// A take that finds the reservation empty while a refill is on its way gets a channel that the
// refill's end closes: add, refillEnded or closeRefills.
func TestAheadWaitForRefill(t *testing.T) {
	var a ahead
	const tenant, low = 7, 5
	for _, end := range []func(){
		func() { a.add(tenant, 10, int64(time.Hour/time.Microsecond), time.Now()) },
		func() { a.refillEnded(tenant) },
		func() { a.closeRefills(tenant, time.Now()) },
	} {
		a.left = nil
		if _, refill, _ := a.take(tenant, 1, low); !refill {
			t.Fatal("no refill asked for an empty reservation")
		}
		ok, refill, refilled := a.take(tenant, 1, low)
		if ok || refill || refilled == nil {
			t.Fatalf("empty, a refill on its way: ok %v, refill %v, refilled %v; want a channel only", ok, refill, refilled)
		}
		select {
		case <-refilled:
			t.Fatal("closed before the refill ended")
		default:
		}
		end()
		select {
		case <-refilled:
		default:
			t.Error("not closed when the refill ended")
		}
	}
}
