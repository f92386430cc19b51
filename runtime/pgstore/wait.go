package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// A duplicate that may wait for a concurrent claim of its key (store.Claim.Wait,
// concurrency.wait) holds no connection while it waits. It probes the key with the same
// non-waiting claim as a duplicate without a wait (one round trip: the read that tries the claim
// lock), gives the connection back when the key is still claimed, and sleeps until one of:
//
//   - a transaction of the same Store that held a claim of the key ends (committed or rolled
//     back): the waiter registry below wakes it at once, with no database round trip;
//   - its poll interval passes: a claim held by another process (another replica) ends
//     unseen, so the waiter probes again after a jittered interval that doubles from
//     waitPollMin up to Options.WaitPoll;
//   - the wait's deadline: one last probe, then store.ErrBusy as before.
//
// LISTEN/NOTIFY would tell other processes at once, but a NOTIFY in the completing transaction
// serializes every commit of the database behind one lock: that cost falls on all new keys.

// waitPollMin is the first interval between the probes of a waiting duplicate; each later one
// doubles, up to Options.WaitPoll.
const waitPollMin = 4 * time.Millisecond

// defaultWaitPoll is Options.WaitPoll's default.
const defaultWaitPoll = 100 * time.Millisecond

// waiters is a Store's registry of the duplicates waiting for a key's claim to end, by the
// key's digest. A watch is a channel that is closed when a transaction of the store that held
// a claim of the key ends. The zero value is ready to use.
type waiters struct {
	// n counts the watches: a claim ending with no waiter in the process costs one atomic load.
	n  atomic.Int64
	mu sync.Mutex
	m  map[[16]byte]*keyWatch
}

// keyWatch is the channel shared by the waiters of one key until it is closed, and how many
// waiters hold it.
type keyWatch struct {
	ch   chan struct{}
	refs int
}

// watch returns the channel that closes when a claim of key ends in this store, and the
// function that stops watching it (call it once, after the channel is no longer needed).
func (w *waiters) watch(key [16]byte) (<-chan struct{}, func()) {
	w.mu.Lock()
	if w.m == nil {
		w.m = make(map[[16]byte]*keyWatch)
	}
	kw := w.m[key]
	if kw == nil {
		kw = &keyWatch{ch: make(chan struct{})}
		w.m[key] = kw
	}
	kw.refs++
	w.n.Add(1)
	w.mu.Unlock()
	return kw.ch, func() {
		w.mu.Lock()
		kw.refs--
		if kw.refs == 0 && w.m[key] == kw {
			delete(w.m, key)
		}
		w.n.Add(-1)
		w.mu.Unlock()
	}
}

// signal wakes the waiters of key: a claim of it ended (its transaction committed or rolled
// back, so its lock is free and its record, if any, visible).
func (w *waiters) signal(key [16]byte) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	if kw := w.m[key]; kw != nil {
		close(kw.ch)
		delete(w.m, key) // later watches get a fresh channel
	}
	w.mu.Unlock()
}

// count returns the number of waiting duplicates.
func (w *waiters) count() int { return int(w.n.Load()) }

// waitAtomic claims sp's key as beginAtomic does, and while a concurrent claim holds it (ErrBusy)
// waits without a connection and tries again, until sp.Wait has passed since the call: then
// store.ErrBusy. When ctx ends first, its cause.
func (s *Store) waitAtomic(ctx context.Context, sp *claimSpec) (*tx, *store.Record, error) {
	deadline := time.Now().Add(sp.Wait)
	interval := waitPollMin
	for {
		// Watch before probing: a claim that ends between the probe and the sleep still wakes us.
		woken, stop := s.waiting.watch(sp.d.key.Bytes)
		t, rec, err := s.beginOnce(ctx, sp)
		left := time.Until(deadline)
		if !errors.Is(err, store.ErrBusy) || left <= 0 {
			stop()
			return t, rec, err
		}
		// Half the interval plus a random part of the other half: waiters of one key on
		// several processes spread their probes.
		d := min(interval/2+rand.N(interval/2+1), left)
		timer := time.NewTimer(d)
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			stop()
			return nil, nil, fmt.Errorf("wait for a concurrent claim: %w", context.Cause(ctx))
		}
		timer.Stop()
		stop()
		interval = min(2*interval, s.waitPoll)
	}
}
