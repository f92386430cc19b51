-- idemgen idempotency store, version 1, partitioned by expiry (the plain table is in
-- migrations/; this layout needs PostgreSQL 14 or later: docs/runtime.md, "Retention by partitions").
-- One row per (scope, key), stored under digests: PostgreSQL never sees a raw key or scope, so
-- none can appear in its log (a constraint's DETAIL prints digests) and index rows have a fixed
-- size whatever the scope's length. pgstore.Digest computes them; docs/runtime.md shows the same
-- in SQL. Every time in this table comes from the database clock (now()), never from an
-- application.
CREATE TABLE IF NOT EXISTS idempotency_records (
    -- 64 bits of SHA-256 over the scope (the tenant the ScopeFunc returned): the column to
    -- distribute the table by on Citus or YugabyteDB (docs/distributed.md).
    scope_id            bigint      NOT NULL,
    -- 128 bits of SHA-256 over the scope and the key (the key as the client sent it, RFC 8941
    -- quotes removed; for `scope: operation`, the operationId, one space, then the key).
    key_id              uuid        NOT NULL,
    -- When the key was claimed (the claiming transaction's start).
    created_at          timestamptz NOT NULL,
    -- After this instant the record counts as absent, even while the row still exists.
    expires_at          timestamptz NOT NULL,
    -- Running (lease mode): until when the claim blocks other requests. Completed: when it
    -- completed.
    locked_until        timestamptz NOT NULL,
    -- Lease mode: 1 for the first claim, +1 per takeover; completion is a compare-and-swap on it.
    -- Atomic mode: a random claim id (never seen outside the claiming transaction).
    fencing_token       bigint      NOT NULL,
    -- SHA-256 fingerprint of the request, and the version of the framing that produced it.
    fingerprint         bytea       NOT NULL,
    fingerprint_version smallint    NOT NULL,
    -- The stored final response's status; 0 while the record is running (lease mode: atomic
    -- claims are never visible before they complete).
    response_status     smallint    NOT NULL,
    -- The body was above the stored-response cap, or the scope's stored-bytes cap: it was
    -- delivered once and is not replayed.
    body_omitted        boolean     NOT NULL,
    -- The operationId that claimed the key (a key reused on another operation is a 422).
    operation           text        NOT NULL,
    -- The stored response's allow-listed headers (a JSON object of string arrays, UTF-8; empty
    -- while running) and its body.
    response_headers    bytea       NOT NULL,
    response_body       bytea       NOT NULL
) PARTITION BY RANGE (expires_at);

-- Lookups by key. A unique index of a partitioned table must contain the partition key, which
-- would make it useless here: one claim per key is guaranteed by the claim's advisory lock
-- instead (the partitioned layout always takes it; docs/runtime.md). Each partition holds a
-- range of expiry instants; the sweeper creates them ahead and drops them once every row in
-- them has expired: no row is ever deleted, so there is no expiry index either.
CREATE INDEX IF NOT EXISTS idempotency_records_key_id_idx
    ON idempotency_records (key_id);

-- PostgreSQL compresses stored bodies above about 2 KB itself (TOAST). lz4 (PostgreSQL 14 and
-- later, when built with it) does so in less than half of pglz's time at about the same size
-- (bench/README.md, "Compressing stored bodies"); where it is not available this does nothing.
DO $$
BEGIN
    ALTER TABLE idempotency_records ALTER COLUMN response_body SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
    NULL;
END
$$;

-- Counters of the per-scope limits (pgstore.Options.Limits): records completed per interval and
-- large response bodies' bytes stored per window, by scope. A counter is spread over a few slots so that
-- concurrent requests of one scope do not queue on one row lock until their commit.
CREATE TABLE IF NOT EXISTS idempotency_scope_usage (
    scope_id            bigint      NOT NULL,
    -- 1: records created, 2: response body bytes stored.
    kind                smallint    NOT NULL,
    -- The end of the interval counted, in seconds since the Unix epoch by the database clock;
    -- the sweeper deletes the rows of intervals that have ended.
    ends_at             bigint      NOT NULL,
    slot                smallint    NOT NULL,
    amount              bigint      NOT NULL,
    PRIMARY KEY (scope_id, kind, ends_at, slot)
);
