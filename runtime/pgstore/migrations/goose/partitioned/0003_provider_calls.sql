-- +goose Up
-- idemgen idempotency store, version 3: uncertain outcomes and the provider call log
-- (docs/runtime.md, "Uncertain outcomes and reconciliation").
-- A running lease-mode record is marked uncertain when its completion failed after its call
-- phase had started a provider call, or when a retry took it over; a record whose lease ended in
-- the call phase (a killed process) is uncertain without a mark. 0: not marked; 2: completion
-- failed; 3: commit outcome unknown; 4: taken over (store.Uncertainty).
ALTER TABLE idempotency_records ADD COLUMN IF NOT EXISTS uncertain smallint NOT NULL DEFAULT 0;
ALTER TABLE idempotency_records ADD COLUMN IF NOT EXISTS uncertain_at timestamptz;

-- The provider call log: one row per provider idempotency key (Lease.ProviderKey), written before
-- the handler calls the provider and settled when the record completes or is released. It
-- outlives the records (Sweeper.CallRetention, 30 days by default), so that a provider's daily
-- report can be matched against it after the records' retention (`idemgen reconcile`).
CREATE TABLE IF NOT EXISTS idempotency_provider_calls (
    -- The 32 bytes of the provider key's 64 hex digits: SHA-256 (or HMAC-SHA256 under
    -- Config.ProviderKeySecret) over the scope, the key and the label, never the key itself.
    provider_key        bytea       NOT NULL,
    -- The record's digests (idempotency_records.scope_id and key_id).
    scope_id            bigint      NOT NULL,
    key_id              uuid        NOT NULL,
    -- The label the handler gave ProviderKey ("charge"), and the request's operation and
    -- fingerprint.
    label               text        NOT NULL,
    operation           text        NOT NULL,
    fingerprint         bytea       NOT NULL,
    fingerprint_version smallint    NOT NULL,
    -- The fencing token of the claim that last started the call, and the operation's retention
    -- in microseconds (a resolved record replays that long).
    fencing_token       bigint      NOT NULL,
    retention_us        bigint      NOT NULL,
    -- What the call charges, when the handler said so (runtime.Call): minor units and an
    -- ISO 4217 code; NULL otherwise.
    amount              bigint,
    currency            text,
    -- When the call was first recorded (the database clock).
    started_at          timestamptz NOT NULL,
    -- 0 started (no completion known), 1 completed, 2 released, 3 resolved as completed,
    -- 4 resolved as released (store.CallOutcome); the completion's response status (1, 3), and
    -- when the outcome was written.
    outcome             smallint    NOT NULL,
    response_status     smallint    NOT NULL,
    settled_at          timestamptz,
    PRIMARY KEY (provider_key)
);

-- A record's calls (completion, release, support reads).
CREATE INDEX IF NOT EXISTS idempotency_provider_calls_key_id_idx
    ON idempotency_provider_calls (key_id);
-- Calls by time: reconciliation's window and the sweeper.
CREATE INDEX IF NOT EXISTS idempotency_provider_calls_started_at_idx
    ON idempotency_provider_calls (started_at);

-- The audit trail of resolutions that an operator confirmed (`idemgen reconcile --resolve`):
-- one row per settled claim, never deleted by idemgen.
CREATE TABLE IF NOT EXISTS idempotency_resolutions (
    scope_id            bigint      NOT NULL,
    key_id              uuid        NOT NULL,
    -- The claim's fencing token when it was resolved.
    fencing_token       bigint      NOT NULL,
    provider_key        bytea       NOT NULL,
    operation           text        NOT NULL,
    -- 'completed' (with the provider's outcome) or 'released'; whether a running record was
    -- written (false: it was gone, only the call log was settled).
    action              text        NOT NULL,
    record_written      boolean     NOT NULL,
    -- The stored response status of a completion, else 0.
    response_status     smallint    NOT NULL,
    -- The reconciliation class of the finding, the provider's report line (a JSON object), who
    -- confirmed it and why.
    class               text        NOT NULL,
    report              jsonb       NOT NULL,
    operator            text        NOT NULL,
    reason              text        NOT NULL,
    resolved_at         timestamptz NOT NULL,
    PRIMARY KEY (key_id, fencing_token, provider_key)
);

-- +goose Down
DROP TABLE IF EXISTS idempotency_resolutions;
DROP TABLE IF EXISTS idempotency_provider_calls;
ALTER TABLE idempotency_records DROP COLUMN IF EXISTS uncertain_at;
ALTER TABLE idempotency_records DROP COLUMN IF EXISTS uncertain;
