package pgstore_test

import (
	"context"
	"fmt"
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
		// would be, rather than by 6,000 requests).
		if _, err := e.pool.Exec(context.Background(), "UPDATE idempotency_scope_usage SET amount = $1 WHERE kind = 1", pgstore.DefaultRecords); err != nil {
			t.Fatal(err)
		}
		if w := summarize(t, serve(h, req("t1", "k-over-00000000001", body100))); w.status != 429 || w.problem != runtime.ProblemRateLimited {
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
