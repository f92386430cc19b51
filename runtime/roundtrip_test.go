package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// Issue 7 item 9: round trips counted with a pgx tracer. A new key in atomic mode costs the
// handler's own statements plus two under ClaimWithStatement (read; BEGIN+lock with the handler's
// first statement; record+COMMIT) and ClaimPipelined, three under ClaimReadFirst; a replay costs
// one and assigns no transaction id (so it writes nothing and locks no row).
func TestRoundTripsAtomic(t *testing.T) {
	for _, tc := range []struct {
		strategy ClaimStrategy
		portable bool
		extra    int64 // round trips besides the handler's statements
	}{
		{ClaimWithStatement, false, 2},
		{ClaimPipelined, false, 2},
		{ClaimReadFirst, false, 3},
		{ClaimWithStatement, true, 3}, // NoAdvisoryLocks: read, then the claim INSERT before the handler
		{ClaimPipelined, true, 2},
	} {
		strategy := tc.strategy
		e := newEnv(t, func(c *Config) { c.ClaimStrategy = strategy; c.NoAdvisoryLocks = tc.portable })
		h := e.atomicHandler(payOp())
		// Warm the connection's statement cache so the counts are the steady state.
		serve(h, req("t1", "k-warm-up-00000001", body100))
		serve(h, req("t1", "k-warm-up-00000001", body100))

		const handlerStatements = 1
		n, writes, log := e.rtt.count(func() { serve(h, req("t1", key1, body100)) })
		want := handlerStatements + tc.extra
		if n != want || writes != want {
			t.Errorf("strategy %d: new key took %d round trips (%d socket writes), want %d: %q", strategy, n, writes, want, log)
		}

		xidBefore := currentXid(t, e)
		// Several replays in a row: a replay must not make the next one (or the next claim on
		// the same connection) pay for re-preparing statements.
		for i := range 3 {
			n, writes, log = e.rtt.count(func() {
				if w := serve(h, req("t1", key1, body100)); w.Header().Get(HeaderReplayed) != "true" {
					t.Fatalf("not a replay: %d", w.Code)
				}
			})
			if n != 1 || writes != 1 {
				t.Errorf("strategy %d: replay %d took %d round trips (%d socket writes), want 1: %q", strategy, i, n, writes, log)
			}
		}
		xidAfter := currentXid(t, e)
		// pg_current_xact_id() assigns one id itself: anything more is the replay's.
		if xidAfter != xidBefore+1 {
			t.Errorf("strategy %d: the replays assigned %d transaction ids, want 0", strategy, xidAfter-xidBefore-1)
		}
		n, writes, log = e.rtt.count(func() { serve(h, req("t1", key1+"-next", body100)) })
		if n != want || writes != want {
			t.Errorf("strategy %d: new key after replays took %d round trips (%d socket writes), want %d: %q", strategy, n, writes, want, log)
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

// Lease mode: a new key costs the claim (autocommitted), BEGIN+lock under the token, the
// completion's own statements, then store+COMMIT; a replay costs one and assigns no id.
func TestRoundTripsLease(t *testing.T) {
	e := newEnv(t, nil)
	h := e.leaseHandler(leaseOp(), &provider{})
	serve(h, req("t1", "k-warm-up-00000001", body100))
	serve(h, req("t1", "k-warm-up-00000001", body100))

	const completionStatements = 1
	n, writes, log := e.rtt.count(func() { serve(h, req("t1", key1, body100)) })
	if want := int64(completionStatements + 3); n != want || writes != want {
		t.Errorf("new key took %d round trips (%d socket writes), want %d: %q", n, writes, want, log)
	}
	xidBefore := currentXid(t, e)
	n, writes, log = e.rtt.count(func() {
		if w := serve(h, req("t1", key1, body100)); w.Header().Get(HeaderReplayed) != "true" {
			t.Fatalf("not a replay: %d", w.Code)
		}
	})
	if n != 1 || writes != 1 {
		t.Errorf("replay took %d round trips (%d socket writes), want 1: %q", n, writes, log)
	}
	if x := currentXid(t, e); x != xidBefore+1 {
		t.Errorf("the replay assigned %d transaction ids, want 0", x-xidBefore-1)
	}
}

// Pools in the simple protocol (used behind transaction-pooling proxies) send the claim as one
// multi-statement Query: the same transaction behaviour and the same round trips, with no
// prepared statements, under both claim strategies.
func TestSimpleProtocolPool(t *testing.T) {
	for _, strategy := range []ClaimStrategy{ClaimWithStatement, ClaimReadFirst, ClaimPipelined} {
		e := newEnvAt(t, pgtest.NewDatabase(t)+"&default_query_exec_mode=simple_protocol",
			func(c *Config) { c.ClaimStrategy = strategy })
		h := e.atomicHandler(payOp())
		serve(h, req("t1", "k-warm-up-00000001", body100))
		want := int64(3)
		if strategy == ClaimReadFirst {
			want++
		}
		n, writes, log := e.rtt.count(func() {
			if w := serve(h, req("t1", key1, body100)); w.Code != 201 {
				t.Fatalf("strategy %d: new key: %d %s", strategy, w.Code, w.Body)
			}
		})
		if n != want || writes != want {
			t.Errorf("strategy %d: new key took %d round trips (%d socket writes), want %d: %q", strategy, n, writes, want, log)
		}
		n, writes, log = e.rtt.count(func() {
			if w := serve(h, req("t1", key1, body100)); w.Header().Get(HeaderReplayed) != "true" {
				t.Fatalf("strategy %d: not a replay: %d", strategy, w.Code)
			}
		})
		if n != 1 || writes != 1 {
			t.Errorf("strategy %d: replay took %d round trips (%d socket writes), want 1: %q", strategy, n, writes, log)
		}
		if w := serve(h, req("t1", key1, `{"amount":5}`)); w.Code != 422 {
			t.Errorf("strategy %d: mismatch: %d", strategy, w.Code)
		}
		go serve(h, req("t1", key1+"-slow", body100, "X-Delay", "500ms"))
		time.Sleep(150 * time.Millisecond)
		if w := serve(h, req("t1", key1+"-slow", body100)); w.Code != 409 {
			t.Errorf("strategy %d: in flight: %d", strategy, w.Code)
		}
		time.Sleep(500 * time.Millisecond)
		if e.payments("t1") != 3 {
			t.Fatalf("strategy %d: payments %d, want 3", strategy, e.payments("t1"))
		}
	}
}
