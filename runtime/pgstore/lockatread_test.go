package pgstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// withLockAtRead is ClaimWithStatement with LockAtRead, under the default records cap.
func withLockAtRead(c *setup) {
	c.store.Claim = pgstore.ClaimWithStatement{LockAtRead: true}
	steadyCap(c)
}

// withLockAtReadUncapped is withLockAtRead without a records cap.
func withLockAtReadUncapped(c *setup) {
	withLockAtRead(c)
	c.store.Limits.Records = -1
}

// lockedMiddleware is the Middleware on e around a handler that counts its entries, writes one
// payments row and answers 201; X-Mode makes it fail in the ways a handler can.
func lockedMiddleware(t *testing.T, e *env, entered *atomic.Int64) http.Handler {
	t.Helper()
	route := runtime.Route{Operation: payOp(), Decode: func(in *gen.Input) error { _, err := decodePay(in); return err }}
	mw, err := runtime.Middleware[pgstore.DBTX](e.rt, []runtime.Route{route}, runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		db, ok := runtime.TxFrom[pgstore.DBTX](r.Context())
		if !ok {
			http.Error(w, "no transaction", 500)
			return
		}
		mode := r.Header.Get("X-Mode")
		if g := r.Header.Get("X-Hold"); g != "" {
			e.gate(g).enter()
			<-e.gate(g).release
		}
		switch mode {
		case "panic-first":
			panic("before any statement")
		case "unavailable-first":
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case "nothing":
			w.WriteHeader(http.StatusCreated) // no statement at all
			return
		}
		if _, err := db.Exec(r.Context(), insertPay, "t1", 100); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		switch mode {
		case "panic":
			panic("after a statement")
		case "unavailable":
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case "bad-statement":
			if _, err := db.Exec(r.Context(), "SELECT 1/0 WHERE $1::int = 1", 1); err == nil {
				t.Error("1/0 did not fail")
			}
			w.WriteHeader(http.StatusCreated) // answers a success over a failed transaction
			return
		case "slow":
			_, _ = db.Exec(r.Context(), "SELECT pg_sleep(10) WHERE $1::int = 1", 1)
		}
		w.WriteHeader(http.StatusCreated)
	}))
}

