-- idemgen idempotency store, version 4 (the layout partitioned by expiry): tombstones
-- (docs/runtime.md, "Tombstones after the retention"). The tombstones table is the plain
-- table's in both layouts: its rows are small, and the sweeper deletes them by forget_at.
-- A completed record's response is kept for its retention; its key is remembered longer, until
-- forget_at, by a tombstone written with the record (in the same statement: this layout's reads
-- never see an expired record, whose partition is dropped whole), so that a retry arriving after
-- the retention is refused (410 result-expired) instead of running the operation a second time.
-- A tombstone is compact (under 100 bytes of heap per row): the record's digests, the first 16
-- bytes of its fingerprint and the framing's version, its response status's class, and two
-- times; no operation, no response. The fingerprint frames the
-- operation, so a tombstone tells the same request from any other without it.
CREATE TABLE IF NOT EXISTS idempotency_tombstones (
    -- The record's digests (idempotency_records.scope_id and key_id).
    scope_id            bigint      NOT NULL,
    key_id              uuid        NOT NULL,
    -- When the request completed, and when its key is forgotten (the new request with the key
    -- then runs), by the database clock.
    completed_at        timestamptz NOT NULL,
    forget_at           timestamptz NOT NULL,
    -- The fingerprint's framing version, and the class of the stored response's status (2 for
    -- a 2xx, 4 for a 4xx).
    fingerprint_version smallint    NOT NULL,
    status_class        smallint    NOT NULL,
    -- The fingerprint's first 16 bytes.
    fingerprint         bytea       NOT NULL,
    PRIMARY KEY (key_id)
);

-- The sweeper deletes forgotten tombstones in forget_at order through this index.
CREATE INDEX IF NOT EXISTS idempotency_tombstones_forget_at_idx
    ON idempotency_tombstones (forget_at);

-- A completed record's forget_at (NULL: it keeps no tombstone, or it is running). Past its
-- expires_at, a record whose forget_at has not passed is its own tombstone until the sweeper
-- moves it into idempotency_tombstones (the plain table: no tombstone row is written on the
-- request path); the partitioned layout, whose reads never see an expired row, writes the
-- tombstone row with the completion.
ALTER TABLE idempotency_records ADD COLUMN IF NOT EXISTS forget_at timestamptz;
