package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PartitionSweeper keeps the partitions of the layout partitioned by expiry
// (MigratePartitioned, Options.Partitioned): it creates the partitions that will receive
// records ahead of time, and retention drops whole partitions once every record in them has
// expired, instead of deleting rows. It is safe on several replicas at once: creation runs under
// a transaction-scoped advisory lock (a replica that finds it taken skips the round), a
// partition is detached CONCURRENTLY (PostgreSQL 14 and later; queries on the table are never
// blocked by it) and dropped with DROP TABLE (a table another replica dropped first is not an error), and a detach that another replica began,
// or that a timeout interrupted, is finished on the next round. It keeps no state in a database
// session (transaction-scoped locks and settings only), so it runs behind a pooler that pools
// transactions (Options.Pooling) as it does on a direct connection.
//
// Each partition holds the records whose expires_at falls in [start, start+Width), start a
// multiple of Width since the Unix epoch; it is named idempotency_records_pYYYYMMDDtHHMM
// after its start (UTC) and carries a table comment naming it as the sweeper's. The sweeper
// drops only the attached partitions of idempotency_records whose range has ended, and tables
// that are no longer partitions but carry that comment with their own name (a partition it
// detached and did not drop); a table is never dropped for its name alone. A record's expiry must fall in a partition that exists: Ahead must
// exceed the longest retention plus lease (and the longest lease extension) of every
// operation, and the sweeper must run (or MigratePartitioned run again) at least once per
// Ahead - retention. A record that fits no partition fails its claim with a store error (503):
// there is no default partition, since it would forbid concurrent detaches.
type PartitionSweeper struct {
	// Pool is the store's pool. Required.
	Pool *pgxpool.Pool
	// Width is the range of expiry instants of each partition; default 24h, at least a minute.
	// Lookups probe every partition that can hold a live record: about Ahead / Width of them,
	// each an index probe of a few microseconds, so hourly partitions with a 24 h retention make
	// each lookup probe 25 indexes. Expired records stay on disk until their partition ends:
	// up to Width after their expiry.
	Width time.Duration
	// Ahead is how far beyond now partitions exist; default three Widths (at least two).
	Ahead time.Duration
	// Interval separates rounds in Run; default 1 minute.
	Interval time.Duration
	// LockTimeout bounds each DDL statement's wait for its locks, so that it never queues
	// ahead of the store's own statements for long; a round that times out is retried on the
	// next. Default 200ms. (A detach takes no lock the store's statements wait for; it is
	// bounded by 30 s instead, and finished on a later round when it runs out.)
	LockTimeout time.Duration
	// Observer receives the rows of each dropped partition (the planner's estimate,
	// pg_class.reltuples: counting them exactly would read the partition). Logger receives
	// failures of Run. Defaults: none and slog.Default().
	Observer interface{ Swept(rows int64) }
	Logger   *slog.Logger
	// CallRetention is how long the provider call log keeps a call after it started; default
	// 30 days (Sweeper.CallRetention).
	CallRetention time.Duration
}

// partitionLockID is the advisory lock key of partition creation, "idemgenp" in ASCII.
const partitionLockID = 0x6964656d67656e70

func (p *PartitionSweeper) width() time.Duration {
	if p.Width <= 0 {
		return 24 * time.Hour
	}
	return max(p.Width.Truncate(time.Second), time.Minute)
}

func (p *PartitionSweeper) ahead() time.Duration {
	if p.Ahead <= 0 {
		return 3 * p.width()
	}
	return max(p.Ahead, 2*p.width())
}

func (p *PartitionSweeper) lockTimeout() string {
	d := p.LockTimeout
	if d <= 0 {
		d = 200 * time.Millisecond
	}
	return lockTimeout(d)
}

// SweepOnce creates the partitions missing from now to Ahead, and drops every partition whose
// range ended before now. It returns the dropped partitions' estimated rows. It stops at the
// first error (wrapped) that is not another replica's doing.
func (p *PartitionSweeper) SweepOnce(ctx context.Context) (int64, error) {
	if p.Pool == nil {
		return 0, errors.New("partition sweeper: Pool is nil")
	}
	if err := p.create(ctx); err != nil {
		return 0, err
	}
	n, err := p.drop(ctx)
	if err == nil {
		// The provider call log is a plain table: its old calls are deleted row by row.
		_, err = sweepCalls(ctx, p.Pool, p.CallRetention, 500, 50*time.Millisecond, false)
	}
	if err == nil {
		// So are the tombstones: small rows, deleted by forget_at.
		_, err = sweepTombstones(ctx, p.Pool, 500, 50*time.Millisecond, false)
	}
	return n, err
}

