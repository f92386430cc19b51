-- idemgen idempotency store, version 1.
-- One row per (scope, key). The scope (tenant) leads the primary key so the table can be
-- distributed by it (Citus distribution column, YugabyteDB hash key); see docs/distributed.md.
-- Every time in this table comes from the database clock (now()), never from an application.
-- scope and key compare byte for byte (COLLATE "C"): keys are opaque ASCII strings, and the
-- database's default collation would make every index lookup call the locale's strcoll.
CREATE TABLE IF NOT EXISTS idempotency_records (
    -- The tenant the ScopeFunc returned.
    scope               text        COLLATE "C" NOT NULL,
    -- The idempotency key as the client sent it (RFC 8941 quotes removed). For operations with
    -- `scope: operation` it is the operationId, one space, then the key: keys never contain a
    -- space, so the two forms cannot collide.
    key                 text        COLLATE "C" NOT NULL,
    -- The operationId that claimed the key (a key reused on another operation is a 422).
    operation           text        NOT NULL,
    -- SHA-256 fingerprint of the request and the framing version that produced it.
    fingerprint         bytea       NOT NULL,
    fingerprint_version smallint    NOT NULL,
    -- 'running' while a lease-mode handler works (atomic claims are never visible running);
    -- 'completed' once a final response is stored.
    state               text        NOT NULL CHECK (state IN ('running', 'completed')),
    -- Lease mode: 1 for the first claim, +1 per takeover; completion is a compare-and-swap on it.
    -- Atomic mode: a random claim id (never seen outside the claiming transaction).
    fencing_token       bigint      NOT NULL,
    -- Lease mode: until when the running claim blocks other requests.
    locked_until        timestamptz,
    -- The stored response: status, allow-listed headers (JSON object of string arrays), body.
    response_status     smallint,
    response_headers    jsonb,
    response_body       bytea,
    -- The body was above the stored-response cap: it was delivered once and is not replayed.
    body_omitted        boolean     NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL,
    completed_at        timestamptz,
    -- After this instant the record counts as absent, even while the row still exists.
    expires_at          timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);

-- The sweeper deletes expired rows in expires_at order through this index.
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at_idx
    ON idempotency_records (expires_at);
