package pgstore

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
)

// The store's SQL, all of it. Every statement names the full primary key (scope, key), so on a
// distributed engine sharded by scope each one is routed to one shard; none keeps session state
// beyond its own transaction (set_config(..., true) and SET LOCAL end with it). Durations travel
// as integer microseconds and are added to the database clock: the application's clock is never
// used.

// recordCols reads a record together with the three clock decisions made by the database:
// whether it is still live, how long its lease has left and, for a completed record, how long
// it stays live. A completed record lives until expires_at; a running one lives until it is
// completed or released: its owner may still complete it, or the same request take it over,
// however long the call takes, so no other request may see the key as new (only the sweeper
// removes a running record, long after its lease ended: Sweeper.AbandonAfter). now() is the
// start of the statement's transaction, which comes after the caller sent it: a cache that
// counts the remaining retention from before its call never keeps the record longer than the
// database does.
const recordCols = `r.operation, r.fingerprint, r.fingerprint_version, r.state, r.fencing_token,
	(r.state = 'running' OR r.expires_at > now()) AS live,
	COALESCE(CAST(EXTRACT(EPOCH FROM (r.locked_until - now())) * 1000000 AS bigint), 0) AS lease_left_us,
	r.response_status, r.response_headers, r.response_body, r.body_omitted,
	CASE WHEN r.state = 'completed' THEN CAST(EXTRACT(EPOCH FROM (r.expires_at - now())) * 1000000 AS bigint) END AS retention_left_us`

// sqlRead is the replay read: one plain SELECT, no lock, no transaction id.
const sqlRead = `SELECT ` + recordCols + ` FROM idempotency_records r WHERE r.scope = $1 AND r.key = $2`

// A running record's expires_at is a retention after its lease ends (Extend and TakeOver keep
// that gap); it orders the sweeper's work, but a running record never counts as expired.

// sqlReserve inserts a running lease-mode record unless (scope, key) exists, and returns the
// existing record as of the statement's snapshot. ON CONFLICT DO NOTHING takes no row lock and,
// when the conflicting row is committed, assigns no transaction id: a replay writes nothing.
// When the conflicting row is not yet committed the statement waits for its transaction, and
// the row that then appears is newer than the snapshot, so the result shows neither a claim nor
// a record: callers re-read (READ COMMITTED). $6 fencing token, $7 retention (µs), $8 lease (µs,
// 0 = no lease).
const sqlReserve = `WITH ins AS (
	INSERT INTO idempotency_records
		(scope, key, operation, fingerprint, fingerprint_version, state, fencing_token,
		 locked_until, created_at, expires_at)
	VALUES ($1, $2, $3, $4, $5, 'running', $6,
		CASE WHEN $8::bigint > 0 THEN now() + $8::bigint * interval '1 microsecond' END, now(),
		now() + ($7::bigint + $8::bigint) * interval '1 microsecond')
	ON CONFLICT (scope, key) DO NOTHING
	RETURNING fencing_token
)
SELECT (SELECT fencing_token FROM ins) AS claimed, ` + recordCols + `
FROM (SELECT 1) AS one LEFT JOIN idempotency_records r ON r.scope = $1 AND r.key = $2`

// claimLock is how an atomic-mode claim learns that a concurrent claim of the same key is still
// running. Atomic claims are uncommitted while their handler runs, so the row itself is
// invisible; an INSERT that meets it waits for the whole handler.
type claimLock uint8

const (
	// lockTry takes a transaction-scoped advisory lock on a hash of (scope, key) without waiting:
	// a claimant that finds it taken answers 409 at once, and claims never wait on each other's
	// rows, so the claim's lock_timeout only bounds unrelated waits (relation extension under
	// load, which a short lock_timeout alone would turn into false 409s for new keys).
	lockTry claimLock = iota
	// lockWait waits for the advisory lock under lock_timeout = Claim.Wait, so a duplicate
	// replays if the first request commits in time.
	lockWait
	// lockNone is the portable path (Options.NoAdvisoryLocks): the INSERT waits on the
	// conflicting row under lock_timeout = Options.ConflictTimeout.
	lockNone
)

// expr is the SQL boolean that takes the lock ($9 is the lock key); true when it is ours.
func (l claimLock) expr() string {
	switch l {
	case lockTry:
		return "pg_try_advisory_xact_lock($9::bigint)"
	case lockWait:
		return "pg_advisory_xact_lock($9::bigint)::text IS NOT NULL"
	default:
		return "$9::bigint IS NOT NULL"
	}
}

// sqlClaimAtomic (ClaimPipelined, and claims without advisory locks) reads the key's record
// first, takes the claim lock only when there is none, and inserts a running row only under the
// lock. It returns our token when we claimed, whether the lock was free (false: a concurrent
// claim holds the key), and the record. Built once per lock kind.
var sqlClaimAtomic = [...]string{
	lockTry:  buildClaimAtomic(lockTry),
	lockWait: buildClaimAtomic(lockWait),
	lockNone: buildClaimAtomic(lockNone),
}

