package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/pgstore/migrations"
)

// migrateLockID is the advisory lock key Migrate holds (transaction-scoped), "idemgen" in ASCII.
const migrateLockID = 0x6964656d67656e

// Migrate creates or upgrades the idempotency schema. It is safe on every start and from several
// replicas at once, while replicas of the previous version serve traffic (a rolling upgrade):
// each migration runs in a transaction of its own that takes a transaction-scoped advisory lock
// (engines without advisory locks fall back to retrying the transaction when a concurrent
// replica created the same object first), applies the migration if idemgen_schema_versions does
// not list it yet, and records it. Every statement waits at most MigrateOptions' LockTimeout
// (250 ms) for its locks, so that behind a long transaction of an old replica a migration gives
// up and tries again later instead of queueing every request of the fleet behind its lock; it
// retries for up to 5 minutes (MigrateWith sets both). It returns the store's error, wrapped.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return MigrateWith(ctx, pool, MigrateOptions{})
}

// MigratePartitioned is Migrate for the layout partitioned by expiry (Options.Partitioned;
// PostgreSQL 14 or later), then creates the partitions of the coming days with the
// PartitionSweeper's defaults (run a PartitionSweeper to keep them coming and to drop the old
// ones). It fails if the table exists with the plain layout, and Migrate fails on a
// partitioned one: the layouts do not convert into each other.
func MigratePartitioned(ctx context.Context, pool *pgxpool.Pool) error {
	return MigrateWith(ctx, pool, MigrateOptions{Partitioned: true})
}

// MigrateOptions says which layout MigrateWith migrates and how it waits for locks.
type MigrateOptions struct {
	// Partitioned migrates the layout partitioned by expiry (MigratePartitioned).
	Partitioned bool
	// LockTimeout is each migration's lock_timeout (SET LOCAL): how long one of its
	// statements may wait for a lock before the migration gives up and is tried again. A
	// statement that waits for a lock makes every later statement on the table wait behind
	// it, so this bounds what a migration can add to any request's time. Default 250ms.
	LockTimeout time.Duration
	// Retry is how long a migration that timed out on its locks is tried again, with a
	// jittered backoff from 50 ms to 5 s, before MigrateWith fails naming the migration; ctx
	// can end it sooner. Default 5 minutes.
	Retry time.Duration
}

// MigrateWith is Migrate (or MigratePartitioned) with opts.
func MigrateWith(ctx context.Context, pool *pgxpool.Pool, opts MigrateOptions) error {
	var (
		ms  []migrations.Migration
		err error
	)
	if opts.Partitioned {
		ms, err = migrations.UpPartitioned()
	} else {
		ms, err = migrations.Up()
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = 250 * time.Millisecond
	}
	if opts.Retry <= 0 {
		opts.Retry = 5 * time.Minute
	}
	if err := migrate(ctx, pool, ms, opts); err != nil {
		return err
	}
	if opts.Partitioned {
		if err := (&PartitionSweeper{Pool: pool}).create(ctx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	return nil
}

// MigrateDistributed is Migrate for a Citus coordinator (docs/distributed.md): it applies the
// migrations, then distributes every idemgen table by scope_id, co-located with the records,
// with scope_id added to each primary key (migrations.CitusSQL, which `idemgen sql
// --distributed citus` prints). It is safe on every start and from several replicas at once, as
// Migrate is: the distribution steps already done are skipped. It fails, with the reason, when
// the database has no citus extension, or when idempotency_records is partitioned (the
// partitioned layout is for a single PostgreSQL). Business tables are yours to distribute:
// co-locate them with idempotency_records by their scope_id column.
func MigrateDistributed(ctx context.Context, pool *pgxpool.Pool) error {
	var citus bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&citus); err != nil {
		return fmt.Errorf("migrate distributed: %w", err)
	}
	if !citus {
		return errors.New("migrate distributed: the citus extension is not installed in this database (CREATE EXTENSION citus on the coordinator, docs/distributed.md)")
	}
	if err := Migrate(ctx, pool); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLockID)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, migrations.CitusSQL())
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate distributed: %w", err)
	}
	return nil
}