// Run runs a round every Interval until ctx ends, logging (not returning) failures, and returns
// ctx.Err().
func (p *PartitionSweeper) Run(ctx context.Context) error {
	interval := p.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := p.SweepOnce(ctx); err != nil && ctx.Err() == nil {
			log.Warn("idempotency partition sweep failed", "dropped_rows", n, "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// partitionName is the name of the partition that starts at start.
func partitionName(start time.Time) string {
	return "idempotency_records_p" + start.UTC().Format("20060102t1504")
}

// The marker is the table comment the sweeper writes on each partition it creates, and again
// on each ended partition before it detaches it: "idemgen partition <its own name> of
// idempotency_records". A table that is no longer a partition is dropped only when it carries
// the marker with its own name: a partition this sweeper detached and did not drop (the
// process stopped in between). A name alone proves nothing (a user's
// idempotency_records_plain, a backup, an archive), and a detached partition that someone
// renamed to keep it no longer matches its marker.
const (
	markerHead = "idemgen partition "
	markerTail = " of idempotency_records"
)

// markPartition is the statement that writes the marker on table (one of partitionName's).
func markPartition(table string) string {
	return "COMMENT ON TABLE " + pgx.Identifier{table}.Sanitize() + " IS '" +
		strings.ReplaceAll(markerHead+table+markerTail, "'", "''") + "'"
}

// create adds the partitions for [now, now + Ahead) that do not exist, in one
// transaction under the creation lock. Each is created as a table of its own and attached
// (ATTACH PARTITION takes a SHARE UPDATE EXCLUSIVE lock on the table, which the store's
// statements do not conflict with; CREATE TABLE ... PARTITION OF would need ACCESS EXCLUSIVE).
// A range that another width's partition covers already is skipped.
func (p *PartitionSweeper) create(ctx context.Context) error {
	var now time.Time
	if err := p.Pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return fmt.Errorf("partitions: %w", err)
	}
	w := p.width()
	ws := int64(w / time.Second)
	first := time.Unix(now.Unix()/ws*ws, 0) // a multiple of Width since the Unix epoch
	var missing []time.Time
	for start := first; start.Before(now.Add(p.ahead())); start = start.Add(w) {
		var exists bool
		if err := p.Pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", partitionName(start)).Scan(&exists); err != nil {
			return fmt.Errorf("partitions: %w", err)
		}
		if !exists {
			missing = append(missing, start)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, p.Pool, func(tx pgx.Tx) error {
		var mine bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", int64(partitionLockID)).Scan(&mine); err != nil || !mine {
			return err // another replica is creating them
		}
		if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", p.lockTimeout()); err != nil {
			return err
		}
		for _, start := range missing {
			// Another replica may have attached it between the look above and our lock.
			var attached bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits
				WHERE inhrelid = to_regclass($1) AND inhparent = 'idempotency_records'::regclass)`, partitionName(start)).Scan(&attached); err != nil {
				return err
			}
			if attached {
				continue
			}
			name := pgx.Identifier{partitionName(start)}.Sanitize()
			if _, err := tx.Exec(ctx, "SAVEPOINT idemgen_partition"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+name+" (LIKE idempotency_records INCLUDING COMPRESSION)")
			if err == nil {
				_, err = tx.Exec(ctx, markPartition(partitionName(start)))
			}
			if err == nil {
				_, err = tx.Exec(ctx, "ALTER TABLE idempotency_records ATTACH PARTITION "+name+
					" FOR VALUES FROM ('"+start.UTC().Format(time.RFC3339)+"') TO ('"+start.Add(w).UTC().Format(time.RFC3339)+"')")
			}
			var pe *pgconn.PgError
			switch {
			case err == nil:
			case errors.As(err, &pe) && (pe.Code == "42P17" || pe.Code == "42P07"):
				// Another width's partition overlaps this range, or the name is taken: covered.
				if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT idemgen_partition"); err != nil {
					return err
				}
			default:
				return fmt.Errorf("create partition %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("partitions: %w", err)
	}
	return nil
}

// sqlEndedPartitions lists the partitions whose range ended before now, with their estimated
// rows and whether a detach is pending. The upper bound is read from the partition's bound
// expression as the server prints it and parsed back in the same session.
const sqlEndedPartitions = `SELECT c.relname, GREATEST(c.reltuples, 0)::bigint, i.inhdetachpending
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'idempotency_records'::regclass
  AND (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz <= now()
ORDER BY 1`

// drop detaches and drops every partition whose range ended before now. It keeps no state in a
// database session, so that it runs unchanged behind a pooler that pools transactions, where
// a session setting or lock outlives the sweep on a server session other clients then get: the
// statements that can run in a transaction (the marker, DROP TABLE) run in one each, with SET
// LOCAL lock_timeout; the detach cannot (DETACH ... CONCURRENTLY), but it takes only locks that
// the store's statements never wait for (SHARE UPDATE EXCLUSIVE), so its waits are bounded by
// a deadline of its own (detachTimeout) instead, after which the detach stays pending and the
// next round finishes it. Replicas may drop at once: each step takes another's in its stride
// (a partition already marked, detaching, detached or dropped), and a partition's rows are
// counted by the replica whose DROP removed it.
func (p *PartitionSweeper) drop(ctx context.Context) (int64, error) {
	type ended struct {
		name    string
		rows    int64
		pending bool
		orphan  bool
	}
	rows, err := p.Pool.Query(ctx, sqlEndedPartitions)
	if err != nil {
		return 0, fmt.Errorf("partitions: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ended, error) {
		var e ended
		return e, r.Scan(&e.name, &e.rows, &e.pending)
	})
	if err != nil {
		return 0, fmt.Errorf("partitions: %w", err)
	}
	// Tables of ours that are no longer partitions: detached by a replica that stopped before
	// its DROP (a partition is created and attached in one transaction, so never the reverse),
	// known by the marker that names them.
	orphans, err := p.Pool.Query(ctx, `SELECT c.relname, GREATEST(c.reltuples, 0)::bigint, false FROM pg_class c
WHERE c.relkind = 'r' AND c.relname LIKE 'idempotency\_records\_p%'
  AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = 'idempotency_records'::regclass)
  AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
  AND obj_description(c.oid, 'pg_class') = $1 || c.relname || $2`, markerHead, markerTail)
	if err != nil {
		return 0, fmt.Errorf("partitions: %w", err)
	}
	more, err := pgx.CollectRows(orphans, func(r pgx.CollectableRow) (ended, error) {
		e := ended{orphan: true}
		return e, r.Scan(&e.name, &e.rows, &e.pending)
	})
	if err != nil {
		return 0, fmt.Errorf("partitions: %w", err)
	}
	list = append(list, more...)
	var dropped int64
	for _, e := range list {
		name := pgx.Identifier{e.name}.Sanitize()
		if !e.orphan {
			// Marked before the detach, so that a stop between detach and drop leaves a table
			// the next round can prove is ours (partitions created before markers existed).
			if err := p.local(ctx, markPartition(e.name)); err != nil {
				var pe *pgconn.PgError
				if errors.As(err, &pe) && pe.Code == "42P01" {
					continue // another replica dropped it
				}
				return dropped, fmt.Errorf("mark %s: %w", e.name, err)
			}
			detach := "ALTER TABLE idempotency_records DETACH PARTITION " + name + " CONCURRENTLY"
			if e.pending {
				detach = "ALTER TABLE idempotency_records DETACH PARTITION " + name + " FINALIZE"
			}
			dctx, cancel := context.WithTimeout(ctx, detachTimeout)
			_, err := p.Pool.Exec(dctx, detach)
			cancel()
			if err != nil {
				var pe *pgconn.PgError
				if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "55000" || pe.Code == "42P16") {
					continue // another replica detached or is detaching it: its drop, or our next round
				}
				if ctx.Err() == nil && dctx.Err() != nil {
					continue // still pending: the next round finishes it
				}
				return dropped, fmt.Errorf("detach %s: %w", e.name, err)
			}
		}
		if err := p.local(ctx, "DROP TABLE "+name); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "55P03") {
				continue // another replica dropped it (counted there), or is dropping it
			}
			return dropped, fmt.Errorf("drop %s: %w", e.name, err)
		}
		dropped += e.rows
		if p.Observer != nil && e.rows > 0 {
			p.Observer.Swept(e.rows)
		}
	}
	return dropped, nil
}

// detachTimeout bounds a partition's DETACH ... CONCURRENTLY (or FINALIZE), which waits for
// the transactions that may still see the partition: a handler's transaction holds one open for
// the handler's time.
const detachTimeout = 30 * time.Second

// local runs sql in a transaction of its own under the sweeper's lock_timeout (SET LOCAL: it
// ends with the transaction).
func (p *PartitionSweeper) local(ctx context.Context, sql string) error {
	return pgx.BeginFunc(ctx, p.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", p.lockTimeout()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql)
		return err
	})
}
