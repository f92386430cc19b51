package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Bounds that hold by default. Every stored byte counts against the tenant's stored-bytes cap
// (Limits.BodyCountedAbove defaults to 0: below any counted size, 1,500 responses of 16 KB store
// 23 MB in under 4 s), and the records cap is on without configuration.
func TestDefaultBoundsHold(t *testing.T) {
	t.Run("every byte counts", func(t *testing.T) {
		// A cap of 100 KB, the counted size left at its default: 16 KB responses count.
		e := newEnv(t, func(s *setup) { s.store.Limits = pgstore.Limits{BodyBytes: 100_000} })
		h := e.atomicHandler(payOp())
		kept := 0
		for i := range 10 {
			key := fmt.Sprintf("k-16k-%012d", i)
			if w := serve(h, req("t1", key, body100, "X-Big", strconv.Itoa(16_000))); w.Code != 201 || w.Body.Len() != 16_000 {
				t.Fatalf("key %d: %d with %d bytes", i, w.Code, w.Body.Len())
			}
			if r := summarize(t, serve(h, req("t1", key, body100))); len(r.body) == 16_000 {
				kept++
			}
		}
		if kept != 6 {
			t.Errorf("%d of 10 responses of 16 KB kept under a cap of 100 KB, want 6", kept)
		}
	})
	t.Run("records cap on by default", func(t *testing.T) {
		e := newEnv(t, nil)
		h := e.atomicHandler(payOp())
		if w := serve(h, req("t1", "k-first-0000000001", body100)); w.Code != 201 {
			t.Fatal(w.Code)
		}
		// The tenant has claimed the default number of keys this minute (written as the count
		// would be, rather than by 6,000 requests), and another replica (a Store that holds no
		// claims counted ahead for it) gets its next new key.
		if _, err := e.pool.Exec(context.Background(), "UPDATE idempotency_scope_usage SET amount = $1 WHERE kind = 1", pgstore.DefaultRecords); err != nil {
			t.Fatal(err)
		}
		other := newEnvAt(t, e.url, nil).atomicHandler(payOp())
		if w := summarize(t, serve(other, req("t1", "k-over-00000000001", body100))); w.status != 429 || w.problem != runtime.ProblemRateLimited {
			t.Errorf("a new key past the default records cap: %+v, want 429", w)
		}
		if w := serve(h, req("t1", "k-first-0000000001", body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
			t.Errorf("a replay past the cap: %d", w.Code)
		}
	})
}

// The records cap counts claims, not completions: 200 concurrent new keys of one tenant against
// a cap of 5 let exactly 5 run (a cap checked against completed records let 145 through), in
// every strategy and in lease mode.
func TestRecordsCapCountsClaims(t *testing.T) {
	for _, v := range []struct {
		name  string
		lease bool
		tweak func(*setup)
	}{
		{"WithStatement", false, nil},
		{"ReadFirst", false, withStrategy(pgstore.ClaimReadFirst{})},
		{"Pipelined", false, withStrategy(pgstore.ClaimPipelined{})},
		{"lease", true, nil},
	} {
		t.Run(v.name, func(t *testing.T) {
			e := newEnv(t, func(s *setup) {
				if v.tweak != nil {
					v.tweak(s)
				}
				s.store.Limits = pgstore.Limits{Records: 5, RecordsInterval: time.Hour}
			})
			op := payOp()
			h := e.atomicHandler(op)
			if v.lease {
				op = leaseOp()
				h = e.leaseHandler(op, &provider{})
			}
			const n = 200
			var wg sync.WaitGroup
			codes := make([]int, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					codes[i] = serve(h, req("t1", fmt.Sprintf("k-conc-%012d", i), body100, "X-Delay", "100ms")).Code
				}()
			}
			wg.Wait()
			statuses := map[int]int{}
			for _, c := range codes {
				statuses[c]++
			}
			t.Logf("200 concurrent new keys under a cap of 5: %v", statuses)
			// A counted claim that then fails (503: a store timeout on a loaded machine) still
			// counts, so exactly 5 answer 201 only when none failed; never more than 5.
			if statuses[201] > 5 || e.payments("t1") != statuses[201] || (statuses[503] == 0 && statuses[201] != 5) {
				t.Errorf("%d answered 201 and %d payments, want 5 and 5 (at most 5 when some failed: %d 503)", statuses[201], e.payments("t1"), statuses[503])
			}
			if statuses[201]+statuses[429]+statuses[503] != n {
				t.Errorf("answers %v, want only 201, 429 and 503", statuses)
			}
		})
	}
}

// A scope header joins the scope, not the tenant's limits: rotating Stripe-Account under one
// tenant gets no more new keys than the tenant's cap (Limits: the tenant is the claim's, before
// scope headers join it).
func TestScopeHeadersCountAgainstTheTenant(t *testing.T) {
	e := newEnv(t, func(s *setup) { s.store.Limits = pgstore.Limits{Records: 5, RecordsInterval: time.Hour} })
	op := payOp()
	op.ScopeHeaders = []string{"Stripe-Account"}
	h := e.atomicHandler(op)
	statuses := map[int]int{}
	for i := range 8 {
		w := serve(h, req("t1", "k-rotate-000000001", body100, "Stripe-Account", fmt.Sprintf("acct_1032D82eZvKYlo%02d", i)))
		statuses[w.Code]++
	}
	if statuses[201] != 5 || statuses[429] != 3 {
		t.Errorf("8 Stripe-Account values under one tenant with a cap of 5: %v, want 5×201 and 3×429", statuses)
	}
}

