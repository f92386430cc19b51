package pgstore_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Round trips counted with a pgx tracer and by socket writes. A new key in
// atomic mode costs the handler's own statements plus two under ClaimWithStatement (read;
// BEGIN+lock with the handler's first statement; record+COMMIT) and ClaimPipelined, three under
// ClaimReadFirst; a replay costs one and assigns no transaction id (so it writes nothing and
// locks no row).
func TestRoundTripsAtomic(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy pgstore.ClaimStrategy
		portable bool
		extra    int64 // round trips besides the handler's statements
	}{
		{"WithStatement", pgstore.ClaimWithStatement{}, false, 2},
		{"WithStatement/LockAtRead", pgstore.ClaimWithStatement{LockAtRead: true}, false, 2}, // read+lock; BEGIN with the handler's statement; record+COMMIT+unlock
		{"Pipelined", pgstore.ClaimPipelined{}, false, 2},
		{"ReadFirst", pgstore.ClaimReadFirst{}, false, 3},
		{"WithStatement/portable", pgstore.ClaimWithStatement{}, true, 3}, // read, then the claim INSERT before the handler
		{"Pipelined/portable", pgstore.ClaimPipelined{}, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *setup) {
				c.store.Claim, c.store.NoAdvisoryLocks = tc.strategy, tc.portable
				steadyCap(c)
			})
			h := e.atomicHandler(payOp())
			// Warm the connection's statement cache so the counts are the steady state (under
			// the records cap: a new key counted by its read, one that also counts claims ahead,
			// then the plain reads of a replay and a new key).
			warmUp(h)

			const handlerStatements = 1
			n, writes, log := e.rtt.count(func() {
				if w := serve(h, req("t1", key1, body100)); w.Code != 201 {
					t.Fatalf("new key: %d %s", w.Code, w.Body)
				}
			})
			want := handlerStatements + tc.extra
			if n != want || writes != want {
				t.Errorf("new key took %d round trips (%d socket writes), want %d: %q", n, writes, want, log)
			}

			extra := xidsAssigned(t, e, func() {
				// Several replays in a row: a replay must not make the next one (or the next claim on
				// the same connection) pay for re-preparing statements.
				for i := range 3 {
					n, writes, log = e.rtt.count(func() {
						if w := serve(h, req("t1", key1, body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
							t.Fatalf("not a replay: %d", w.Code)
						}
					})
					if n != 1 || writes != 1 {
						t.Errorf("replay %d took %d round trips (%d socket writes), want 1: %q", i, n, writes, log)
					}
				}
				// A mismatch is answered from the same read.
				n, writes, log = e.rtt.count(func() {
					if w := serve(h, req("t1", key1, `{"amount":5}`)); w.Code != 422 {
						t.Fatalf("not a mismatch: %d", w.Code)
					}
				})
				if n != 1 || writes != 1 {
					t.Errorf("mismatch took %d round trips (%d socket writes), want 1: %q", n, writes, log)
				}
			})
			if extra != 0 {
				t.Errorf("the replays assigned %d transaction ids, want 0", extra)
			}
			n, writes, log = e.rtt.count(func() { serve(h, req("t1", key1+"-next", body100)) })
			if n != want || writes != want {
				t.Errorf("new key after replays took %d round trips (%d socket writes), want %d: %q", n, writes, want, log)
			}
		})
	}
}

// xidsAssigned returns how many transaction ids run assigns: the least over up to five tries,
// because the counter is the whole server's and other packages' tests share the server in
// make test; their transactions can only add to it, so a run that assigns none shows 0 in
// some try while one that assigns ids never does.
func xidsAssigned(t *testing.T, e *env, run func()) int64 {
	t.Helper()
	least := int64(-1)
	for range 5 {
		before := currentXid(t, e)
		run()
		// pg_current_xact_id() assigns one id itself: anything more is run's, or another session's.
		got := currentXid(t, e) - before - 1
		if least < 0 || got < least {
			least = got
		}
		if least == 0 {
			break
		}
	}
	return least
}

