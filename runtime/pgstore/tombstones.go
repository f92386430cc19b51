package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Tombstones (migration 0004, docs/runtime.md "Tombstones after the retention"): every
// completion of an operation that keeps them writes its record's tombstone in the same
// statement (sql.go, tombstoneInsert), every read of a key without a live record reads its
// tombstone in the same statement (tombstoneWhere), and both sweepers delete the tombstones
// whose horizon has passed, here.

// sqlSweepTombstones deletes up to $1 tombstones past their horizon, oldest first, through the
// forget_at index, skipping those another sweeper holds.
const sqlSweepTombstones = `DELETE FROM idempotency_tombstones t
USING (SELECT key_id FROM idempotency_tombstones WHERE forget_at <= now() ORDER BY forget_at LIMIT $1 FOR UPDATE SKIP LOCKED) d
WHERE t.key_id = d.key_id AND t.forget_at <= now()`

// sqlSweepTombstonesPortable is sqlSweepTombstones without SKIP LOCKED.
const sqlSweepTombstonesPortable = `DELETE FROM idempotency_tombstones t
USING (SELECT key_id FROM idempotency_tombstones WHERE forget_at <= now() ORDER BY forget_at LIMIT $1) d
WHERE t.key_id = d.key_id AND t.forget_at <= now()`

// sweepTombstones deletes the tombstones past their horizon in batches of batch, pausing
// between batches, and returns how many it deleted. A tombstone past its horizon already
// counts as absent (the reads skip it), so sweeping only reclaims space.
func sweepTombstones(ctx context.Context, pool *pgxpool.Pool, batch int, pause time.Duration, portable bool) (int64, error) {
	q := sqlSweepTombstones
	if portable {
		q = sqlSweepTombstonesPortable
	}
	var total int64
	for {
		ct, err := pool.Exec(ctx, q, batch)
		if err != nil {
			return total, fmt.Errorf("sweep tombstones: %w", err)
		}
		total += ct.RowsAffected()
		if ct.RowsAffected() < int64(batch) {
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(pause):
		}
	}
}
