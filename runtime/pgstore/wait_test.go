package pgstore_test

import (
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
)

// concurrency.wait must not starve the pool: duplicates waiting for a running claim hold no
// connection. With a pool of 2 whose other connection the first request holds, 4 duplicates
// wait while another key's new request and a replay go through at once, and the duplicates
// replay as soon as the first request commits (woken in process, not by their poll).
func TestWaitingDuplicatesHoldNoConnection(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			e := newEnv(t, func(c *setup) {
				c.store.Claim = s.strategy
				c.store.ReservedConns = -1 // both connections may be held by a handler
				c.store.WaitPoll = 10 * time.Second
				c.maxConns = 2
			})
			op := payOp()
			op.Wait = 20 * time.Second
			h := e.atomicHandler(op)
			const finished = "k-finished-00000001"
			if w := serve(h, req("t2", finished, body100)); w.Code != 201 {
				t.Fatalf("finished key: %d %s", w.Code, w.Body)
			}
			first := make(chan int)
			go func() { first <- serve(h, req("t1", key1, body100, "X-Hold", "first")).Code }()
			g := e.gate("first")
			g.wait(t)
			const dups = 4
			dup := make(chan *responseSummary, dups)
			for range dups {
				go func() { dup <- summarize(t, serve(h, req("t1", key1, body100))) }()
			}
			eventually(t, "the duplicates to wait", func() bool { return e.st.WaitingForTest() == dups })

			// While they wait, the pool has one connection acquired: the first request's. (Their
			// probes take one for a round trip now and then: their intervals double from 4ms, so
			// after two seconds each probes about every two seconds, and a round trip that a
			// loaded machine makes slow still shows in few samples.)
			time.Sleep(2 * time.Second)
			const samples = 20
			one := 0
			for range samples {
				if e.pool.Stat().AcquiredConns() == 1 {
					one++
				}
				time.Sleep(5 * time.Millisecond)
			}
			if one < samples*3/4 {
				t.Errorf("one connection acquired in %d of %d samples during the wait, want nearly all", one, samples)
			}
			start := time.Now()
			if w := serve(h, req("t2", "k-other-0000000001", body100)); w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" {
				t.Errorf("another key's new request while duplicates wait: %d %s", w.Code, w.Body)
			}
			if w := serve(h, req("t2", finished, body100)); w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "true" {
				t.Errorf("a replay while duplicates wait: %d %s", w.Code, w.Body)
			}
			others := time.Since(start)
			if others > time.Second {
				t.Errorf("another key's request and a replay took %v while duplicates waited, want well under 1s", others)
			}
			if n := e.st.WaitingForTest(); n != dups {
				t.Fatalf("%d duplicates still wait, want %d", n, dups)
			}

			g.open()
			opened := time.Now()
			for range dups {
				if s := <-dup; s.status != 201 || !s.replayed {
					t.Errorf("waiting duplicate: %+v", s)
				}
			}
			woke := time.Since(opened)
			if code := <-first; code != 201 {
				t.Errorf("first request: %d", code)
			}
			if n := e.payments("t1"); n != 1 {
				t.Errorf("payments of t1 = %d, want 1", n)
			}
			// WaitPoll is 10s: only the in-process wake-up can answer them this soon.
			if woke > 2*time.Second {
				t.Errorf("the duplicates replayed %v after the gate opened, want the in-process wake-up", woke)
			}
			t.Logf("pool of 2: one connection acquired in %d/%d samples; another key + a replay in %v; %d duplicates replayed %v after the gate opened",
				one, samples, others, dups, woke)
		})
	}
}

