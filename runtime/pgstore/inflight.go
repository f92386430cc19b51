package pgstore

import (
	"sync"
	"sync/atomic"
)

// A duplicate of a key whose claim this Store holds is answered without the database: the
// Store knows its own atomic-mode claims in progress (inflight), from the moment a new key is
// found new until its transaction ends, and a claim of a key among them is store.ErrBusy (409)
// at once, or, with a Wait (concurrency.wait), waits for the end of that claim holding no
// connection (wait.go). So the twenty duplicates of a slow request on one replica hold no
// connection and no handler slot, where each took one before (up to the first statement of its
// handler, under ClaimWithStatement), leaving the others to wait for a slot until their store
// timeout: 503s for a store that was there all along. Duplicates on other replicas still read
// once, and learn from the claim lock.
//
// A key among them answers 409 even when the claim in progress turns out to lose (to another
// replica's): the key was in flight either way, and the retry sees the outcome.

// inflight is the set of keys (their digests) of a Store's atomic-mode claims in progress. The
// zero value is ready to use.
type inflight struct {
	// n counts the keys: a lookup with none costs one atomic load.
	n  atomic.Int64
	mu sync.Mutex
	m  map[[16]byte]struct{}
}

// has reports whether a claim of key is in progress in this Store.
func (f *inflight) has(key [16]byte) bool {
	if f.n.Load() == 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.m[key]
	return ok
}

// enter records a claim of key in progress; false when there is one already.
func (f *inflight) enter(key [16]byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[[16]byte]struct{})
	}
	if _, ok := f.m[key]; ok {
		return false
	}
	f.m[key] = struct{}{}
	f.n.Add(1)
	return true
}

// leave ends the claim of key that enter recorded.
func (f *inflight) leave(key [16]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.m[key]; ok {
		delete(f.m, key)
		f.n.Add(-1)
	}
}
