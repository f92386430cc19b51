package pgstore

import (
	"sync"
	"time"
)

// Counting ahead (Limits.BodyBytes): a commit that updates a tenant's counter row also counts a
// reservation of bytes for the tenant's next responses on the same Store, which then store
// their bodies without touching the row until the reservation is used up. The reservation is
// counted in the database like any stored byte, so the cap holds; what the Store has not used
// when its window ends, or when the process stops, is lost to the tenant for that window.
//
// A reservation is refilled before it runs out: once it is down to half its size, the first
// commit that uses it also counts the next one ahead, and no other commit of the Store does so
// for the tenant until that one has ended. Without it, every concurrent commit of a busy tenant
// found the reservation empty at the same moment and counted for itself, one after the other
// under the counter row's lock, each waiting for the previous one's commit to be flushed.

// maxAhead is the largest reservation one counting commit makes.
const maxAhead = 64 << 10

// aheadMargin is how long before the end of its window (by the database clock, less the time
// the answer took to arrive) a reservation stops being used: a commit whose transaction began
// in the next window must count there.
const aheadMargin = time.Second

// claimsAheadOf is the reservation of claims a counting read asks for under a records cap of
// records per interval of each seconds: a hundredth of the cap (60 under the default 6,000 a
// minute); 0 (none) under a cap below 100, which every new key counts exactly, or an interval
// under 10 s, where a reservation would hardly outlive its count (none is made with under 2 s
// of the interval left, and none is used in its last second).
func claimsAheadOf(records, each int64) int64 {
	if each < 10 {
		return 0
	}
	return records / 100
}

// aheadOf is the reservation a counting commit asks for under a cap of bodyBytes: a thousandth
// of the cap, at most maxAhead; 0 (none) under a cap below 1 KiB, which is counted to the byte
// by every commit.
func aheadOf(bodyBytes int64) int64 { return min(bodyBytes/1024, maxAhead) }

// ahead is the reservations of a Store's tenants, by tenant digest (claimSpec.limitScope): of
// stored bytes (Limits.BodyBytes), or in a second one of claims (Limits.Records, one unit a
// claim).
type ahead struct {
	mu   sync.Mutex
	left map[int64]reserved
	// sweepAt is the map size at which ended reservations are dropped next.
	sweepAt int
}

// refillStale is how long a refill may be on its way before another commit may start one: a
// commit that never reported back (a process stopped mid-commit is the usual one) holds it up no
// longer than this.
const refillStale = 10 * time.Second

// reserved is one tenant's reservation: bytes left, usable until until (monotonic clock), when
// the commit that refills it was started (zero: no refill on its way), and until when no refill
// is tried (a refill found no room: the cap is less than a reservation away, or the interval
// about to end).
type reserved struct {
	bytes     int64
	until     time.Time
	refilling time.Time
	closed    time.Time
	// refilled is closed when the refill on its way ends (nil: none on its way).
	refilled chan struct{}
}

// endRefill ends r's refill on its way, if any, waking whoever waits for it; mu is held.
func (r *reserved) endRefill() {
	if r.refilled != nil {
		close(r.refilled)
	}
	r.refilling, r.refilled = time.Time{}, nil
}

// refillOnItsWay reports whether a refill of r started at most refillStale before now.
func (r reserved) refillOnItsWay(now time.Time) bool {
	return !r.refilling.IsZero() && now.Sub(r.refilling) <= refillStale
}

// take uses n units of tenant's reservation and reports whether it had them; a reservation
// too small for n is kept for smaller responses. refill reports that the caller is to count
// the next reservation ahead: the reservation is down to low units, or could not take n, no
// other refill is on its way and refills are not closed. The caller then reports the end of
// that refill with add, refillEnded or closeRefills. When it could not take n while another
// refill is on its way, refilled is closed once that refill ends.
func (a *ahead) take(tenant, n, low int64) (ok, refill bool, refilled <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.left[tenant]
	now := time.Now()
	if ok = r.bytes >= n && now.Before(r.until); ok {
		r.bytes -= n
	}
	switch {
	case (!ok || r.bytes < low) && !r.refillOnItsWay(now) && !now.Before(r.closed):
		r.endRefill() // a stale one
		r.refilling, r.refilled, refill = now, make(chan struct{}), true
	case !ok && r.refillOnItsWay(now):
		refilled = r.refilled
	}
	if ok || refill {
		a.set(tenant, r)
	}
	return ok, refill, refilled
}

// set stores tenant's reservation; mu is held. Every so often it drops the ended ones that no
// refill is on its way to, so that the map holds about the tenants with a live reservation.
func (a *ahead) set(tenant int64, r reserved) {
	if a.left == nil {
		a.left, a.sweepAt = map[int64]reserved{}, 64
	}
	a.left[tenant] = r
	if len(a.left) < a.sweepAt {
		return
	}
	now := time.Now()
	for t, r := range a.left {
		if !now.Before(r.until) && !now.Before(r.closed) && !r.refillOnItsWay(now) {
			delete(a.left, t)
		}
	}
	a.sweepAt = max(64, 2*len(a.left))
}

// closeRefills ends the refill on its way, which found no room, and tries no other before
// until.
func (a *ahead) closeRefills(tenant int64, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.left[tenant]; ok {
		r.endRefill()
		r.closed = until
		a.left[tenant] = r
	}
}

// refillEnded notes that the refill take asked for ended without a reservation to add: the
// next commit that finds the reservation low starts another.
func (a *ahead) refillEnded(tenant int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.left[tenant]; ok {
		r.endRefill()
		a.left[tenant] = r
	}
}

// add gives tenant a reservation of n bytes that the database counted for a window of which
// leftUS microseconds were left when the count ran (at sent, or later). A reservation left for
// the same window adds up; an older one is replaced. It ends the refill on its way, if any.
func (a *ahead) add(tenant, n, leftUS int64, sent time.Time) {
	until := sent.Add(time.Duration(leftUS)*time.Microsecond - aheadMargin)
	if n <= 0 || !time.Now().Before(until) {
		a.refillEnded(tenant)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.left[tenant]
	if ok && time.Now().Before(r.until) && r.until.Sub(until).Abs() < aheadMargin {
		n += r.bytes
		if r.until.Before(until) {
			until = r.until
		}
	}
	r.endRefill()
	a.set(tenant, reserved{bytes: n, until: until})
}
