package pgstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/store"
)

// BenchmarkWaitWakeup measures concurrency.wait's wake-up latency: the time from the moment the
// first request starts its Commit to the moment the waiting duplicate has the record it replays,
// three ways in the same run, one of each per iteration:
//
//	lockwait   the baseline, a wait by the lock alone: the duplicate blocks in
//	           pg_advisory_xact_lock under lock_timeout on a connection of its own, then reads
//	           the record in the same pipeline
//	samestore  waitAtomic, the first request on the same Store: woken in process
//	otherstore waitAtomic, the first request on another Store over another pool (another
//	           replica): noticed by the waiter's poll (WaitPoll at its default, 100ms)
//
// The first request holds its claim for 150ms after the duplicate starts waiting, so the poll
// has reached its longest interval. It reports each way's median in µs and the ratios to the
// baseline; ns/op is the three waits together and means nothing:
//
//	scripts/with-postgres.sh go test ./runtime/pgstore -run '^$' -bench WaitWakeup -benchtime 30x
func BenchmarkWaitWakeup(b *testing.B) {
	ctx := context.Background()
	url := pgtest.NewDatabase(b)
	newPool := func() *pgxpool.Pool {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		return pool
	}
	pool, otherPool := newPool(), newPool()
	if err := Migrate(ctx, pool); err != nil {
		b.Fatal(err)
	}
	st := New(pool, Options{Claim: ClaimReadFirst{}})
	other := New(otherPool, Options{Claim: ClaimReadFirst{}})
	const hold = 150 * time.Millisecond

	claim := func(i int, way string) store.Claim {
		return store.Claim{
			ID:          store.ID{Scope: "t1", Key: fmt.Sprintf("k-wait-%s-%012d", way, i)},
			Operation:   "createPayment",
			Fingerprint: canonical.Fingerprint{Version: 1, Sum: [32]byte{1}},
			Retention:   time.Hour,
		}
	}
	// first claims c on s and returns a function that commits it and returns when its Commit
	// started.
	first := func(s *Store, c store.Claim) func() time.Time {
		t, rec, err := s.BeginAtomic(ctx, c)
		if err != nil || rec != nil {
			b.Fatalf("first claim: %v %v", err, rec)
		}
		return func() time.Time {
			start := time.Now()
			if err := t.Commit(ctx, store.Response{Status: 201, Body: []byte(`{"id":1}`)}); err != nil {
				b.Fatal(err)
			}
			return start
		}
	}
	// waitFor runs wait in the background once the first request holds the key, lets it wait
	// for hold, commits, and returns how long after the commit started the waiter had its
	// record.
	waitFor := func(commit func() time.Time, waiting func() bool, wait func() error) time.Duration {
		done := make(chan time.Time, 1)
		go func() {
			if err := wait(); err != nil {
				b.Error(err)
			}
			done <- time.Now()
		}()
		for !waiting() {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(hold)
		started := commit()
		return (<-done).Sub(started)
	}
	waitAtomicly := func(s *Store, c store.Claim) func() error {
		return func() error {
			c.Wait = 10 * time.Second
			sp := s.spec(c)
			t, rec, err := s.waitAtomic(ctx, &sp)
			switch {
			case err != nil:
				return err
			case t != nil || rec == nil || rec.State != store.Completed:
				return fmt.Errorf("the waiter did not replay: %v %v", t, rec)
			}
			return nil
		}
	}

	var lockwait, samestore, otherstore []time.Duration
	for i := range b.N {
		// The baseline: a waiting claim's lock, then its read, on a connection held throughout.
		c := claim(i, "lockwait")
		d := digest(c.ID)
		lockwait = append(lockwait, waitFor(first(st, c), func() bool { return lockWaiting(ctx, b, pool) }, func() error {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer st.discard(conn)
			bt := &pgx.Batch{}
			bt.Queue("BEGIN")
			bt.Queue(sqlSetLockTimeout, "10000")
			bt.Queue("SELECT pg_advisory_xact_lock($1::bigint)::text IS NOT NULL AS ok", d.lock)
			bt.Queue(st.q.read, d.scope, d.key)
			bt.Queue(sqlResetLockTimeout)
			br := conn.SendBatch(ctx, bt)
			defer br.Close()
			for range 2 {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			var ok bool
			if err := br.QueryRow().Scan(&ok); err != nil {
				return err
			}
			var raw rawRecord
			if err := br.QueryRow().Scan(raw.targetsRead()...); err != nil {
				return fmt.Errorf("the waiter did not replay: %w", err)
			}
			return nil
		}))

		c = claim(i, "samestore")
		samestore = append(samestore, waitFor(first(st, c), func() bool { return st.waiting.count() > 0 }, waitAtomicly(st, c)))

		c = claim(i, "otherstore")
		otherstore = append(otherstore, waitFor(first(other, c), func() bool { return st.waiting.count() > 0 }, waitAtomicly(st, c)))
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds())
	}
	base := median(lockwait)
	b.ReportMetric(base, "lockwait-µs")
	b.ReportMetric(median(samestore), "samestore-µs")
	b.ReportMetric(median(otherstore), "otherstore-µs")
	b.ReportMetric(median(samestore)/base, "samestore/lockwait")
	b.ReportMetric(median(otherstore)/base, "otherstore/lockwait")
}

// lockWaiting reports whether a session of the database waits for an advisory lock.
func lockWaiting(ctx context.Context, b *testing.B, pool *pgxpool.Pool) bool {
	var waiting bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
		WHERE locktype = 'advisory' AND NOT granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`).Scan(&waiting); err != nil {
		b.Fatal(err)
	}
	return waiting
}