// migrate applies ms one transaction each, in order, retrying one that timed out on its locks
// or met a concurrent replica's DDL.
func migrate(ctx context.Context, pool *pgxpool.Pool, ms []migrations.Migration, opts MigrateOptions) error {
	deadline := time.Now().Add(opts.Retry)
	for _, m := range ms {
		backoff := 50 * time.Millisecond
		for attempt := 1; ; attempt++ {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return migrateTx(ctx, tx, m, opts) })
			if err == nil {
				break
			}
			retry := isConcurrentDDL(err) && attempt < 5
			if isLockTimeout(err) {
				retry = time.Now().Before(deadline)
				if !retry {
					return fmt.Errorf("migrate: %s waited %s for its locks (%d attempts of lock_timeout %s): a long transaction holds idempotency_records; end it, or retry: %w",
						m.Name, opts.Retry, attempt, opts.LockTimeout, err)
				}
			}
			if !retry {
				return fmt.Errorf("migrate: %w", err)
			}
			// Half the backoff plus a random part of the other half: replicas that all wait
			// for the same old transaction do not come back at the same instant.
			d := backoff/2 + rand.N(backoff/2+1)
			select {
			case <-ctx.Done():
				return fmt.Errorf("migrate: %s: %w (last attempt: %w)", m.Name, ctx.Err(), err)
			case <-time.After(d):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
	return nil
}

// migrateTx applies m in tx unless it is applied already.
func migrateTx(ctx context.Context, tx pgx.Tx, m migrations.Migration, opts MigrateOptions) error {
	if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", lockTimeout(opts.LockTimeout)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SAVEPOINT idemgen_lock"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLockID)); err != nil {
		if isLockTimeout(err) {
			return err // another replica is migrating: its lock, tried again
		}
		// No advisory locks on this engine: carry on, relying on retries.
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT idemgen_lock"); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS idemgen_schema_versions (
	version    integer     PRIMARY KEY,
	name       text        NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("versions table: %w", err)
	}
	var kind *string
	if err := tx.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = to_regclass('idempotency_records')").Scan(&kind); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	switch {
	case kind == nil:
	case !hasColumn(ctx, tx, "key_id"):
		// idemgen 0.1.0 kept raw scopes and keys in scope and key columns, and recorded its
		// schema as version 1 too: applying the later versions over it would leave a table every
		// request fails on.
		return errors.New("idempotency_records has the layout of idemgen 0.1.0 (scope and key columns), which this version does not read: " +
			"rename it and clear idemgen_schema_versions, then migrate again (CHANGELOG.md, Unreleased, Breaking: the store's table)")
	case opts.Partitioned && *kind != "p":
		return errors.New("idempotency_records exists with the plain layout: use Migrate and Options{Partitioned: false}")
	case !opts.Partitioned && *kind == "p":
		return errors.New("idempotency_records is partitioned: use MigratePartitioned and Options{Partitioned: true}")
	}
	var applied bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM idemgen_schema_versions WHERE version = $1)", m.Version).Scan(&applied); err != nil {
		return err
	}
	if applied {
		return nil
	}
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO idemgen_schema_versions (version, name) VALUES ($1, $2)
ON CONFLICT (version) DO NOTHING`, m.Version, m.Name); err != nil {
		return fmt.Errorf("%s: record version: %w", m.Name, err)
	}
	return nil
}

// hasColumn reports whether idempotency_records has the column; an error reading the catalog
// counts as having it, so that the migration goes on and reports its own error.
func hasColumn(ctx context.Context, tx pgx.Tx, name string) bool {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = to_regclass('idempotency_records') AND attname = $1 AND NOT attisdropped)`, name).Scan(&ok)
	return ok || err != nil
}

// isConcurrentDDL reports the errors two replicas creating the same objects at once can meet
// without a lock: duplicate catalog rows, duplicate objects, serialization failures.
func isConcurrentDDL(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "23505", "42P07", "42710", "40001", "40P01":
		return true
	}
	return false
}