// A claim that ends on another process (another Store over another pool, as on another
// replica) is noticed by the waiter's poll: the duplicate replays within about WaitPoll.
func TestWaitNoticesAnotherProcessByPolling(t *testing.T) {
	const poll = 50 * time.Millisecond
	e := newEnv(t, func(c *setup) { c.store.WaitPoll = poll })
	other := newEnvAt(t, e.url, nil)
	op := payOp()
	op.Wait = 20 * time.Second
	first := make(chan int)
	go func() { first <- serve(other.atomicHandler(op), req("t1", key1, body100, "X-Hold", "first")).Code }()
	g := other.gate("first")
	g.wait(t)
	dup := make(chan *responseSummary)
	go func() { dup <- summarize(t, serve(e.atomicHandler(op), req("t1", key1, body100))) }()
	eventually(t, "the duplicate to wait", func() bool { return e.st.WaitingForTest() == 1 })
	time.Sleep(3 * poll) // its probes' interval has reached WaitPoll
	g.open()
	if code := <-first; code != 201 {
		t.Fatalf("first request on the other store: %d", code)
	}
	committed := time.Now()
	s := <-dup
	took := time.Since(committed)
	if s.status != 201 || !s.replayed {
		t.Fatalf("waiting duplicate: %+v", s)
	}
	if took > time.Second {
		t.Errorf("the duplicate replayed %v after the other store's commit, want about WaitPoll (%v)", took, poll)
	}
	if n := e.payments("t1"); n != 1 {
		t.Errorf("payments = %d, want 1", n)
	}
	t.Logf("replayed %v after the other store's commit (WaitPoll %v)", took, poll)
}

// A wait that ends before the first request answers 409 in-flight after the wait, not before,
// and leaves no waiter behind.
func TestWaitEndsIn409(t *testing.T) {
	forClaimLocks(t, func(t *testing.T, tweak func(*setup)) {
		e := newEnv(t, tweak)
		op := payOp()
		op.Wait = 300 * time.Millisecond
		h := e.atomicHandler(op)
		first := make(chan int)
		go func() { first <- serve(h, req("t1", key1, body100, "X-Hold", "first")).Code }()
		g := e.gate("first")
		g.wait(t)
		start := time.Now()
		s := summarize(t, serve(h, req("t1", key1, body100)))
		took := time.Since(start)
		g.open()
		if s.status != 409 || s.problem != runtime.ProblemInFlight {
			t.Errorf("duplicate after its wait: %+v", s)
		}
		if took < op.Wait || took > op.Wait+2*time.Second {
			t.Errorf("the duplicate answered after %v, want just after its wait of %v", took, op.Wait)
		}
		if n := e.st.WaitingForTest(); n != 0 {
			t.Errorf("%d waiters left", n)
		}
		if code := <-first; code != 201 || e.payments("t1") != 1 {
			t.Errorf("first request: %d, payments %d", code, e.payments("t1"))
		}
	})
}

// A first request that fails releases the key: the waiting duplicate is woken, claims the key
// and runs itself (201, not a replay).
func TestWaitingDuplicateRunsAfterTheFirstFails(t *testing.T) {
	forClaimLocks(t, func(t *testing.T, tweak func(*setup)) {
		e := newEnv(t, tweak)
		op := payOp()
		op.Wait = 20 * time.Second
		h := e.atomicHandler(op)
		first := make(chan int)
		go func() { first <- serve(h, req("t1", key1, body100, "X-Hold", "first", "X-Fail", "error")).Code }()
		g := e.gate("first")
		g.wait(t)
		dup := make(chan *responseSummary)
		go func() { dup <- summarize(t, serve(h, req("t1", key1, body100))) }()
		eventually(t, "the duplicate to wait", func() bool { return e.st.WaitingForTest() == 1 })
		g.open()
		if code := <-first; code != 500 {
			t.Errorf("failing first request: %d", code)
		}
		if s := <-dup; s.status != 201 || s.replayed {
			t.Errorf("the duplicate after the first failed: %+v, want 201 executed", s)
		}
		if n := e.payments("t1"); n != 1 {
			t.Errorf("payments = %d, want 1 (the duplicate's)", n)
		}
	})
}
