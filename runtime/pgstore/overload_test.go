package pgstore_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
)

// With 100 slow requests on a pool of 20, lookups must not queue for a connection behind the
// handlers that hold the pool (a replay would wait the store timeout, 5 s, and get 503). Replays,
// mismatches and 409s must be answered within their own bound while handlers hold every
// connection they may take.
func TestLookupsDoNotStarveBehindSlowHandlers(t *testing.T) {
	e := newEnv(t, func(s *setup) { s.maxConns = 20 })
	h := e.atomicHandler(payOp())
	done := "k-finished-000000001"
	if w := serve(h, req("t1", done, body100)); w.Code != 201 {
		t.Fatal(w.Code)
	}
	// A request that holds its key until the end of the test, then 100 slow new keys.
	held := "k-held-00000000001"
	heldDone := make(chan int)
	go func() { heldDone <- serve(h, req("t1", held, body100, "X-Hold", "held")).Code }()
	e.gate("held").wait(t)
	// 100 slow new keys: each handler holds its transaction (and connection) for 3 s.
	const slow = 100
	var wg sync.WaitGroup
	codes := make(chan int, slow)
	for i := range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- serve(h, req("t1", fmt.Sprintf("k-slow-%012d", i), body100, "X-Delay", "3s")).Code
		}()
	}
	eventually(t, "the slow handlers to hold the pool", func() bool { return e.pool.Stat().AcquiredConns() >= 15 })
	time.Sleep(200 * time.Millisecond)

	// Replays, mismatches and duplicates of a running slow key, one after the other.
	var took []time.Duration
	for i := range 30 {
		start := time.Now()
		var w *responseSummary
		switch i % 3 {
		case 0:
			w = summarize(t, serve(h, req("t1", done, body100)))
			if w.status != 201 || !w.replayed {
				t.Errorf("replay %d under overload: %+v", i, w)
			}
		case 1:
			w = summarize(t, serve(h, req("t1", done, `{"amount":7}`)))
			if w.status != 422 {
				t.Errorf("mismatch %d under overload: %+v", i, w)
			}
		case 2:
			w = summarize(t, serve(h, req("t1", held, body100)))
			if w.status != 409 {
				t.Errorf("duplicate %d of a running key under overload: %+v", i, w)
			}
		}
		took = append(took, time.Since(start))
	}
	e.gate("held").open()
	if code := <-heldDone; code != 201 {
		t.Errorf("the held request: %d", code)
	}
	wg.Wait()
	close(codes)
	statuses := map[int]int{}
	for c := range codes {
		statuses[c]++
	}
	slices.Sort(took)
	p50, p99 := took[len(took)/2], took[len(took)*99/100]
	t.Logf("lookups under overload: p50 %v, p99 %v, max %v; the slow requests: %v", p50, p99, took[len(took)-1], statuses)
	if p99 > time.Second {
		t.Errorf("lookups waited up to %v behind slow handlers (p99), want well under 1s", p99)
	}
	if e.obs.get(runtime.OutcomeReplayed) < 10 {
		t.Errorf("outcomes %v", e.obs)
	}
}
