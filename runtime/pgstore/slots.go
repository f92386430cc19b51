package pgstore

import (
	"context"
	"fmt"
	"sync"
)

// handlerSlots bounds the connections that transactions may hold while their handlers run
// (Options.ReservedConns keeps the rest of the pool for lookups), and how many of them one
// tenant may hold at once (Options.TenantShare), so that one tenant's slow requests can neither
// starve the lookups nor the other tenants' new keys. A request that finds no slot it may take
// waits in line without holding a connection; a freed slot goes to the first waiter in line
// whose tenant is under its share.
type handlerSlots struct {
	mu sync.Mutex
	// free is how many slots nobody holds; perTenant the most one tenant may hold.
	free, perTenant int
	// capacity is the number of slots.
	capacity int
	held     map[int64]int
	line     []*slotWaiter
}

// slotWaiter is a request waiting for a slot; granted is closed when it gets one.
type slotWaiter struct {
	tenant  int64
	exempt  bool
	granted chan struct{}
	done    bool
}

// slotTenant names the tenant a slot counts against: its scope digest, or exempt (the empty
// tenant of a single-tenant service, which has nobody to leave room for).
type slotTenant struct {
	digest int64
	exempt bool
}

func newHandlerSlots(capacity int, share float64) *handlerSlots {
	capacity = max(capacity, 1)
	per := capacity
	if share > 0 && share < 1 {
		per = max(1, min(capacity-1, int(share*float64(capacity))))
	}
	return &handlerSlots{free: capacity, perTenant: per, capacity: capacity, held: map[int64]int{}}
}

// mayTake reports whether tenant may take a free slot now; mu is held.
func (h *handlerSlots) mayTake(t slotTenant) bool {
	return h.free > 0 && (t.exempt || h.held[t.digest] < h.perTenant)
}

// take records a slot taken by t; mu is held.
func (h *handlerSlots) take(t slotTenant) {
	h.free--
	if !t.exempt {
		h.held[t.digest]++
	}
}

// try takes a slot for t if it may, without waiting.
func (h *handlerSlots) try(t slotTenant) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.line) > 0 && !h.firstEligible(t) {
		return false // others of this tenant's standing wait first
	}
	if !h.mayTake(t) {
		return false
	}
	h.take(t)
	return true
}

// firstEligible reports whether no waiter that t would overtake could take a slot now; mu is
// held. A tenant over its share never blocks another, so only waiters that may take one count.
func (h *handlerSlots) firstEligible(t slotTenant) bool {
	for _, w := range h.line {
		if h.mayTake(slotTenant{w.tenant, w.exempt}) {
			return false
		}
	}
	return true
}

// wait takes a slot for t, waiting in line until ctx ends.
func (h *handlerSlots) wait(ctx context.Context, t slotTenant) error {
	h.mu.Lock()
	if h.mayTake(t) && h.firstEligible(t) {
		h.take(t)
		h.mu.Unlock()
		return nil
	}
	w := &slotWaiter{tenant: t.digest, exempt: t.exempt, granted: make(chan struct{})}
	h.line = append(h.line, w)
	h.mu.Unlock()
	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.done {
		// Granted as ctx ended: give it on.
		h.release(t)
		return fmt.Errorf("wait for a connection free for a transaction: %w", context.Cause(ctx))
	}
	for i, x := range h.line {
		if x == w {
			h.line = append(h.line[:i], h.line[i+1:]...)
			break
		}
	}
	return fmt.Errorf("wait for a connection free for a transaction: %w", context.Cause(ctx))
}

// free gives t's slot back and hands free slots to the waiters in line that may take them.
func (h *handlerSlots) give(t slotTenant) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.release(t)
}

// release is give with mu held.
func (h *handlerSlots) release(t slotTenant) {
	h.free++
	if !t.exempt {
		if h.held[t.digest]--; h.held[t.digest] <= 0 {
			delete(h.held, t.digest)
		}
	}
	for i := 0; i < len(h.line) && h.free > 0; {
		w := h.line[i]
		wt := slotTenant{w.tenant, w.exempt}
		if !h.mayTake(wt) {
			i++
			continue
		}
		h.take(wt)
		w.done = true
		close(w.granted)
		h.line = append(h.line[:i], h.line[i+1:]...)
	}
}