// Under a records cap of 100 or more a Store counts claims ahead, a hundredth of the cap at a
// time: a tenant's replays read without touching the counters (one plain SELECT, as without a
// cap), and so do its new keys, which take a claim of the reservation; one new key in 5 to 11 (at
// a reservation of 10) counts the next reservation, in a round trip after its read.
func TestRecordsCountedAhead(t *testing.T) {
	for _, v := range []struct {
		name  string
		tweak func(*setup)
	}{
		{"WithStatement", nil},
		{"ReadFirst", withStrategy(pgstore.ClaimReadFirst{})},
		{"LockAtRead", withLockAtRead},
	} {
		t.Run(v.name, func(t *testing.T) {
			e := newEnv(t, func(s *setup) {
				if v.tweak != nil {
					v.tweak(s)
				}
				s.store.Limits = pgstore.Limits{Records: 1000, RecordsInterval: 24 * time.Hour} // 10 ahead
			})
			h := e.atomicHandler(payOp())
			// The first new key is counted, with the reservation, after its read.
			for _, key := range []string{"k-ahead-first-0000", "k-ahead-second-000"} {
				if w := serve(h, req("t1", key, body100)); w.Code != 201 {
					t.Fatalf("%s: %d %s", key, w.Code, w.Body)
				}
			}
			before := e.rtt.usage.Load()
			for range 20 {
				if w := serve(h, req("t1", "k-ahead-first-0000", body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
					t.Fatalf("replay: %d %s", w.Code, w.Body)
				}
			}
			if n := e.rtt.usage.Load() - before; n != 0 {
				t.Errorf("20 replays ran %d statements on the counters, want 0", n)
			}
			before = e.rtt.usage.Load()
			const keys = 100
			for i := range keys {
				if w := serve(h, req("t1", fmt.Sprintf("k-ahead-%010d", i), body100)); w.Code != 201 {
					t.Fatalf("key %d: %d %s", i, w.Code, w.Body)
				}
			}
			// A refill once the reservation is below half (5 claims), every 10 new keys when
			// the refills keep up, every 5 at most: one statement on the counters each (two
			// when the reservation ran out and the key counts itself).
			if n := e.rtt.usage.Load() - before; n < keys/11 || n > 2*(keys/5)+2 {
				t.Errorf("%d new keys ran %d statements on the counters, want %d to %d", keys, n, keys/11, 2*(keys/5)+2)
			}
			var counted int64
			if err := e.pool.QueryRow(context.Background(), `SELECT amount FROM idempotency_scope_usage WHERE kind = 1`).Scan(&counted); err != nil {
				t.Fatal(err)
			}
			if claimed := int64(keys + 2); counted < claimed || counted > claimed+15 {
				t.Errorf("the counter holds %d claims for %d new keys, want them and at most a reservation and a half ahead", counted, claimed)
			}
		})
	}
}

// A Store that sees only a tenant's retries (a replica behind which no new key of the tenant
// arrived) reads them without touching the counters either, and asks for no reservation.
func TestRecordsRetriesOnlyStore(t *testing.T) {
	tweak := func(s *setup) { s.store.Limits = pgstore.Limits{Records: 1000, RecordsInterval: 24 * time.Hour} }
	e := newEnv(t, tweak)
	if w := serve(e.atomicHandler(payOp()), req("t1", "k-retried-000000001", body100)); w.Code != 201 {
		t.Fatalf("first key: %d %s", w.Code, w.Body)
	}
	other := newEnvAt(t, e.url, tweak)
	h := other.atomicHandler(payOp())
	for range 10 {
		if w := serve(h, req("t1", "k-retried-000000001", body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
			t.Fatalf("replay: %d %s", w.Code, w.Body)
		}
	}
	if n := other.rtt.usage.Load(); n != 0 {
		t.Errorf("10 replays on a Store without new keys ran %d statements on the counters, want 0", n)
	}
}

// Claims counted ahead never let a tenant past its cap: two Stores (two replicas), 300
// concurrent new keys under a cap of 200 (2 ahead at a time) let at most 200 run, and no fewer
// than the cap less what the two Stores may hold unused (3 each).
func TestRecordsCapCountedAheadUnderConcurrency(t *testing.T) {
	tweak := func(s *setup) {
		s.store.Limits, s.maxConns = pgstore.Limits{Records: 200, RecordsInterval: 24 * time.Hour}, 20
	}
	e := newEnv(t, tweak)
	other := newEnvAt(t, e.url, tweak)
	hs := []http.Handler{e.atomicHandler(payOp()), other.atomicHandler(payOp())}
	const n = 300
	codes := concurrently(n, func(i int) int {
		return serve(hs[i%2], req("t1", fmt.Sprintf("k-ahead-conc-%08d", i), body100)).Code
	})
	statuses := map[int]int{}
	for _, c := range codes {
		statuses[c]++
	}
	if statuses[201] > 200 || statuses[201] < 194 || e.payments("t1") != statuses[201] {
		t.Errorf("answers %v and %d payments under a cap of 200, want 194 to 200 of 201 and as many payments", statuses, e.payments("t1"))
	}
	if statuses[201]+statuses[429] != n {
		t.Errorf("answers %v, want only 201 and 429", statuses)
	}
}
