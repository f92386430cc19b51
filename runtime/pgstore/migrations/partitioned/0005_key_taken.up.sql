-- idemgen idempotency store, version 5: idempotency_key_taken, the re-read of a new key under its
-- claim lock (pgstore.ClaimWithStatement.LockAtRead; docs/runtime.md, "The claim in the read").
-- The partitioned layout reads live records only (an expired one is never reused).
-- The read of a new key takes the key's advisory lock in the statement that reads the record;
-- under READ COMMITTED that statement's snapshot is older than the lock, so a claim that
-- committed and released the lock in between is not in it. The read then calls this function,
-- only once the lock is ours: VOLATILE, it runs its query under a snapshot of its own, taken when
-- it is called (PostgreSQL's "Function Volatility Categories"), and its body reads a table, so
-- PostgreSQL never inlines it into the caller's query (which would read under the caller's
-- snapshot). It answers whether the key has a record now: the claim then gives the lock back and
-- reads again. $1 is scope_id, $2 key_id.
CREATE OR REPLACE FUNCTION idempotency_key_taken(bigint, uuid) RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
SELECT EXISTS (SELECT 1 FROM idempotency_records r WHERE r.key_id = $2 AND r.scope_id = $1
    AND (r.response_status = 0 OR r.expires_at > now()))
$$;
