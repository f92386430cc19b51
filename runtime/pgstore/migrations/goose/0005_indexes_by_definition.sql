-- +goose Up
-- idemgen idempotency store, version 5: the indexes of idempotency_records by what they index,
-- not by their names. Index names are the schema's, not the table's: upgrading from idemgen 0.1.0
-- as CHANGELOG.md first said (the old table renamed aside, its index keeping its name) made
-- version 1's CREATE INDEX IF NOT EXISTS idempotency_records_expires_at_idx find the name taken
-- and build nothing, and the sweeper then read the whole table for each batch. Each index the
-- table lacks is built here under a name PostgreSQL picks free (the usual one, or with a digit
-- after it when another table holds that name). On a large table the build blocks the table's
-- writes while it runs: build the index first with CREATE INDEX CONCURRENTLY (docs/runtime.md,
-- "Online migrations"), and this builds nothing.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_index i
                   WHERE i.indrelid = 'idempotency_records'::regclass AND i.indpred IS NULL AND i.indexprs IS NULL
                     AND pg_get_indexdef(i.indexrelid, 1, true) = 'expires_at' AND i.indnatts = 1) THEN
        CREATE INDEX ON idempotency_records (expires_at);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_index i
                   WHERE i.indrelid = 'idempotency_records'::regclass AND i.indexprs IS NULL
                     AND pg_get_indexdef(i.indexrelid, 1, true) = 'locked_until' AND i.indnatts = 1
                     AND pg_get_expr(i.indpred, i.indrelid) = '(response_status = 0)') THEN
        CREATE INDEX ON idempotency_records (locked_until) WHERE response_status = 0;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Version 5 builds only indexes that versions 1 and 2 create: nothing to undo.
SELECT 1;
