package runtime

import (
	"context"
	"testing"
)

// Issue 7 item 9: round trips counted with a pgx tracer. A new key in atomic mode costs the
// handler's own statements plus two (claim+BEGIN pipelined, then store+COMMIT pipelined); a
// replay costs one and assigns no transaction id (so it writes nothing and locks no row).
func TestRoundTripsAtomic(t *testing.T) {
	for _, strategy := range []ClaimStrategy{ClaimPipelined, ClaimReadFirst} {
		e := newEnv(t, func(c *Config) { c.ClaimStrategy = strategy })
		h := e.atomicHandler(payOp())
		// Warm the connection's statement cache so the counts are the steady state.
		serve(h, req("t1", "k-warm-up-00000001", body100))
		serve(h, req("t1", "k-warm-up-00000001", body100))

		const handlerStatements = 1
		n, log := e.rtt.count(func() { serve(h, req("t1", key1, body100)) })
		want := int64(handlerStatements + 2)
		if strategy == ClaimReadFirst {
			want++
		}
		if n != want {
			t.Errorf("strategy %d: new key took %d round trips, want %d: %q", strategy, n, want, log)
		}

		xidBefore := currentXid(t, e)
		n, log = e.rtt.count(func() {
			if w := serve(h, req("t1", key1, body100)); w.Header().Get(HeaderReplayed) != "true" {
				t.Fatalf("not a replay: %d", w.Code)
			}
		})
		xidAfter := currentXid(t, e)
		if n != 1 {
			t.Errorf("strategy %d: replay took %d round trips, want 1: %q", strategy, n, log)
		}
		// pg_current_xact_id() assigns one id itself: anything more is the replay's.
		if xidAfter != xidBefore+1 {
			t.Errorf("strategy %d: the replay assigned %d transaction ids, want 0", strategy, xidAfter-xidBefore-1)
		}
	}
}

func currentXid(t *testing.T, e *env) int64 {
	t.Helper()
	var x int64
	if err := e.pool.QueryRow(context.Background(), "SELECT pg_current_xact_id()::text::bigint").Scan(&x); err != nil {
		t.Fatal(err)
	}
	return x
}
