package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/pgstore/migrations"
)

// oldLayout is idemgen 0.1.0's table (its migration 0001, comments left out), with the version
// row its Migrate wrote.
const oldLayout = `CREATE TABLE idempotency_records (
    scope               text        COLLATE "C" NOT NULL,
    key                 text        COLLATE "C" NOT NULL,
    operation           text        NOT NULL,
    fingerprint         bytea       NOT NULL,
    fingerprint_version smallint    NOT NULL,
    state               text        NOT NULL CHECK (state IN ('running', 'completed')),
    fencing_token       bigint      NOT NULL,
    locked_until        timestamptz,
    response_status     smallint,
    response_headers    jsonb,
    response_body       bytea,
    body_omitted        boolean     NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL,
    completed_at        timestamptz,
    expires_at          timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_records_expires_at_idx ON idempotency_records (expires_at);
CREATE TABLE idemgen_schema_versions (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
INSERT INTO idemgen_schema_versions (version, name) VALUES (1, '0001_idempotency_records');
INSERT INTO idempotency_records VALUES ('acme', 'k-old-000000000001', 'createPayment', '\x00', 1, 'completed', 1, NULL,
    201, '{}', '', false, now(), now(), now() + interval '1 day');`

// A database migrated by idemgen 0.1.0: Migrate and MigratePartitioned refuse its table with
// an error that says what to do (version 2 applied over it would leave a table every request
// fails on), and the migration CHANGELOG.md gives makes it a database Migrate takes,
// keeping the old records aside.
func TestMigrateRefusesTheFirstLayout(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t, 4)
	if _, err := pool.Exec(ctx, oldLayout); err != nil {
		t.Fatal(err)
	}
	for name, migrate := range map[string]func(context.Context) error{
		"Migrate":            func(ctx context.Context) error { return pgstore.Migrate(ctx, pool) },
		"MigratePartitioned": func(ctx context.Context) error { return pgstore.MigratePartitioned(ctx, pool) },
	} {
		if err := migrate(ctx); err == nil || !strings.Contains(err.Error(), "0.1.0") || !strings.Contains(err.Error(), "CHANGELOG.md") {
			t.Errorf("%s on 0.1.0's table: %v, want an error naming the layout and the CHANGELOG", name, err)
		}
	}
	var indexes int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_indexes WHERE tablename = 'idempotency_records'").Scan(&indexes); err != nil || indexes != 2 {
		t.Errorf("the refused migration changed the old table: %d indexes (%v), want its 2", indexes, err)
	}

	changelog, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sql\n(.*?)```").FindSubmatch(changelog)
	if m == nil {
		t.Fatal("CHANGELOG.md has no SQL block for the table's migration")
	}
	if _, err := pool.Exec(ctx, string(m[1])); err != nil {
		t.Fatalf("the CHANGELOG's migration: %v\n%s", err, m[1])
	}
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate after the CHANGELOG's migration: %v", err)
	}
	var kept int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_records_v0_1").Scan(&kept); err != nil || kept != 1 {
		t.Errorf("the old records: %d (%v), want the 1 kept aside", kept, err)
	}
	var fresh int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_records WHERE key_id IS NOT NULL").Scan(&fresh); err != nil || fresh != 0 {
		t.Errorf("the new table: %d records (%v), want an empty one", fresh, err)
	}
}

// schemaOf describes the idempotency schema of pool's database, one sorted line per column,
// index, constraint, function and applied version, for comparing an upgraded database with a fresh one.
// With names false, the names of indexes and constraints are left out: two schemas then
// compare index by index by what each indexes.
func schemaOf(t *testing.T, pool *pgxpool.Pool, names bool) []string {
	t.Helper()
	ctx := context.Background()
	tables := []string{"idempotency_records", "idempotency_scope_usage", "idempotency_provider_calls", "idempotency_resolutions", "idemgen_schema_versions"}
	rows, err := pool.Query(ctx, `
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
       CASE WHEN a.attnotnull THEN ' not null' ELSE '' END ||
       coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') || ' compression ' || a.attcompression::text
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relname = ANY($1) AND c.relnamespace = current_schema()::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'index ' || t.relname || ' ' || CASE WHEN $2 THEN i.relname || ' ' ELSE '' END ||
       regexp_replace(pg_get_indexdef(x.indexrelid), '^CREATE (UNIQUE )?INDEX \S+ ON', 'CREATE \1INDEX ON')
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relname = ANY($1) AND t.relnamespace = current_schema()::regnamespace
UNION ALL
SELECT 'constraint ' || t.relname || ' ' || CASE WHEN $2 THEN k.conname || ' ' ELSE '' END || pg_get_constraintdef(k.oid)
FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid
WHERE t.relname = ANY($1) AND t.relnamespace = current_schema()::regnamespace
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text || ' ' || p.provolatile::text || ' ' || pg_get_function_result(p.oid) || ' ' || p.prosrc
FROM pg_proc p WHERE p.proname LIKE 'idempotency\_%' AND p.pronamespace = current_schema()::regnamespace
UNION ALL
SELECT 'version ' || version || ' ' || name FROM idemgen_schema_versions
ORDER BY 1`, tables, names)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// sameSchema fails the test with the lines that differ.
func sameSchema(t *testing.T, what string, got, want []string) {
	t.Helper()
	in := func(lines []string) map[string]bool {
		m := map[string]bool{}
		for _, l := range lines {
			m[l] = true
		}
		return m
	}
	g, w := in(got), in(want)
	for _, l := range want {
		if !g[l] {
			t.Errorf("%s: missing %s", what, l)
		}
	}
	for _, l := range got {
		if !w[l] {
			t.Errorf("%s: extra %s", what, l)
		}
	}
}

// applyUpTo migrates pool's database as the version whose schema was ms[:n] did: the files, and
// their rows in idemgen_schema_versions.
func applyUpTo(t *testing.T, pool *pgxpool.Pool, ms []migrations.Migration, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE idemgen_schema_versions (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:n] {
		if _, err := pool.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := pool.Exec(ctx, "INSERT INTO idemgen_schema_versions (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
}

// An upgrade from every release point ends in the schema a fresh database gets, index by index:
// from 0.1.0 (commit 1b4cdd7) by CHANGELOG.md's migration, names included; from 0.1.0 by the
// migration CHANGELOG.md gave first (which left the old table the new one's index names: the new
// table had no expiry index, and the sweeper read all of it), index by index; and from every
// schema version since (each point the unreleased line has passed through), on both layouts.
func TestUpgradeFromEveryReleasePoint(t *testing.T) {
	ctx := context.Background()
	for _, layout := range []struct {
		name        string
		partitioned bool
		up          func() ([]migrations.Migration, error)
	}{
		{"plain", false, migrations.Up},
		{"partitioned", true, migrations.UpPartitioned},
	} {
		t.Run(layout.name, func(t *testing.T) {
			opts := pgstore.MigrateOptions{Partitioned: layout.partitioned}
			fresh := pgtest.NewPool(t, 4)
			if err := pgstore.MigrateWith(ctx, fresh, opts); err != nil {
				t.Fatal(err)
			}
			want, wantByDefinition := schemaOf(t, fresh, true), schemaOf(t, fresh, false)
			if !slices.ContainsFunc(want, func(l string) bool { return strings.HasPrefix(l, "function idempotency_key_taken(bigint,uuid) v ") }) {
				t.Errorf("a fresh schema has no VOLATILE idempotency_key_taken(bigint, uuid) (migration 0006): %q", want)
			}
			ms, err := layout.up()
			if err != nil {
				t.Fatal(err)
			}
			for n := 1; n <= len(ms); n++ {
				t.Run(fmt.Sprintf("version %d", ms[n-1].Version), func(t *testing.T) {
					pool := pgtest.NewPool(t, 4)
					applyUpTo(t, pool, ms, n)
					if err := pgstore.MigrateWith(ctx, pool, opts); err != nil {
						t.Fatal(err)
					}
					sameSchema(t, "upgraded", schemaOf(t, pool, true), want)
				})
			}
			if layout.partitioned {
				return // 0.1.0 had the plain table only
			}
			t.Run("0.1.0 by CHANGELOG.md", func(t *testing.T) {
				pool := pgtest.NewPool(t, 4)
				from010(t, pool, changelogMigration(t))
				sameSchema(t, "upgraded from 0.1.0", schemaOf(t, pool, true), want)
			})
			t.Run("0.1.0 by the first CHANGELOG.md", func(t *testing.T) {
				pool := pgtest.NewPool(t, 4)
				from010(t, pool, firstChangelogMigration)
				sameSchema(t, "upgraded from 0.1.0", schemaOf(t, pool, false), wantByDefinition)
			})
		})
	}
}

// firstChangelogMigration is the migration from 0.1.0 that CHANGELOG.md gave before version 4:
// the old table's index and primary key kept the names the new table's take.
const firstChangelogMigration = `BEGIN;
ALTER TABLE idempotency_records RENAME TO idempotency_records_v0_1;
DELETE FROM idemgen_schema_versions;
COMMIT;`

// changelogMigration is the SQL block of CHANGELOG.md's entry on the 0.1.0 table.
func changelogMigration(t *testing.T) string {
	t.Helper()
	changelog, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sql\n(.*?)```").FindSubmatch(changelog)
	if m == nil {
		t.Fatal("CHANGELOG.md has no SQL block for the table's migration")
	}
	return string(m[1])
}

