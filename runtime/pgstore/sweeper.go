package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/store"
)

// Sweeper deletes expired idempotency records of the plain table: completed records past their retention (they
// already count as absent, or as their tombstone, so sweeping only reclaims space), running
// lease-mode records abandoned long ago (AbandonAfter), and tombstones past their horizon. It deletes in small batches in
// expires_at order with a pause between batches, because large deletes slowed concurrent claims
// by a third in our measurements (docs/runtime.md). Several replicas may run a Sweeper at once:
// each batch skips rows another sweeper has locked (FOR UPDATE SKIP LOCKED) instead of queueing.
type Sweeper struct {
	// Pool is the store's pool. Required.
	Pool *pgxpool.Pool
	// BatchSize is the most rows one DELETE removes; default 500.
	BatchSize int
	// Pause separates batches within one sweep; default 50ms.
	Pause time.Duration
	// Interval separates sweeps in Run; default 1 minute.
	Interval time.Duration
	// AbandonAfter is how long after its lease ended a running record is kept for its owner's
	// completion or a retry's takeover before it is deleted; default 24h. Until then the key
	// stays refused to any other request (422), however long the call takes.
	AbandonAfter time.Duration
	// Portable replaces FOR UPDATE SKIP LOCKED with a plain bounded DELETE, for engines that lack
	// it in subqueries; concurrent sweepers then may wait on each other's rows. On Citus (the
	// records distributed by MigrateDistributed), which refuses FOR UPDATE across shards, every
	// sweep is portable: the sweeper asks the catalog at each sweep.
	Portable bool
	// CallRetention is how long the provider call log (idempotency_provider_calls) keeps a
	// call after it started, for reconciliation with the provider's reports (`idemgen
	// reconcile`); default 30 days. Keep it longer than the oldest report you reconcile.
	CallRetention time.Duration
	// Observer receives the rows deleted per batch; Logger, sweep failures. Defaults: none and
	// slog.Default(). An Observer that also implements store.SweepObserver (runtime/prometheus
	// does) receives a store.SweepReport after every sweep: the sweep's outcome, the running
	// claims whose lease has ended (by operation) and the sweeper's lag, read through indexes
	// after the sweep.
	Observer interface{ Swept(rows int64) }
	Logger   *slog.Logger
}

// sweepable is the rows the sweeper may delete: completed records past their expiry, and running
// records whose lease ended more than $2 (µs, Sweeper.AbandonAfter) ago, abandoned by an owner
// that never completed and a client that never retried.
const sweepable = `expires_at <= now() AND (response_status <> 0 OR locked_until <= now() - $2::bigint * interval '1 microsecond')`

// sqlSweep deletes up to $1 sweepable rows, oldest first, skipping rows other sweepers hold, and
// writes the tombstone of each completed record whose forget_at has not passed, in the same
// statement (so a reader sees the record or its tombstone, never neither). It returns the rows
// deleted and the tombstones written.
var sqlSweep = `WITH gone AS (DELETE FROM idempotency_records r
USING (SELECT scope_id, key_id FROM idempotency_records
       WHERE ` + sweepable + ` ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) d
WHERE r.key_id = d.key_id AND r.scope_id = d.scope_id AND r.` + sweepable + `
RETURNING r.scope_id, r.key_id, r.locked_until, r.forget_at, r.fingerprint_version, r.response_status, r.fingerprint),
moved AS (` + sweptTombstones() + ` RETURNING 1)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM moved)`

// sqlSweepPortable is sqlSweep without SKIP LOCKED, for engines that lack it in subqueries.
var sqlSweepPortable = `WITH gone AS (DELETE FROM idempotency_records r
USING (SELECT scope_id, key_id FROM idempotency_records
       WHERE ` + sweepable + ` ORDER BY expires_at LIMIT $1) d
WHERE r.key_id = d.key_id AND r.scope_id = d.scope_id AND r.` + sweepable + `
RETURNING r.scope_id, r.key_id, r.locked_until, r.forget_at, r.fingerprint_version, r.response_status, r.fingerprint),
moved AS (` + sweptTombstones() + ` RETURNING 1)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM moved)`

