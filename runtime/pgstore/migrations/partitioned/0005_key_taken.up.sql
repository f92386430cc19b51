-- idemgen idempotency store, version 5: idempotency_key_taken, the re-read of a new key under its
-- claim lock (pgstore.ClaimWithStatement.LockAtRead; docs/runtime.md, "ClaimWithStatement{LockAtRead:
-- true}").
-- The partitioned layout reads live records only (an expired one is never reused).
-- The read of a new key takes the key's advisory lock in the statement that reads the record;
-- under READ COMMITTED that statement's snapshot is older than the lock, so a claim that
-- committed and released the lock in between is not in it. The read then calls this function,
-- only once the lock is ours: VOLATILE, it runs its query under a snapshot of its own, taken when
-- the query starts (PostgreSQL's "Function Volatility Categories"), and PostgreSQL never inlines
-- a PL/pgSQL function into the caller's query (which would read under the caller's snapshot).
-- PL/pgSQL rather than SQL: it keeps its query's plan for the session, where a LANGUAGE sql
-- function's body is parsed and planned at every call before PostgreSQL 18 (bench/README.md,
-- "One statement for LockAtRead's replay"). It answers whether the key has a record now: the
-- claim then gives the lock back and reads again. $1 is scope_id, $2 key_id.
CREATE OR REPLACE FUNCTION idempotency_key_taken(bigint, uuid) RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM idempotency_records r WHERE r.key_id = $2 AND r.scope_id = $1
        AND (r.response_status = 0 OR r.expires_at > now()));
END
$$;