func currentXid(t *testing.T, e *env) int64 {
	t.Helper()
	var x int64
	if err := e.pool.QueryRow(context.Background(), "SELECT pg_current_xact_id()::text::bigint").Scan(&x); err != nil {
		t.Fatal(err)
	}
	return x
}

// Lease mode: a new key costs the claim (autocommitted), the record of its provider call (one
// INSERT, before the call), BEGIN+lock under the token, the completion's own statements, then
// store+COMMIT (the call's outcome rides in that round trip); a replay costs one and assigns no
// id.
func TestRoundTripsLease(t *testing.T) {
	e := newEnv(t, nil)
	h := e.leaseHandler(leaseOp(), &provider{})
	serve(h, req("t1", "k-warm-up-00000001", body100))
	serve(h, req("t1", "k-warm-up-00000001", body100))

	const completionStatements = 1
	n, writes, log := e.rtt.count(func() {
		if w := serve(h, req("t1", key1, body100)); w.Code != 201 {
			t.Fatalf("new key: %d %s", w.Code, w.Body)
		}
	})
	if want := int64(completionStatements + 4); n != want || writes != want {
		t.Errorf("new key took %d round trips (%d socket writes), want %d: %q", n, writes, want, log)
	}
	extra := xidsAssigned(t, e, func() {
		n, writes, log = e.rtt.count(func() {
			if w := serve(h, req("t1", key1, body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
				t.Fatalf("not a replay: %d", w.Code)
			}
		})
		if n != 1 || writes != 1 {
			t.Errorf("replay took %d round trips (%d socket writes), want 1: %q", n, writes, log)
		}
	})
	if extra != 0 {
		t.Errorf("the replay assigned %d transaction ids, want 0", extra)
	}
}

// Pools in the simple protocol (used behind transaction-pooling proxies) send the claim as one
// multi-statement Query: the same transaction behaviour and the same round trips, with no
// prepared statements, under every claim strategy.
func TestSimpleProtocolPool(t *testing.T) {
	cases := append(strategies[:len(strategies):len(strategies)], struct {
		name     string
		strategy pgstore.ClaimStrategy
	}{"WithStatement/LockAtRead", pgstore.ClaimWithStatement{LockAtRead: true}})
	for _, s := range cases {
		t.Run(s.name, func(t *testing.T) {
			e := newEnvAt(t, pgtest.NewDatabase(t)+"&default_query_exec_mode=simple_protocol", func(c *setup) {
				withStrategy(s.strategy)(c)
				steadyCap(c)
			})
			h := e.atomicHandler(payOp())
			serve(h, req("t1", "k-warm-up-00000001", body100))
			want := int64(3)
			if s.name == "ReadFirst" {
				want++
			}
			n, writes, log := e.rtt.count(func() {
				if w := serve(h, req("t1", key1, body100)); w.Code != 201 {
					t.Fatalf("new key: %d %s", w.Code, w.Body)
				}
			})
			if n != want || writes != want {
				t.Errorf("new key took %d round trips (%d socket writes), want %d: %q", n, writes, want, log)
			}
			n, writes, log = e.rtt.count(func() {
				if w := serve(h, req("t1", key1, body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
					t.Fatalf("not a replay: %d", w.Code)
				}
			})
			if n != 1 || writes != 1 {
				t.Errorf("replay took %d round trips (%d socket writes), want 1: %q", n, writes, log)
			}
			if w := serve(h, req("t1", key1, `{"amount":5}`)); w.Code != 422 {
				t.Errorf("mismatch: %d", w.Code)
			}
			done := make(chan int)
			go func() { done <- serve(h, req("t1", key1+"-slow", body100, "X-Hold", "slow")).Code }()
			g := e.gate("slow")
			g.wait(t)
			if w := serve(h, req("t1", key1+"-slow", body100)); w.Code != 409 {
				t.Errorf("in flight: %d", w.Code)
			}
			g.open()
			if code := <-done; code != 201 {
				t.Errorf("slow request: %d", code)
			}
			if e.payments("t1") != 3 {
				t.Fatalf("payments %d, want 3", e.payments("t1"))
			}
			var prepared int
			if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_prepared_statements").Scan(&prepared); err != nil || prepared != 0 {
				t.Errorf("prepared statements on a simple-protocol connection: %d (%v)", prepared, err)
			}
		})
	}
}

// An optional key that is absent runs the handler unguarded: BEGIN travels with its first
// statement, so it costs its statements plus the COMMIT, as in a plain pgx transaction.
func TestUnguardedRoundTrips(t *testing.T) {
	e := newEnv(t, nil)
	op := payOp()
	op.Key.Required = false
	h := e.atomicHandler(op)
	serve(h, req("t1", "", body100))
	n, writes, log := e.rtt.count(func() {
		if w := serve(h, req("t1", "", body100)); w.Code != 201 {
			t.Fatalf("%d", w.Code)
		}
	})
	if n != 2 || writes != 2 {
		t.Errorf("unguarded request took %d round trips (%d socket writes), want 2: %q", n, writes, log)
	}
}

// A duplicate of a key whose claim is in flight is answered without waiting, in 1 round trip
// under every strategy: ClaimWithStatement and ClaimReadFirst read the key with a probe of its
// claim lock (the lock is held: 409, no transaction, no failing statement), ClaimPipelined's
// claim pipeline fails on purpose and ends its implicit transaction. The socket writes must
// match: the measured duplicate runs on a connection whose previous duplicate was also refused,
// so a statement pgx re-prepares after a failed pipeline would show as extra writes.
func TestRoundTripsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy pgstore.ClaimStrategy
		want     int64
	}{
		{"WithStatement", pgstore.ClaimWithStatement{}, 1},
		{"ReadFirst", pgstore.ClaimReadFirst{}, 1},
		{"Pipelined", pgstore.ClaimPipelined{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tweak := func(c *setup) {
				withStrategy(tc.strategy)(c)
				steadyCap(c)
			}
			e := newEnv(t, tweak)
			other := newEnvAt(t, e.url, tweak) // another replica on the same database
			h := e.atomicHandler(payOp())
			// A duplicate while another request holds the key, on dup's replica; the counts are
			// the duplicate's.
			inFlight := func(key string, dup *env) (n, writes int64, log []string) {
				done := make(chan int)
				go func() { done <- serve(h, req("t1", key, body100, "X-Hold", key)).Code }()
				g := e.gate(key)
				g.wait(t)
				hd := dup.atomicHandler(payOp())
				n, writes, log = dup.rtt.count(func() {
					if w := serve(hd, req("t1", key, body100)); w.Code != 409 {
						t.Errorf("duplicate: %d", w.Code)
					}
				})
				g.open()
				if code := <-done; code != 201 {
					t.Fatalf("first: %d", code)
				}
				return n, writes, log
			}
			// The first rounds open and warm the pool's second connection: under the records cap
			// the first new key is counted by its read, the second's read also counts claims
			// ahead, and from then on reads are the plain ones, each prepared once.
			inFlight("k-warm-up-00000001", other)
			inFlight("k-warm-up-00000002", other)
			if n, writes, log := inFlight(key1, other); n != tc.want || writes != tc.want {
				t.Errorf("in flight on another replica took %d round trips (%d socket writes), want %d: %q", n, writes, tc.want, log)
			}
			// On the replica that holds the claim, the Store's own claims in progress answer it.
			if n, writes, log := inFlight("k-test-0002-aaaaaaaaaaaa", e); n != 0 || writes != 0 {
				t.Errorf("in flight on the claiming replica took %d round trips (%d socket writes), want none: %q", n, writes, log)
			}
		})
	}
}

// warmUp prepares, on the connection h's requests get, every statement of a new key and a
// replay in the steady state: under the records cap the first new key is counted by its read,
// the second's read also counts claims ahead, and the next ones and the replays read with the
// plain statements.
func warmUp(h http.Handler) {
	for _, key := range []string{"k-warm-up-00000001", "k-warm-up-00000002", "k-warm-up-00000001", "k-warm-up-00000003"} {
		serve(h, req("t1", key, body100))
	}
}
