package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// A claim is not lost to a duplicate's read that probes the key's lock at the same instant.
// readProbe tries the claim lock shared for the length of its statement; a claim whose own try
// of that lock met it was refused, so three copies of a new key could all be answered 409 with
// none run (examples/gin's case 009 under load). Here a probe's hold is made to last: the
// claim must wait for it and then run, under every claim strategy.
func TestAClaimIsNotLostToAProbe(t *testing.T) {
	ways := append(strategies[:len(strategies):len(strategies)], struct {
		name     string
		strategy pgstore.ClaimStrategy
	}{"WithStatement/LockAtRead", pgstore.ClaimWithStatement{LockAtRead: true}})
	for _, s := range ways {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *setup) {
				c.store.Claim = s.strategy
				c.store.ConflictTimeout = time.Minute // only the probe's release ends the wait
			})
			ctx := context.Background()
			probe, err := e.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer probe.Rollback(ctx)
			lock := store.DigestOf(store.ID{Scope: "t1", Key: key1}).Lock
			if _, err := probe.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1)", lock); err != nil {
				t.Fatal(err)
			}
			h := e.atomicHandler(payOp())
			done := make(chan int, 1)
			go func() { done <- serve(h, req("t1", key1, body100)).Code }()
			for waiting := false; !waiting; {
				select {
				case code := <-done:
					t.Fatalf("answered %d while a read probed the key's lock; want the claim to wait for the probe, then run", code)
				case <-time.After(5 * time.Millisecond):
				}
				if err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
					WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1 AND objid = ($1::bigint & 4294967295)::oid)`,
					lock).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
			}
			if err := probe.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if code := <-done; code != 201 {
				t.Fatalf("after the probe: %d, want 201", code)
			}
			if n := e.payments("t1"); n != 1 {
				t.Fatalf("payments = %d, want 1", n)
			}
		})
	}
}

// A claim's wait for the probes' lock is bounded by ConflictTimeout (a release of idemgen before
// the claimants' lock existed holds only the probes' lock, for its whole handler), and
// lock_timeout is set back after it, so the handler's own statements never inherit it.
func TestClaimLockWaitIsBounded(t *testing.T) {
	e := newEnv(t, func(c *setup) { c.store.ConflictTimeout = 150 * time.Millisecond })
	ctx := context.Background()
	const lock = int64(-5764607523034234881)
	sql := e.st.ClaimLockForTest()

	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var ok bool
	if err := tx.QueryRow(ctx, sql, lock).Scan(&ok); err != nil || !ok {
		t.Fatalf("a free key: %v %v, want true", ok, err)
	}
	var after string
	if err := tx.QueryRow(ctx, "SHOW lock_timeout").Scan(&after); err != nil || after != "0" {
		t.Fatalf("lock_timeout after the claim's locks = %q (%v), want the session's 0", after, err)
	}

	// A second claimant of the key: the claimants' lock is taken, false at once.
	other, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	if err := other.QueryRow(ctx, sql, lock).Scan(&ok); err != nil || ok {
		t.Fatalf("a claimed key: %v %v, want false", ok, err)
	}
	_ = other.Rollback(ctx)

	// An older release's claim, holding only the probes' lock: the wait ends at ConflictTimeout.
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	old, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback(ctx)
	if _, err := old.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lock); err != nil {
		t.Fatal(err)
	}
	late, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(ctx)
	err = late.QueryRow(ctx, sql, lock).Scan(&ok)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55P03" {
		t.Fatalf("waiting for an older claim: %v %v, want lock_not_available (55P03) after ConflictTimeout", ok, err)
	}
}

// Two replicas of one service on one database, one claiming with ClaimWithStatement.LockAtRead
// (the claim locks held by the session) and one with the default (held by the transaction),
// receive copies of the same new keys at once: every key runs its handler once. Session and
// transaction advisory locks of one key conflict, so the claimants' lock excludes the two kinds
// of claim from each other as it excludes claims of one kind.
func TestSessionAndTransactionClaimsExcludeEachOther(t *testing.T) {
	if partitioned() {
		t.Skip("the same on the partitioned layout, whose claims take the same locks; once is enough")
	}
	tx := newEnv(t, nil)
	session := newEnvAt(t, tx.url, withStrategy(pgstore.ClaimWithStatement{LockAtRead: true}))
	hs := []http.Handler{tx.atomicHandler(payOp()), session.atomicHandler(payOp())}
	const keys, copies = 20, 8
	for k := range keys {
		key := fmt.Sprintf("k-mixed-locks-%06d", k)
		codes := concurrently(copies, func(i int) int { return serve(hs[i%2], req("t1", key, body100)).Code })
		for _, c := range codes {
			if c != 201 && c != 409 {
				t.Fatalf("key %d: %v, want 201 (run or replayed) or 409", k, codes)
			}
		}
	}
	executed := tx.obs.get(runtime.OutcomeExecuted) + session.obs.get(runtime.OutcomeExecuted)
	if n := tx.payments("t1"); n != keys || executed != keys {
		t.Fatalf("%d payments, %d executions for %d keys; want one each", n, executed, keys)
	}
}
