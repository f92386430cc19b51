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
// records per interval: a hundredth of the cap (60 under the default 6,000 a minute); 0 (none)
// under a cap below 100, which every new key counts exactly.
func claimsAheadOf(records int64) int64 { return records / 100 }

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

// reserved is one tenant's reservation: bytes left, usable until until (monotonic clock), and
// when the commit that refills it was started (zero: no refill on its way).
type reserved struct {
	bytes     int64
	until     time.Time
	refilling time.Time
}

// take uses n bytes of tenant's reservation and reports whether it had them; a reservation
// too small for n is kept for smaller responses. refill reports that the caller's commit is to
// count the next reservation ahead: the reservation is down to low bytes and no other refill
// is on its way. The caller then reports the end of that commit with add or refillEnded.
func (a *ahead) take(tenant, n, low int64) (ok, refill bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, found := a.left[tenant]
	now := time.Now()
	if !found || r.bytes < n || !now.Before(r.until) {
		return false, false
	}
	r.bytes -= n
	if r.bytes < low && (r.refilling.IsZero() || now.Sub(r.refilling) > refillStale) {
		r.refilling, refill = now, true
	}
	a.left[tenant] = r
	return true, refill
}

// claimPlan is how the next claim of a tenant is counted against its records cap
// (Limits.Records), decided before its read.
type claimPlan int

const (
	// planCount: the read counts the claim when the key turns out new (statements.readCharged).
	planCount claimPlan = iota
	// planRefill: as planCount, and the same round trip counts the next reservation ahead
	// (sqlReserveClaims); the caller ends it with add or refillEnded.
	planRefill
	// planLocal: the read counts nothing; a new key takes one claim of the reservation.
	planLocal
)

// plan says how the next claim of tenant is counted: from the reservation while it holds one
// claim and is above low, or while another commit refills it; otherwise by the read, which
// also refills the reservation when no other refill is on its way.
func (a *ahead) plan(tenant, low int64) claimPlan {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, found := a.left[tenant]
	now := time.Now()
	usable := found && r.bytes >= 1 && now.Before(r.until)
	refilling := found && !r.refilling.IsZero() && now.Sub(r.refilling) <= refillStale
	switch {
	case usable && (r.bytes >= low || refilling):
		return planLocal
	case refilling:
		return planCount
	}
	if a.left == nil {
		a.left, a.sweepAt = map[int64]reserved{}, 64
	}
	if !found {
		r = reserved{}
	}
	r.refilling = now
	a.left[tenant] = r
	return planRefill
}

// refillEnded notes that the refill take asked for ended without a reservation to add: the
// next commit that finds the reservation low starts another.
func (a *ahead) refillEnded(tenant int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.left[tenant]; ok {
		r.refilling = time.Time{}
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
	if a.left == nil {
		a.left, a.sweepAt = map[int64]reserved{}, 64
	}
	r, ok := a.left[tenant]
	if ok && time.Now().Before(r.until) && r.until.Sub(until).Abs() < aheadMargin {
		n += r.bytes
		if r.until.Before(until) {
			until = r.until
		}
	}
	a.left[tenant] = reserved{bytes: n, until: until}
	if len(a.left) >= a.sweepAt {
		now := time.Now()
		for t, r := range a.left {
			if !now.Before(r.until) {
				delete(a.left, t)
			}
		}
		a.sweepAt = max(64, 2*len(a.left))
	}
}
