package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// What one tenant can make the store keep (Limits). Large bodies count against the
// scope's stored bytes: over the cap the response is still delivered, and its replay says the
// body was omitted; small bodies are not counted; other scopes are not affected.
func TestScopeBodyBytesCap(t *testing.T) {
	for _, mode := range []string{"atomic", "lease"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, func(s *setup) {
				s.store.Limits = pgstore.Limits{BodyBytes: 3200, BodyCountedAbove: 1000}
			})
			op := payOp()
			h := e.atomicHandler(op)
			if mode == "lease" {
				op = leaseOp()
				h = e.leaseHandler(op, &provider{})
			}
			big := func(tenant, key string, n int) *responseSummary {
				t.Helper()
				w := serve(h, req(tenant, key, body100, "X-Big", strconv.Itoa(n)))
				if w.Code != 201 || w.Body.Len() != n {
					t.Fatalf("%s %s: %d with %d bytes, want 201 with the whole body of %d", tenant, key, w.Code, w.Body.Len(), n)
				}
				return summarize(t, serve(h, req(tenant, key, body100, "X-Big", strconv.Itoa(n))))
			}
			for i, want := range []bool{true, true, false} { // 1500 + 1500 fit 3000; the third does not
				r := big("t1", fmt.Sprintf("k-big-%012d", i), 1500)
				if !r.replayed || (len(r.body) == 1500) != want {
					t.Errorf("replay of large body %d: %d bytes (replayed %v), want stored %v", i, len(r.body), r.replayed, want)
				}
			}
			w := serve(h, req("t1", "k-big-000000000002", body100))
			if w.Header().Get(runtime.HeaderReplayBody) != "omitted" || w.Code != 201 {
				t.Errorf("the omitted body's replay: %d %v", w.Code, w.Header())
			}
			if r := big("t1", "k-small-0000000001", 800); len(r.body) != 800 {
				t.Errorf("a small body is not counted: replay has %d bytes, want 800", len(r.body))
			}
			if r := big("t2", "k-big-other-scope1", 1500); len(r.body) != 1500 {
				t.Errorf("another scope: replay has %d bytes, want 1500", len(r.body))
			}
		})
	}
}

// The optional cap on records per interval: a new key over it is 429 rate-limited with
// Retry-After (the rest of the interval) before its handler runs; replays still replay; other
// scopes are not affected; the sweeper deletes the counters of ended intervals.
func TestScopeRecordsCap(t *testing.T) {
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
				s.store.Limits = pgstore.Limits{Records: 3, RecordsInterval: time.Hour}
			})
			op := payOp()
			h := e.atomicHandler(op)
			if v.lease {
				op = leaseOp()
				h = e.leaseHandler(op, &provider{})
			}
			for i := range 3 {
				if w := serve(h, req("t1", fmt.Sprintf("k-rate-%012d", i), body100)); w.Code != 201 {
					t.Fatalf("key %d: %d %s", i, w.Code, w.Body)
				}
			}
			w := summarize(t, serve(h, req("t1", "k-rate-000000000003", body100)))
			if ra, _ := strconv.Atoi(w.retryAfter); w.status != 429 || w.problem != runtime.ProblemRateLimited || ra < 1 || ra > 3600 {
				t.Fatalf("over the cap: %+v", w)
			}
			if n := e.payments("t1"); n != 3 {
				t.Errorf("payments %d, want 3: the refused request must not run", n)
			}
			if w := serve(h, req("t1", "k-rate-000000000000", body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
				t.Errorf("a replay over the cap: %d, want the replay", w.Code)
			}
			if w := serve(h, req("t2", "k-rate-000000000003", body100)); w.Code != 201 {
				t.Errorf("another scope: %d", w.Code)
			}
			if _, err := e.pool.Exec(context.Background(), "UPDATE idempotency_scope_usage SET ends_at = 0"); err != nil {
				t.Fatal(err)
			}
			if _, err := (&pgstore.Sweeper{Pool: e.pool}).SweepOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			var left int
			if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_scope_usage").Scan(&left); err != nil || left != 0 {
				t.Errorf("usage rows after the sweep: %d (%v), want 0", left, err)
			}
		})
	}
}