// advisoryLocks counts the advisory locks any session holds in the test's own database (other
// packages' tests share the server and take locks of their own), asked on a connection of its
// own (one from the pool could be the very session that holds a lock).
func advisoryLocks(t *testing.T, e *env) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx,
		`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Through the Middleware with LockAtRead, a new key costs the handler's statement plus two
// round trips (the read that locks; BEGIN with the statement; the record, COMMIT and the
// release), as the generated handler does, and the claim is held before the wrapped handler
// starts; a replay and a mismatch cost one round trip of one statement (the re-read under the
// lock is in it: idempotency_key_taken) and no transaction id. On a schema without the function
// (a replica that runs before migration 0006) the re-read is a second statement in the read's
// round trip, and everything else is the same.
func TestLockAtReadMiddlewareRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tweak     func(*setup)
		oldSchema bool
	}{
		{"capped", withLockAtRead, false},
		{"uncapped", withLockAtReadUncapped, false},
		{"capped/without idempotency_key_taken", withLockAtRead, true},
		{"uncapped/without idempotency_key_taken", withLockAtReadUncapped, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testLockAtReadMiddlewareRoundTrips(t, tc.tweak, tc.oldSchema) })
	}
}

func testLockAtReadMiddlewareRoundTrips(t *testing.T, tweak func(*setup), oldSchema bool) {
	e := newEnv(t, tweak)
	if oldSchema {
		// Before the store's first operation, which looks for the function.
		if _, err := e.pool.Exec(context.Background(), "DROP FUNCTION idempotency_key_taken(bigint, uuid)"); err != nil {
			t.Fatal(err)
		}
	}
	// statements is how many statements the read of a replay sends.
	statements := func(log []string) int {
		if len(log) > 0 && strings.HasPrefix(log[0], "batch of ") {
			n, _ := strconv.Atoi(strings.TrimPrefix(log[0], "batch of "))
			return n
		}
		return len(log)
	}
	wantStatements := 1
	if oldSchema {
		wantStatements = 2
	}
	var entered atomic.Int64
	h := lockedMiddleware(t, e, &entered)
	// Warm-up: every statement prepared on the connection. Under the records cap the first new
	// key is counted by its read, the second's read also counts claims ahead, and the next ones
	// (and the replays) read with the plain statements.
	for _, key := range []string{"k-warm-up-00000001", "k-warm-up-00000002", "k-warm-up-00000001", "k-warm-up-00000003"} {
		serve(h, req("t1", key, body100))
	}

	n, writes, log := e.rtt.count(func() {
		if w := serve(h, req("t1", key1, body100)); w.Code != 201 {
			t.Fatalf("new key: %d %s", w.Code, w.Body)
		}
	})
	if n != 3 || writes != 3 {
		t.Errorf("new key took %d round trips (%d socket writes), want 3: %q", n, writes, log)
	}
	extra := xidsAssigned(t, e, func() {
		for i := range 3 {
			n, writes, log = e.rtt.count(func() {
				if w := serve(h, req("t1", key1, body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
					t.Fatalf("not a replay: %d %s", w.Code, w.Body)
				}
			})
			if n != 1 || writes != 1 {
				t.Errorf("replay %d took %d round trips (%d socket writes), want 1: %q", i, n, writes, log)
			}
			if got := statements(log); got != wantStatements {
				t.Errorf("replay %d sent %d statements, want %d: %q", i, got, wantStatements, log)
			}
		}
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
	// A handler that sends no statement: BEGIN rides with the record and COMMIT.
	n, writes, log = e.rtt.count(func() {
		if w := serve(h, req("t1", key1+"-none", body100, "X-Mode", "nothing")); w.Code != 201 {
			t.Fatalf("no statement: %d %s", w.Code, w.Body)
		}
	})
	if n != 2 || writes != 2 {
		t.Errorf("a handler without statements took %d round trips (%d socket writes), want 2: %q", n, writes, log)
	}
	if w := serve(h, req("t1", key1+"-none", body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
		t.Errorf("no statement, replay: %d %s", w.Code, w.Body)
	}
	if got := entered.Load(); got != 5 {
		t.Errorf("the wrapped handler ran %d times, want 5 (three warm-up keys, two new keys)", got)
	}
	if n := advisoryLocks(t, e); n != 0 {
		t.Errorf("%d advisory locks held after the requests ended, want 0", n)
	}
}

// A storm of one key through the Middleware: the wrapped handler runs once, every other request
// is answered 409 or replayed, and no lock outlives the requests.
func TestLockAtReadMiddlewareStorm(t *testing.T) {
	e := newEnv(t, withLockAtRead)
	var entered atomic.Int64
	h := lockedMiddleware(t, e, &entered)
	codes := concurrently(24, func(int) int { return serve(h, req("t1", key1, body100)).Code })
	if got := entered.Load(); got != 1 {
		t.Errorf("the wrapped handler ran %d times, want 1: %v", got, codes)
	}
	for _, c := range codes {
		if c != 201 && c != 409 {
			t.Errorf("codes %v: want 201 or 409 only", codes)
			break
		}
	}
	if e.payments("t1") != 1 || e.records() != 1 {
		t.Errorf("payments %d, records %d", e.payments("t1"), e.records())
	}
	if n := advisoryLocks(t, e); n != 0 {
		t.Errorf("%d advisory locks held after the storm, want 0", n)
	}
}

// Every way a request that holds the lock can end without a record releases the lock, or
// closes its connection: no idle connection of the pool holds an advisory lock afterwards, and
// the key is free for the retry.
func TestLockAtReadReleasesOnEveryEnd(t *testing.T) {
	e := newEnv(t, withLockAtRead)
	var entered atomic.Int64
	h := lockedMiddleware(t, e, &entered)
	for i, mode := range []string{"panic-first", "unavailable-first", "panic", "unavailable", "bad-statement", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			key := fmt.Sprintf("k-release-%02d-%s", i, mode)
			if mode == "cancel" {
				ctx, cancel := context.WithCancel(context.Background())
				r := req("t1", key, body100, "X-Mode", "slow").WithContext(ctx)
				done := make(chan int)
				go func() { done <- serve(h, r).Code }()
				time.Sleep(300 * time.Millisecond) // inside pg_sleep
				cancel()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Fatal("the canceled request did not end")
				}
			} else if w := serve(h, req("t1", key, body100, "X-Mode", mode)); w.Code < 500 {
				t.Fatalf("%s: %d %s, want a 5xx", mode, w.Code, w.Body)
			}
			// A closed session's lock goes when its backend exits: give it a moment.
			deadline := time.Now().Add(5 * time.Second)
			for advisoryLocks(t, e) != 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := advisoryLocks(t, e); n != 0 {
				t.Errorf("%d advisory locks held after %s, want 0", n, mode)
			}
			if w := serve(h, req("t1", key, body100)); w.Code != 201 {
				t.Errorf("retry after %s: %d %s, want 201", mode, w.Code, w.Body)
			}
			if n := advisoryLocks(t, e); n != 0 {
				t.Errorf("%d advisory locks held after the retry, want 0", n)
			}
		})
	}
}

// A record that a request without the advisory lock completes while we hold the key (a
// lease-mode request on the same key, a replica with NoAdvisoryLocks) is caught by the record
// INSERT: the request is answered from that record, our writes are rolled back, and the lock
// is released.
func TestLockAtReadCompletedWithoutTheLock(t *testing.T) {
	e := newEnv(t, func(c *setup) { withLockAtRead(c); c.cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)) })
	var entered atomic.Int64
	h := lockedMiddleware(t, e, &entered)
	// The fingerprint the runtime gives this request: the same request under another key.
	if w := serve(h, req("t1", "k-fingerprint-source-01", body100)); w.Code != 201 {
		t.Fatal(w.Code)
	}
	var fp []byte
	var version int16
	if err := e.pool.QueryRow(context.Background(), `SELECT fingerprint, fingerprint_version FROM idempotency_records
		WHERE key_id = $1`, keyID("t1", "k-fingerprint-source-01")).Scan(&fp, &version); err != nil {
		t.Fatal(err)
	}
	before := e.payments("t1")
	done := make(chan *http.Response)
	go func() { done <- serve(h, req("t1", key1, body100, "X-Hold", "first")).Result() }()
	e.gate("first").wait(t)
	if err := e.insertRecord(context.Background(), testRecord{scope: "t1", key: key1, operation: payOp().ID,
		fingerprint: fp, version: version, status: 201, token: 7, body: `{"winner":true}`, expiresIn: time.Hour}); err != nil {
		t.Fatal(err)
	}
	e.gate("first").open()
	w := <-done
	if w.StatusCode != 201 || w.Header.Get(runtime.HeaderReplayed) != "true" {
		b, _ := io.ReadAll(w.Body)
		t.Errorf("the first request: %d replayed=%q %s, want the other record replayed", w.StatusCode, w.Header.Get(runtime.HeaderReplayed), b)
	}
	if n := e.payments("t1") - before; n != 0 {
		t.Errorf("payments %d, want 0 (our writes roll back)", n)
	}
	if n := advisoryLocks(t, e); n != 0 {
		t.Errorf("%d advisory locks held, want 0", n)
	}
}

// Under a records cap the read counts the new key too; a key the cap refuses is answered 429
// before the handler, and the lock that the same read took goes back with the answer.
func TestLockAtReadOverTheRecordsCap(t *testing.T) {
	e := newEnv(t, func(c *setup) {
		withLockAtRead(c)
		c.store.Limits = pgstore.Limits{Records: 1, RecordsInterval: time.Hour}
	})
	var entered atomic.Int64
	h := lockedMiddleware(t, e, &entered)
	if w := serve(h, req("t1", key1, body100)); w.Code != 201 {
		t.Fatalf("first key: %d %s", w.Code, w.Body)
	}
	if w := serve(h, req("t1", key1+"-over", body100)); w.Code != http.StatusTooManyRequests {
		t.Errorf("a key over the cap: %d %s, want 429", w.Code, w.Body)
	}
	if w := serve(h, req("t1", key1, body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
		t.Errorf("replay over the cap: %d %s", w.Code, w.Body)
	}
	if got := entered.Load(); got != 1 {
		t.Errorf("the wrapped handler ran %d times, want 1", got)
	}
	if n := advisoryLocks(t, e); n != 0 {
		t.Errorf("%d advisory locks held after the refusal, want 0", n)
	}
}

// Under a records cap small enough that the read counts the claim (readLockCharged), a key whose
// record has expired (and is no longer remembered) is a new claim of the key: it is counted and
// runs, never refused as over the cap (the read's claim column says the key has a row,
// claimNone, yet the row does not take the key).
func TestLockAtReadExpiredKeyUnderTheRecordsCap(t *testing.T) {
	if partitioned() {
		t.Skip("the partitioned layout never reads an expired record: its key is remembered by its tombstone (IDEMGEN_PG_LAYOUT=partitioned)")
	}
	e := newEnv(t, func(c *setup) {
		withLockAtRead(c)
		c.store.Limits = pgstore.Limits{Records: 3, RecordsInterval: time.Hour}
	})
	var entered atomic.Int64
	h := lockedMiddleware(t, e, &entered)
	if w := serve(h, req("t1", key1, body100)); w.Code != 201 {
		t.Fatalf("first claim: %d %s", w.Code, w.Body)
	}
	if _, err := e.pool.Exec(context.Background(), `UPDATE idempotency_records SET expires_at = now() - interval '1 second', forget_at = NULL WHERE key_id = $1`,
		keyID("t1", key1)); err != nil {
		t.Fatal(err)
	}
	if w := serve(h, req("t1", key1, body100)); w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) == "true" {
		t.Errorf("the expired key again: %d %s (replayed %q), want a new 201", w.Code, w.Body, w.Header().Get(runtime.HeaderReplayed))
	}
	if got := entered.Load(); got != 2 {
		t.Errorf("the wrapped handler ran %d times, want 2", got)
	}
	if n := advisoryLocks(t, e); n != 0 {
		t.Errorf("%d advisory locks held after the requests, want 0", n)
	}
}
