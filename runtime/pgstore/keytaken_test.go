package pgstore_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/runtime/store"
)

// LockAtRead's read re-reads a new key under its lock in the same statement, by
// idempotency_key_taken (migration 0006): a claim that commits and releases the lock between
// the statement's snapshot and the lock must be seen, though the statement's own snapshot is
// older than that commit. The test makes that interleaving happen: it runs the store's own
// read with its try-locks turned into waits (a claim through the Middleware holds the locks,
// its handler stopped at a gate), lets the claim commit while the read waits, and reads the
// claim column: claimTaken (3). The control runs the same read with the function's query written
// inline, which reads under the statement's snapshot: it misses the record and answers
// claimLocked (2), the duplicate that would have run the handler a second time.
func TestLockAtReadRereadsUnderTheLock(t *testing.T) {
	e := newEnv(t, withLockAtReadUncapped)
	var entered atomic.Int64
	h := lockedMiddleware(t, e, &entered)
	ctx := context.Background()
	reads, err := e.st.LockReadsForTest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if reads["readLocked"] != "" {
		t.Fatal("on a migrated schema the store re-reads in a second statement, not by idempotency_key_taken")
	}
	const (
		fn     = "idempotency_key_taken($1, $2)"
		inline = "EXISTS (SELECT 1 FROM idempotency_records WHERE key_id = $2 AND scope_id = $1)"
	)
	// waitLock is pg_try_advisory_lock turned into a wait: the same session locks, taken when
	// free, true then.
	const waitLock = "idemgen_test_wait_lock("
	if _, err := e.pool.Exec(ctx, `
CREATE FUNCTION idemgen_test_wait_lock(bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_lock($1); RETURN true; END $$;
CREATE FUNCTION idemgen_test_wait_lock(integer, integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_lock($1, $2); RETURN true; END $$`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, read string
		control    bool
		want       int16
	}{
		{"readLock", "readLock", false, 3},
		{"readLock/inline", "readLock", true, 2},
		{"readLockCharged", "readLockCharged", false, 3},
		{"readLockCharged/inline", "readLockCharged", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "k-reread-" + strings.ReplaceAll(tc.name, "/", "-")
			stmt := reads[tc.read]
			const try = "pg_try_advisory_lock("
			if !strings.Contains(stmt, try) || !strings.Contains(stmt, fn) {
				t.Fatalf("%s no longer takes the lock by %s and re-reads by %s: update the test\n%s", tc.read, try, fn, stmt)
			}
			stmt = strings.ReplaceAll(stmt, try, waitLock)
			if tc.control {
				stmt = strings.Replace(stmt, fn, inline, 1)
			}
			d := store.DigestOf(store.ID{Scope: "t1", Key: key})
			args := []any{d.Scope, pgtype.UUID{Bytes: d.Key, Valid: true}, d.Lock}
			if tc.read == "readLockCharged" {
				args = []any{d.Scope, pgtype.UUID{Bytes: d.Key, Valid: true}, d.Scope, int64(86400), int64(1 << 40), d.Lock}
			}

			// The claim: its handler holds the key's lock at the gate.
			done := make(chan int, 1)
			go func() { done <- serve(h, req("t1", key, body100, "X-Hold", key)).Code }()
			e.gate(key).wait(t)

			// The read: its snapshot is taken now, before the claim commits; it waits for the lock.
			conn, err := e.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			defer conn.Exec(ctx, "SELECT pg_advisory_unlock_all()") //nolint:errcheck // the session's lock, if the read took it
			pid := conn.Conn().PgConn().PID()
			claim := make(chan any, 1)
			go func() {
				rows, err := conn.Query(ctx, stmt, args...)
				if err != nil {
					claim <- err
					return
				}
				defer rows.Close()
				col := -1
				for i, f := range rows.FieldDescriptions() {
					if f.Name == "claim" {
						col = i
					}
				}
				if !rows.Next() || col < 0 {
					claim <- rows.Err()
					return
				}
				v, err := rows.Values()
				if err != nil {
					claim <- err
					return
				}
				claim <- v[col]
			}()
			eventually(t, "the read to wait for the claim's lock", func() bool {
				var waiting bool
				_ = e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`, pid).Scan(&waiting)
				return waiting
			})

			// The claim commits and releases its lock; the read gets the lock.
			e.gate(key).open()
			if code := <-done; code != 201 {
				t.Fatalf("the claim: %d, want 201", code)
			}
			select {
			case got := <-claim:
				if got != tc.want {
					t.Errorf("claim column %v (%T), want %d", got, got, tc.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the read did not end")
			}
		})
	}
}