// sweptTombstones writes the tombstones of the swept completed records still remembered (the
// CTE gone of sqlSweep; sql.go's tombstoneInsert).
func sweptTombstones() string {
	return tombstoneInsert(`SELECT scope_id, key_id, locked_until, forget_at, fingerprint_version, response_status / 100, substring(fingerprint from 1 for 16)
	FROM gone WHERE response_status <> 0 AND forget_at > now()`)
}

// SweepOnce deletes every record expired at the time of each batch, batch by batch, and returns
// how many rows it deleted. It stops at the first error (wrapped) or when ctx ends. Then, when
// the Observer is a store.SweepObserver, it samples the backlog and reports the sweep.
func (s *Sweeper) SweepOnce(ctx context.Context) (int64, error) {
	if s.Pool == nil {
		return 0, errors.New("sweeper: Pool is nil")
	}
	so, report := s.Observer.(store.SweepObserver)
	if !report {
		n, _, err := s.sweep(ctx)
		return n, err
	}
	start := time.Now()
	n, tombs, err := s.sweep(ctx)
	r := store.SweepReport{Deleted: n, Tombstones: tombs, Err: err}
	if ctx.Err() == nil {
		stale, uncertain, lag, serr := sampleBacklog(ctx, s.Pool)
		if serr == nil {
			r.Sampled, r.StaleRunning, r.Uncertain, r.Lag = true, stale, uncertain, lag
		} else if r.Err == nil {
			r.Err = serr
		}
	}
	r.Duration = time.Since(start)
	so.SweepDone(r)
	return n, err
}

// sweep is the deleting part of SweepOnce: it returns the records and the tombstones it
// deleted.
func (s *Sweeper) sweep(ctx context.Context) (int64, int64, error) {
	batch := s.BatchSize
	if batch <= 0 {
		batch = 500
	}
	pause := s.Pause
	if pause <= 0 {
		pause = 50 * time.Millisecond
	}
	abandon := s.AbandonAfter
	if abandon <= 0 {
		abandon = 24 * time.Hour
	}
	portable := s.Portable
	if !portable {
		e, err := detectEngine(ctx, s.Pool)
		if err != nil {
			return 0, 0, fmt.Errorf("sweep: %w", err)
		}
		portable = e.citus
	}
	q := sqlSweep
	if portable {
		q = sqlSweepPortable
	}
	var total int64
	for {
		var n, moved int64
		if err := s.Pool.QueryRow(ctx, q, batch, abandon.Microseconds()).Scan(&n, &moved); err != nil {
			return total, 0, fmt.Errorf("sweep: %w", err)
		}
		total += n
		if n > 0 && s.Observer != nil {
			s.Observer.Swept(n)
		}
		if n < int64(batch) {
			// The counters of the per-scope limits whose intervals have ended.
			if _, err := s.Pool.Exec(ctx, sqlSweepUsage); err != nil {
				return total, 0, fmt.Errorf("sweep usage counters: %w", err)
			}
			// The provider calls past CallRetention (not counted: they are not records).
			if _, err := sweepCalls(ctx, s.Pool, s.CallRetention, batch, pause, portable); err != nil {
				return total, 0, err
			}
			// The tombstones past their horizon (counted apart: SweepReport.Tombstones).
			tombs, err := sweepTombstones(ctx, s.Pool, batch, pause, portable)
			return total, tombs, err
		}
		select {
		case <-ctx.Done():
			return total, 0, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// Run sweeps every Interval until ctx ends, logging (not returning) failures, and returns
// ctx.Err().
func (s *Sweeper) Run(ctx context.Context) error {
	interval := s.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := s.SweepOnce(ctx); err != nil && ctx.Err() == nil {
			log.Warn("idempotency sweep failed", "deleted", n, "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