// from010 makes pool's database one that idemgen 0.1.0 migrated and served, moves its table
// aside with sql, and migrates.
func from010(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, oldLayout); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, sql); err != nil {
		t.Fatalf("the migration from 0.1.0: %v\n%s", err, sql)
	}
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate after the migration from 0.1.0: %v", err)
	}
}

// The adversary's rolling upgrade: a replica of the previous version holds a transaction open
// on the table (6 s in its run) while a new replica starts and migrates. Before, the
// migration's ALTER TABLE queued for its lock behind that transaction, and every request of
// every replica queued behind the ALTER (3.4-4.7 s). Now the migration gives up its place after
// its lock timeout and tries again: requests go on while the old transaction lasts (however
// long: the test holds it until they are done), and the migration completes once it ends.
func TestMigrationDoesNotStallTheFleet(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t, 8)
	ms, err := migrations.Up()
	if err != nil {
		t.Fatal(err)
	}
	applyUpTo(t, pool, ms, 2) // a replica of the version before provider calls (version 3's ALTER TABLE)
	old, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback(ctx)
	if _, err := old.Exec(ctx, "SELECT count(*) FROM idempotency_records"); err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	go func() {
		migrated <- pgstore.MigrateWith(ctx, pool, pgstore.MigrateOptions{LockTimeout: 100 * time.Millisecond})
	}()
	// The migration is waiting (and retrying) for its lock: requests go on meanwhile.
	eventually(t, "the migration to wait for its lock", func() bool {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return n > 0
	})
	for i := range 20 {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		var n int
		err := pool.QueryRow(rctx, "SELECT count(*) FROM idempotency_records WHERE scope_id = $1", int64(i)).Scan(&n)
		cancel()
		if err != nil {
			t.Fatalf("a request while the old transaction and the migration wait: %v", err)
		}
	}
	select {
	case err := <-migrated:
		t.Fatalf("the migration ended while the old transaction held the table: %v", err)
	default:
	}
	if err := old.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-migrated:
		if err != nil {
			t.Fatalf("the migration after the old transaction ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the migration did not complete after the old transaction ended")
	}
	if !hasUncertainColumn(t, pool) {
		t.Error("version 3's columns are missing after the migration")
	}
}

func hasUncertainColumn(t *testing.T, pool *pgxpool.Pool) bool {
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_name = 'idempotency_records' AND column_name = 'uncertain')`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// A migration that cannot get its locks within MigrateOptions.Retry fails, naming itself and
// the lock it waited for, and leaves the earlier migrations applied.
func TestMigrationGivesUpNamingItsLock(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t, 4)
	ms, err := migrations.Up()
	if err != nil {
		t.Fatal(err)
	}
	applyUpTo(t, pool, ms, 2)
	old, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback(ctx)
	if _, err := old.Exec(ctx, "SELECT count(*) FROM idempotency_records"); err != nil {
		t.Fatal(err)
	}
	err = pgstore.MigrateWith(ctx, pool, pgstore.MigrateOptions{LockTimeout: 20 * time.Millisecond, Retry: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), ms[2].Name) || !strings.Contains(err.Error(), "lock") {
		t.Errorf("MigrateWith behind a transaction that never ends: %v, want an error naming %s and its lock", err, ms[2].Name)
	}
}