func buildClaimAtomic(l claimLock) string {
	return `WITH cur AS (SELECT ` + recordCols + ` FROM idempotency_records r WHERE r.scope = $1 AND r.key = $2),
lk AS (SELECT CASE WHEN EXISTS (SELECT 1 FROM cur) THEN true ELSE ` + l.expr() + ` END AS ok),
ins AS (
	INSERT INTO idempotency_records
		(scope, key, operation, fingerprint, fingerprint_version, state, fencing_token,
		 locked_until, created_at, expires_at)
	SELECT $1, $2, $3, $4, $5, 'running', $6,
		CASE WHEN $8::bigint > 0 THEN now() + $8::bigint * interval '1 microsecond' END, now(),
		now() + ($7::bigint + $8::bigint) * interval '1 microsecond'
	WHERE (SELECT ok FROM lk) AND NOT EXISTS (SELECT 1 FROM cur)
	ON CONFLICT (scope, key) DO NOTHING
	RETURNING fencing_token
)
SELECT (SELECT fencing_token FROM ins) AS claimed, (SELECT ok FROM lk) AS free, cur.*
FROM (SELECT 1) AS one LEFT JOIN cur ON true`
}

// sqlLockOnly takes the claim lock of each kind ($1 is the lock key) and returns whether it is
// ours. Built once per lock kind.
var sqlLockOnly = [...]string{
	lockTry:  "SELECT " + strings.ReplaceAll(lockTry.expr(), "$9", "$1") + " AS ok",
	lockWait: "SELECT " + strings.ReplaceAll(lockWait.expr(), "$9", "$1") + " AS ok",
	lockNone: "SELECT " + strings.ReplaceAll(lockNone.expr(), "$9", "$1") + " AS ok",
}

// sqlLockOrStop takes the claim lock ($1) or fails (SQLSTATE 22P02), so that the handler's
// statement queued behind it in the same pipeline never runs for a duplicate
// (ClaimWithStatement).
const sqlLockOrStop = `SELECT CAST(CASE WHEN pg_try_advisory_xact_lock($1::bigint) THEN '1'
	ELSE 'idemgen: the key is claimed by a concurrent request; this claim stops here (409)' END AS integer)`

// sqlClaimedOrStop fails (SQLSTATE 22P02) unless this transaction holds the running record with
// its claim token. In the pipelined claim it stands between the claim and BEGIN: when the key
// already had a record, the failure ends the pipeline's implicit transaction, so BEGIN never
// runs and the replay needs no ROLLBACK round trip.
const sqlClaimedOrStop = `SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM idempotency_records
	WHERE scope = $1 AND key = $2 AND fencing_token = $3 AND state = 'running')
	THEN '1' ELSE 'idemgen: the key already has a record; this claim stops here (not an error)' END AS integer)`

// sqlTakeExpired reuses the row of an expired record for a new claim (the key counts as absent
// once expires_at has passed). The token grows, so it stays monotonic per key. $6 is the new
// token for atomic claims, or NULL to take fencing_token + 1 (lease mode).
const sqlTakeExpired = `UPDATE idempotency_records SET
	operation = $3, fingerprint = $4, fingerprint_version = $5, state = 'running',
	fencing_token = COALESCE($6::bigint, fencing_token + 1),
	locked_until = CASE WHEN $8::bigint > 0 THEN now() + $8::bigint * interval '1 microsecond' END,
	response_status = NULL, response_headers = NULL, response_body = NULL, body_omitted = false,
	created_at = now(), completed_at = NULL,
	expires_at = now() + ($7::bigint + $8::bigint) * interval '1 microsecond'
WHERE scope = $1 AND key = $2 AND expires_at <= now() AND state = 'completed'
RETURNING fencing_token`

// sqlTakeExpiredAtomic is sqlTakeExpired under the claim lock of each kind; it returns whether
// the lock was free and the new token when the row was taken.
var sqlTakeExpiredAtomic = [...]string{
	lockTry:  buildTakeExpiredAtomic(lockTry),
	lockWait: buildTakeExpiredAtomic(lockWait),
	lockNone: buildTakeExpiredAtomic(lockNone),
}

func buildTakeExpiredAtomic(l claimLock) string {
	return `WITH lk AS (SELECT ` + l.expr() + ` AS ok),
upd AS (` + strings.Replace(sqlTakeExpired, "WHERE scope = $1", "WHERE (SELECT ok FROM lk) AND scope = $1", 1) + `)
SELECT (SELECT ok FROM lk) AS free, (SELECT fencing_token FROM upd) AS token`
}

// sqlTakeOverLease moves an expired lease to a new owner with the next fencing token; the old
// owner's completion then fails its compare-and-swap. $3 old token, $4 lease (µs).
const sqlTakeOverLease = `UPDATE idempotency_records SET
	fencing_token = fencing_token + 1,
	locked_until = now() + $4::bigint * interval '1 microsecond',
	expires_at = GREATEST(expires_at, now() + $4::bigint * interval '1 microsecond' + (expires_at - locked_until))
WHERE scope = $1 AND key = $2 AND fencing_token = $3 AND state = 'running' AND locked_until <= now()
RETURNING fencing_token`

