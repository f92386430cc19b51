package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/pgstore/migrations"
)

// migrateLockID is the advisory lock key Migrate holds (transaction-scoped), "idemgen" in ASCII.
const migrateLockID = 0x6964656d67656e

// Migrate creates or upgrades the idempotency schema. It is safe on every start and from several
// replicas at once: each run is one transaction that takes a transaction-scoped advisory lock
// (engines without advisory locks fall back to retrying the transaction when a concurrent
// replica created the same object first), applies the embedded migrations missing from
// idemgen_schema_versions, and records them. It returns the store's error, wrapped.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations.Up()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return migrate(ctx, pool, ms, false)
}

// MigratePartitioned is Migrate for the layout partitioned by expiry (Options.Partitioned;
// PostgreSQL 14 or later), then creates the partitions of the coming days with the
// PartitionSweeper's defaults (run a PartitionSweeper to keep them coming and to drop the old
// ones). It fails if the table exists with the plain layout, and Migrate fails on a
// partitioned one: the layouts do not convert into each other.
func MigratePartitioned(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations.UpPartitioned()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := migrate(ctx, pool, ms, true); err != nil {
		return err
	}
	if err := (&PartitionSweeper{Pool: pool}).create(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
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

func migrate(ctx context.Context, pool *pgxpool.Pool, ms []migrations.Migration, partitioned bool) error {
	var err error
	for attempt := 0; ; attempt++ {
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return migrateTx(ctx, tx, ms, partitioned) })
		if err == nil || attempt >= 4 || !isConcurrentDDL(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func migrateTx(ctx context.Context, tx pgx.Tx, ms []migrations.Migration, partitioned bool) error {
	if _, err := tx.Exec(ctx, "SAVEPOINT idemgen_lock"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLockID)); err != nil {
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
	case partitioned && *kind != "p":
		return errors.New("idempotency_records exists with the plain layout: use Migrate and Options{Partitioned: false}")
	case !partitioned && *kind == "p":
		return errors.New("idempotency_records is partitioned: use MigratePartitioned and Options{Partitioned: true}")
	}
	applied := map[int]bool{}
	rows, err := tx.Query(ctx, "SELECT version FROM idemgen_schema_versions")
	if err != nil {
		return err
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return err
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO idemgen_schema_versions (version, name) VALUES ($1, $2)
ON CONFLICT (version) DO NOTHING`, m.Version, m.Name); err != nil {
			return fmt.Errorf("%s: record version: %w", m.Name, err)
		}
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
