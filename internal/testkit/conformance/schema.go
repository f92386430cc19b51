package conformance

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// schemaSQL creates the business tables: one row per effect, each carrying its tenant so that
// GET /_effects can count one tenant's effects. The idempotency store's own table is the
// store's (pgstore.Migrate).
const schemaSQL = `
CREATE TABLE IF NOT EXISTS payments (
	id          text PRIMARY KEY,
	tenant      text NOT NULL,
	amount      bigint NOT NULL,
	currency    text NOT NULL,
	to_account  text NOT NULL,
	description text,
	created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS payments_tenant ON payments (tenant);
CREATE TABLE IF NOT EXISTS refunds (
	id         text PRIMARY KEY,
	tenant     text NOT NULL,
	payment_id text NOT NULL REFERENCES payments (id),
	amount     bigint NOT NULL,
	reason     text,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS refunds_tenant ON refunds (tenant);
CREATE TABLE IF NOT EXISTS orders (
	id         text PRIMARY KEY,
	tenant     text NOT NULL,
	payer_name text NOT NULL,
	lines      integer NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS orders_tenant ON orders (tenant);
CREATE TABLE IF NOT EXISTS transfers (
	id          text PRIMARY KEY,
	tenant      text NOT NULL,
	amount      bigint NOT NULL,
	destination text NOT NULL,
	created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS transfers_tenant ON transfers (tenant);
CREATE TABLE IF NOT EXISTS charges (
	id          text PRIMARY KEY,
	tenant      text NOT NULL,
	amount      bigint NOT NULL,
	currency    text NOT NULL,
	description text,
	metadata    jsonb, -- NULL when absent, "" when unset (metadata=), else the object
	items       jsonb,
	shipping    jsonb, -- as metadata
	created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS charges_tenant ON charges (tenant);
CREATE TABLE IF NOT EXISTS provider_charges (
	id                 text PRIMARY KEY,
	tenant             text NOT NULL,
	amount             bigint NOT NULL,
	provider_reference text NOT NULL,
	created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS provider_charges_tenant ON provider_charges (tenant);
-- The tips API (testdata/specs/nulls.yaml): a note is NULL when the tip has none.
CREATE TABLE IF NOT EXISTS tips (
	id         text PRIMARY KEY,
	tenant     text NOT NULL,
	amount     bigint NOT NULL,
	note       text,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS tips_tenant ON tips (tenant);
CREATE TABLE IF NOT EXISTS tip_updates (
	id           bigserial PRIMARY KEY,
	tenant       text NOT NULL,
	tip_id       text NOT NULL REFERENCES tips (id),
	note_cleared boolean NOT NULL,
	created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS tip_updates_tenant ON tip_updates (tenant);
`

// effectTables are the tables GET /_effects counts, each under its own name.
var effectTables = []string{"payments", "refunds", "orders", "transfers", "charges", "provider_charges", "tips", "tip_updates"}

// Migrate creates the business tables if they do not exist yet.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, schemaSQL); err != nil {
		return fmt.Errorf("conformance schema: %w", err)
	}
	return nil
}