// sqlExtendLease is the heartbeat: it moves locked_until while the token is still ours.
const sqlExtendLease = `UPDATE idempotency_records SET
	locked_until = now() + $4::bigint * interval '1 microsecond',
	expires_at = GREATEST(expires_at, now() + $4::bigint * interval '1 microsecond' + (expires_at - locked_until))
WHERE scope = $1 AND key = $2 AND fencing_token = $3 AND state = 'running'`

// sqlLockLease opens a lease-mode completion: it locks the running record under our token, so a
// takeover waits for this transaction and then finds the record completed.
const sqlLockLease = `UPDATE idempotency_records SET locked_until = locked_until
WHERE scope = $1 AND key = $2 AND fencing_token = $3 AND state = 'running'`

// sqlComplete stores the final response under our token. Retention counts from completion.
// $4 status, $5 headers (JSON), $6 body, $7 body omitted, $8 retention (µs).
const sqlComplete = `UPDATE idempotency_records SET
	state = 'completed', response_status = $4, response_headers = $5, response_body = $6,
	body_omitted = $7, locked_until = NULL, completed_at = statement_timestamp(),
	expires_at = statement_timestamp() + $8::bigint * interval '1 microsecond'
WHERE scope = $1 AND key = $2 AND fencing_token = $3 AND state = 'running'`

// sqlCompleteOrStop wraps sqlComplete so that when it updates nothing the statement fails and
// the COMMIT pipelined behind it never runs: the handler's writes cannot commit without the
// record.
const sqlCompleteOrStop = `WITH done AS (` + sqlComplete + ` RETURNING 1)
SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM done) THEN '1'
	ELSE 'idemgen: the record is no longer owned by this request' END AS integer)`

// sqlInsertCompleted stores the completed record of a claim that holds only the advisory lock.
// A row that exists anyway (a claim that did not take the advisory lock: another replica with
// NoAdvisoryLocks, or a lease-mode operation given the same key, or a completion that slipped
// in between our read and our lock) fails the INSERT with unique_violation, so the COMMIT
// pipelined behind it never runs. $6 claim id, $7 status, $8 headers (JSON), $9 body, $10 body
// omitted, $11 retention (µs).
const sqlInsertCompleted = `INSERT INTO idempotency_records
	(scope, key, operation, fingerprint, fingerprint_version, state, fencing_token,
	 response_status, response_headers, response_body, body_omitted, created_at, completed_at, expires_at)
VALUES ($1, $2, $3, $4, $5, 'completed', $6, $7, $8, $9, $10, now(), statement_timestamp(),
	statement_timestamp() + $11::bigint * interval '1 microsecond')`

// sqlRelease frees the key after a failed lease-mode handler: the retry is a new request.
const sqlRelease = `DELETE FROM idempotency_records
WHERE scope = $1 AND key = $2 AND fencing_token = $3 AND state = 'running'`

// Statements around a claim that set and reset its lock wait. set_config(..., true) and SET
// LOCAL end with the transaction: no session state outlives it.
const (
	sqlSetLockTimeout   = "SELECT set_config('lock_timeout', $1, true)"
	sqlResetLockTimeout = "SET LOCAL lock_timeout TO DEFAULT"
)

// sweepable is the rows the sweeper may delete: completed records past their expiry, and running
// records whose lease ended more than $2 (µs, Sweeper.AbandonAfter) ago, abandoned by an owner
// that never completed and a client that never retried.
const sweepable = `expires_at <= now() AND (state = 'completed' OR locked_until <= now() - $2::bigint * interval '1 microsecond')`

// sqlSweep deletes up to $1 sweepable rows, oldest first, skipping rows other sweepers hold.
const sqlSweep = `DELETE FROM idempotency_records r
USING (SELECT scope, key FROM idempotency_records
       WHERE ` + sweepable + ` ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) d
WHERE r.scope = d.scope AND r.key = d.key AND r.` + sweepable

// sqlSweepPortable is sqlSweep without SKIP LOCKED, for engines that lack it in subqueries.
const sqlSweepPortable = `DELETE FROM idempotency_records r
USING (SELECT scope, key FROM idempotency_records
       WHERE ` + sweepable + ` ORDER BY expires_at LIMIT $1) d
WHERE r.scope = d.scope AND r.key = d.key AND r.` + sweepable

// claimLockKey is the advisory lock key of (scope, key): 64 bits of SHA-256 over a framing that
// no other use of advisory locks is likely to share.
func claimLockKey(scope, key string) int64 {
	h := sha256.New()
	h.Write([]byte("idemgen/claim-lock/v1\x00"))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(scope)))
	h.Write(n[:])
	h.Write([]byte(scope))
	h.Write([]byte(key))
	return int64(binary.BigEndian.Uint64(h.Sum(nil)[:8]))
}
