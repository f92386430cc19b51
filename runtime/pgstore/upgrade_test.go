package pgstore_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
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
