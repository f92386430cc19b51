package pgstore

import (
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/runtime/store"
)

// The store's SQL, all of it. Records are stored under digests of their scope and key
// (Digest): no statement carries a raw key or scope, so PostgreSQL can never print one. Every
// statement names the record's full identity (scope_id and key_id), so on a distributed engine
// sharded by scope_id each one is routed to one shard; none keeps session state beyond its own
// transaction (set_config(..., true) and SET LOCAL end with it). Durations travel as integer
// microseconds and are added to the database clock: the application's clock is never used.
//
// The statements come in two sets, one per table layout (Options.Partitioned): the plain table,
// whose primary key makes every key unique, and the table partitioned by expiry, where a unique
// index cannot cover the key alone, so every claim holds the key's advisory lock and inserts a
// record only if no live one exists.

// recordCols reads a record together with the clock decisions made by the database: whether
// it is still live, how long its lease has left, for a completed record how long it stays live
// and, past that, how long it is still remembered (forget_left_us: the record is then its own
// tombstone, until the sweeper moves it into idempotency_tombstones), with when it completed. A completed record lives until expires_at; a running one (response_status 0)
// lives until it is completed or released: its owner may still complete it, or the same request
// take it over, however long the call takes, so no other request may see the key as new (only
// the sweeper removes a running record, long after its lease ended: Sweeper.AbandonAfter). now()
// is the start of the statement's transaction, which comes after the caller sent it: a cache
// that counts the remaining retention from before its call never keeps the record longer than
// the database does.
const recordCols = recordLiveCols + `,
	CAST(EXTRACT(EPOCH FROM (r.forget_at - now())) * 1000000 AS bigint) AS forget_left_us, r.locked_until AS done_at`

// recordLiveCols is recordCols without what only an expired record needs (forget_left_us,
// done_at): the record columns of read and readProbe (readCols).
const recordLiveCols = `r.operation, r.fingerprint, r.fingerprint_version, r.response_status, r.fencing_token,
	(r.response_status = 0 OR r.expires_at > now()) AS live,
	CAST(EXTRACT(EPOCH FROM (r.locked_until - now())) * 1000000 AS bigint) AS lease_left_us,
	r.response_headers, r.response_body, r.body_omitted,
	CASE WHEN r.response_status <> 0 THEN CAST(EXTRACT(EPOCH FROM (r.expires_at - now())) * 1000000 AS bigint) END AS retention_left_us`

// readCols is what read and readProbe return (readRow, a replay's read): recordLiveCols, then
// the key's tombstone in tombstoneCols' packing, NULL while the record is live: the expired
// record's own while it still remembers the key (the plain table's forget_at, its completion
// in locked_until), else the tombstones table's. 12 columns, one more than before tombstones.
const readCols = recordLiveCols + `,
	COALESCE(CASE WHEN r.response_status <> 0 AND r.expires_at <= now() AND r.forget_at > now() THEN
		int2send(r.fingerprint_version) || int2send(CAST(r.response_status / 100 AS smallint)) || timestamptz_send(r.locked_until)
		|| int8send(CAST(EXTRACT(EPOCH FROM (r.forget_at - now())) * 1000000 AS bigint)) || substring(r.fingerprint FROM 1 FOR 16) END,
	` + tombstonePacked + `) AS tomb`

// tombstoneCols reads the key's tombstone (the LATERAL subquery or the CTE "tb" of the reads,
// tombstoneCTE) as one bytea column, NULL when the key has a live record or no tombstone whose
// horizon runs: the fingerprint's version and the status class (2 bytes each), the completion
// (8: timestamptz_send's µs since 2000-01-01), how long the key is still remembered (8: µs),
// then the fingerprint's first bytes (store.TombstoneSumBytes), the integers big-endian
// (decodeTombstone). One column rather than five keeps a read's row within the 16 columns pgx
// describes without allocating: a replay pays nothing for the tombstone it does not read.
const tombstoneCols = tombstonePacked + ` AS tomb`

// tombstonePacked is tombstoneCols' value.
const tombstonePacked = `int2send(tb.fingerprint_version) || int2send(tb.status_class) || timestamptz_send(tb.completed_at)
	|| int8send(CAST(EXTRACT(EPOCH FROM (tb.forget_at - now())) * 1000000 AS bigint)) || tb.fingerprint`

// tombstoneWhere selects the tombstone of the record $1/$2 whose horizon runs, when gate holds.
// gate names only the statement's record (an outer column or a CTE), so PostgreSQL evaluates it
// once, as a one-time filter, before it reads the tombstones table: a key with a live record (a
// replay, a 409, a 422) never reads it.
func tombstoneWhere(gate string) string {
	return `SELECT t.fingerprint, t.fingerprint_version, t.status_class, t.completed_at, t.forget_at FROM idempotency_tombstones t
	WHERE ` + gate + ` AND t.key_id = $2 AND t.scope_id = $1 AND t.forget_at > now()`
}

// takenRow is the SQL condition on a record row r that its key is taken: the record is live,
// or past its expiry its forget_at has not passed (the record is its own tombstone).
const takenRow = `(r.response_status = 0 OR r.expires_at > now() OR r.forget_at > now())`

// tombstoneCTE is the CTE "tb" of the key's tombstone for statements whose record is the CTE
// named rec (recordCols): read only when rec has no row that takes the key.
func tombstoneCTE(rec string) string {
	return `tb AS (` + tombstoneWhere(`NOT EXISTS (SELECT 1 FROM `+rec+` WHERE `+takenCTE(rec)+`)`) + `)`
}

// takenCTE is takenRow for a CTE of recordCols named rec.
func takenCTE(rec string) string { return rec + `.live OR ` + rec + `.forget_left_us > 0` }

// tombstoneInsert is the INSERT of a completed record's tombstone, from src, a SELECT of its
// columns (scope_id, key_id, completed_at, forget_at, fingerprint_version, status_class,
// fingerprint), which yields no row when the operation keeps no tombstone. A tombstone the key
// still has (one past its horizon that the sweeper has not deleted yet, or one of an earlier
// record of the key) is replaced. The conflict names the primary key by its constraint, so the
// statement is the same on the plain table and where the key is (scope_id, key_id), as Citus
// needs it (docs/distributed.md).
func tombstoneInsert(src string) string {
	return `INSERT INTO idempotency_tombstones (scope_id, key_id, completed_at, forget_at, fingerprint_version, status_class, fingerprint)
	` + src + `
	ON CONFLICT ON CONSTRAINT idempotency_tombstones_pkey DO UPDATE SET scope_id = EXCLUDED.scope_id, completed_at = EXCLUDED.completed_at, forget_at = EXCLUDED.forget_at,
		fingerprint_version = EXCLUDED.fingerprint_version, status_class = EXCLUDED.status_class, fingerprint = EXCLUDED.fingerprint`
}

// recordInsertCols are the columns every record INSERT names, in this order.
const recordInsertCols = `(scope_id, key_id, created_at, expires_at, locked_until, fencing_token,
	 fingerprint, fingerprint_version, response_status, body_omitted, operation, response_headers, response_body)`

// runningValues are recordInsertCols of a running claim: claimArgs' $1..$8. The claim holds the
// key for its lease. A running record's expires_at is a retention after its lease ends (Extend
// and TakeOver keep that gap); it orders the sweeper's work, but a running record never counts
// as expired.
const runningValues = `$1, $2, now(),
	now() + ($7::bigint + $8::bigint) * interval '1 microsecond',
	now() + $8::bigint * interval '1 microsecond', $6, $4, $5, 0, false, $3, '\x', '\x'`

// runningValuesPartitioned is runningValues for the partitioned layout, where retention drops a
// record's whole partition once its expires_at has passed, running or not: a running record
// expires at least partitionedAbandon after its lease ends, as long as Sweeper.AbandonAfter's
// default keeps an abandoned claim on the plain table.
const runningValuesPartitioned = `$1, $2, now(),
	now() + (GREATEST($7::bigint, 86400000000) + $8::bigint) * interval '1 microsecond',
	now() + $8::bigint * interval '1 microsecond', $6, $4, $5, 0, false, $3, '\x', '\x'`

// partitionedAbandon is the least time between a running record's lease end and its expiry on
// the partitioned layout (runningValuesPartitioned).
const partitionedAbandon = 24 * time.Hour

// claimLock is how an atomic-mode claim learns that a concurrent claim of the same key is still
// running. Atomic claims are uncommitted while their handler runs, so the row itself is
// invisible; an INSERT that meets it waits for the whole handler.
type claimLock uint8

const (
	// lockTry takes the key's claim locks (takeClaimLocks): the claimants' lock without
	// waiting, so a claimant that finds it taken answers 409 at once and claims never wait on
	// each other's rows; the claim's lock_timeout only bounds unrelated waits (relation
	// extension under load, which a short lock_timeout alone would turn into false 409s for
	// new keys).
	lockTry claimLock = iota
	// lockNone is the portable path (Options.NoAdvisoryLocks): the INSERT waits on the
	// conflicting row under lock_timeout = Options.ConflictTimeout.
	lockNone
)

// expr is the SQL boolean that takes the lock ($9 is the lock key); true when it is ours. wait
// is the longest wait for the probes' lock, as a lock_timeout setting (takeClaimLocks).
func (l claimLock) expr(wait string) string {
	switch l {
	case lockTry:
		return takeClaimLocks("$9::bigint", false, wait)
	default:
		return "$9::bigint IS NOT NULL"
	}
}

// takeClaimLocks is the SQL boolean by which a claim takes the two advisory locks of its key,
// both named by the same 64 bits (key, an SQL bigint: recordDigest.lock), true when both are
// ours; transaction-scoped, or the session's when session is set (LockAtRead):
//
//   - the claimants' lock, the same bits as two integers (PostgreSQL keeps the two-integer
//     advisory locks apart from the bigint ones): tried, never waited for. Every claim takes
//     it first, so a claimant that finds it taken has met a concurrent claim: false at once.
//   - the probes' lock, the bigint: a read that finds no record tries it shared (readProbe),
//     which is how a duplicate learns, without claiming, that a claim is running. The claim
//     waits for it: with the claimants' lock ours, only a probe's statement holds it (for an
//     instant), or a claim by a release before this one (which took only this lock); the wait
//     is bounded by wait (a lock_timeout setting: Options.ConflictTimeout), past which the
//     statement fails with lock_not_available (55P03), a conflict. lock_timeout is set back
//     for the rest of the transaction, so the handler's statements never inherit it.
//
// With one lock, tried by claims and probed by reads, a claim whose try met a duplicate's
// probe at that instant was lost: every copy of a new key could be answered 409, none run.
func takeClaimLocks(key string, session bool, wait string) string {
	try, lock := "pg_try_advisory_xact_lock", "pg_advisory_xact_lock"
	if session {
		try, lock = "pg_try_advisory_lock", "pg_advisory_lock"
	}
	return `CASE WHEN NOT ` + try + `((` + key + ` >> 32)::integer, ` + key + `::bit(32)::integer) THEN false
	WHEN set_config('idemgen.lock_timeout', current_setting('lock_timeout'), true) IS NULL THEN false
	WHEN set_config('lock_timeout', '` + wait + `', true) IS NULL THEN false
	WHEN ` + lock + `(` + key + `)::text IS NULL THEN false
	ELSE set_config('lock_timeout', current_setting('idemgen.lock_timeout'), true) IS NOT NULL END`
}

// The claim column of statements.readLock and readLockCharged, a smallint.
const (
	// claimNone: the key has a record or a tombstone; no lock was tried.
	claimNone int16 = iota
	// claimBusy: a concurrent claim holds the key's lock.
	claimBusy
	// claimLocked: a new key, whose lock the session now holds.
	claimLocked
	// claimTaken: the lock is the session's, but the read under it found a record: a claim
	// committed between the statement's snapshot and our lock.
	claimTaken
)

// smallint is v as an SQL smallint literal.
func smallint(v int16) string { return strconv.Itoa(int(v)) + "::smallint" }

// claimAtRead is LockAtRead's claim column (statements.readLock, readLockCharged): claimNone
// when the key has a record or a tombstone (has, an SQL boolean), else the session's claim
// locks on lock (takeClaimLocks, bounded by wait) and the re-read under them
// (rereadUnderLock), or claimBusy when a concurrent claim holds them.
func claimAtRead(has, lock, wait string, e engine) string {
	return `CASE WHEN ` + has + ` THEN ` + smallint(claimNone) + `
		WHEN ` + takeClaimLocks(lock, true, wait) + ` THEN ` + rereadUnderLock(e) + `
		ELSE ` + smallint(claimBusy) + ` END`
}

// rereadUnderLock is readLock's answer once the session holds the key's lock ($1 scope_id,
// $2 key_id): claimTaken or claimLocked by idempotency_key_taken, a VOLATILE PL/pgSQL function,
// which PostgreSQL never inlines and whose query runs under a snapshot taken when that query
// starts, after the lock (a volatile function is not read-only: _SPI_execute_plan in
// src/backend/executor/spi.c pushes GetTransactionSnapshot() for each of its statements; "Function
// Volatility Categories" in PostgreSQL's documentation). CASE evaluates its branches in order,
// so the function runs only when the lock was just taken. Without the function (e.keyTaken
// false) it notes the lock for statements.readLocked and answers claimLocked.
func rereadUnderLock(e engine) string {
	if e.keyTaken {
		return `CASE WHEN idempotency_key_taken($1, $2) THEN ` + smallint(claimTaken) + ` ELSE ` + smallint(claimLocked) + ` END`
	}
	return `CASE WHEN set_config('idemgen.claim_lock', 'true', true) IS NULL THEN ` + smallint(claimTaken) + ` ELSE ` + smallint(claimLocked) + ` END`
}

// statements is the SQL of one table layout, built once per Store.
type statements struct {
	partitioned bool
	// read is the replay read: one plain SELECT, no lock, no transaction id. $1 scope_id,
	// $2 key_id. The partitioned layout reads live records only (an expired one is never reused:
	// its partition is dropped whole), which also skips the partitions that hold only expired
	// rows.
	read string
	// readProbe is read for an atomic claim with a try-lock: when the key has no record, it also
	// tries the claim lock ($3) and answers busy when a concurrent claim holds it. The lock is
	// released when the statement's implicit transaction ends; a replay never calls it. So a
	// duplicate that arrives while the first request holds the key is answered 409 by this one
	// statement, without the failing statement the claim would otherwise meet (an ERROR line in
	// the server log for every 409).
	readProbe string
	// readLock is read for ClaimWithStatement.LockAtRead (readCols, then a claim column, read
	// as readProbe's row is: readRow): when the key has no record, it tries
	// the claim lock ($3) for the session, so that it outlives the statement, and answers in its
	// claim column (claimNone, claimBusy, claimLocked, claimTaken). Once the lock is ours the key
	// is read again under a snapshot newer than the lock, so that a claim that committed (and
	// released the lock) between the statement's snapshot and our lock is seen: by the VOLATILE
	// function idempotency_key_taken of migration 0006 (0005 partitioned), whose query
	// PostgreSQL runs under a snapshot of its own, taken when it starts (claimTaken). The function is
	// called only once the lock is ours: a replay, a mismatch and a busy key cost this one
	// statement. On a schema without the function (engine.keyTaken false: a replica that runs
	// before the migration) the statement notes the lock in a transaction-local setting instead
	// and readLocked, pipelined behind it in the same round trip, reads the record again when that
	// setting says the lock is ours (under READ COMMITTED its own statement's snapshot is newer
	// than the lock); readLocked is empty otherwise.
	readLock, readLocked string
	// readCharged and readProbeCharged are read and readProbe (lock key $6) for a store with a
	// records cap: when the key has no live record (and, probing, no concurrent claim holds it)
	// the same statement counts the new claim against the tenant ($3) in the current interval
	// ($4 seconds) unless the cap ($5) is reached; they return the record, busy, whether the
	// claim was counted, and the interval's time left (µs). A replay counts nothing and writes
	// nothing (the count's INSERT gets no row). Both always return one row.
	readCharged, readProbeCharged string
	// readLockCharged is readLock for a store with a records cap (readProbeCharged's arguments
	// and answers, with readLock's claim column for busy): the lock it takes is the session's. It
	// counts a new key it locked (claimLocked) and an expired record's key (claimNone, a new
	// claim of the key), never a key a claim took between its snapshot and its lock
	// (claimTaken). When the cap refuses the claim the lock is still taken; the caller
	// releases it.
	readLockCharged string
	// chargeClaim counts a claim as readCharged does, alone (lease mode's claim pipeline): it
	// returns whether the key may be claimed (counted, or it has a live record) and
	// the interval's time left.
	chargeClaim string
	// reserve inserts a running lease-mode record unless the key has a live one, and returns the
	// record as of the statement's snapshot. Plain: ON CONFLICT DO NOTHING takes no row lock and,
	// when the conflicting row is committed, assigns no transaction id: a replay writes nothing.
	// When the conflicting row is not yet committed the statement waits for its transaction, and
	// the row that then appears is newer than the snapshot, so the result shows neither a claim
	// nor a record: callers re-read (READ COMMITTED). Partitioned: it runs after reserveLock in
	// the same implicit transaction and inserts only if that statement got the key's lock; the
	// token continues the key's expired records' (fencing tokens stay monotonic per key).
	reserve string
	// reserveLock (partitioned) tries the key's advisory lock ($1) and notes the answer for
	// reserve in a transaction-local setting: reserve must run under a snapshot taken after the
	// lock, so that a claim that committed before we got the lock is seen.
	reserveLock string
	// claimAtomic (ClaimPipelined, and claims without advisory locks; plain layout) reads the
	// key's record first, takes the claim lock only when there is none, and inserts a running row
	// only under the lock. It returns our token when we claimed, whether the lock was free
	// (false: a concurrent claim holds the key), and the record. One per lock kind.
	claimAtomic [2]string
	// lockOnly takes the claim lock of each kind ($1) and returns whether it is ours. On Citus
	// it also names the record ($2 scope_id, $3 key_id: lockArgs), so that the lock is taken on
	// the worker holding its shard (routeLock).
	lockOnly [2]string
	// lockOrStop takes the claim lock ($1) or fails (SQLSTATE 22P02), so that the handler's
	// statement queued behind it in the same pipeline never runs for a duplicate
	// (ClaimWithStatement). Since the read tries the lock first (readProbe), it fails only for
	// a duplicate whose claim raced the first request's between their reads and their first
	// statements. lockOrStopChecked is lockOrStop that also turns on
	// client_connection_check_interval ($2, milliseconds) for the transaction: a backend whose
	// client died while one of the handler's statements runs then notices within that
	// interval, ends the statement and releases the key, instead of holding it until the
	// statement ends (PostgreSQL 14 and later). On Citus lockOrStop names the record ($2, $3:
	// lockArgs) and lockOrStopChecked is empty: the interval is set for the coordinator's session
	// by sqlSetCheckInterval, in the same pipeline, since the lock is taken on a worker.
	lockOrStop, lockOrStopChecked string
	// storageBytes is the table's size with its indexes and TOAST: Stats.StorageBytes.
	storageBytes string
	// claimedOrStop fails (SQLSTATE 22P02) unless this transaction holds the running record with
	// its claim token ($3). In the pipelined claim it stands between the claim and BEGIN: when
	// the key already had a record, the failure ends the pipeline's implicit transaction, so
	// BEGIN never runs and the replay needs no ROLLBACK round trip.
	claimedOrStop string
	// takeExpired (plain) reuses the row of an expired completed record for a new claim (the
	// key counts as absent once expires_at has passed; a running record never expires). The token grows, so it stays monotonic per key. $6
	// is the new token for atomic claims, or NULL to take fencing_token + 1 (lease mode).
	takeExpired string
	// takeExpiredAtomic is takeExpired under the claim lock of each kind; it returns whether the
	// lock was free and the new token when the row was taken.
	takeExpiredAtomic [2]string
	// takeOverLease moves an expired lease to a new owner with the next fencing token; the old
	// owner's completion then fails its compare-and-swap. A record locked by its running
	// completion is skipped (no row: the caller's ErrLost), never waited for. $3 old token, $4
	// lease (µs).
	takeOverLease string
	// extendLease is the heartbeat: it moves locked_until while the token is still ours.
	extendLease string
	// lockLease opens a lease-mode completion: it locks the running record under our token, so a
	// takeover waits for this transaction and then finds the record completed.
	lockLease string
	// complete stores the final response under our token. Retention counts from completion.
	// $4 status, $5 headers (JSON), $6 body, $7 body omitted, $8 retention (µs).
	complete string
	// completeOrStop wraps complete so that when it updates nothing the statement fails and the
	// COMMIT pipelined behind it never runs: the handler's writes cannot commit without the
	// record.
	completeOrStop string
	// insertCompleted stores the completed record of a claim that holds only the advisory lock.
	// A record that exists anyway (a claim that did not take the advisory lock: another replica
	// with NoAdvisoryLocks, or a lease-mode operation given the same key, or a completion that
	// slipped in between our read and our lock) makes it fail, so the COMMIT pipelined behind it
	// never runs: with unique_violation (23505) on the plain table, whose primary key refuses
	// it; on purpose (22P02, a sentence without any value) on the partitioned one, where it
	// inserts nothing. $6 claim id, $7 status, $8 headers (JSON), $9 body, $10 body omitted, $11 retention
	// (µs).
	insertCompleted string
	// completeSettling is complete for an autocommitted completion (Store.Complete): it also
	// writes the outcome to the record's started calls, and returns how many records it
	// completed.
	completeSettling string
	// release frees the key after a failed lease-mode handler: the retry is a new request. The
	// record's started calls are marked released.
	release string
}

// newStatements builds the statements of a layout on an engine. conflictTimeout bounds a
// claim's wait for the probes' lock (takeClaimLocks).
func newStatements(partitioned bool, e engine, conflictTimeout time.Duration) *statements {
	q := &statements{partitioned: partitioned}
	// wait bounds a claim's wait for the probes' lock (takeClaimLocks).
	wait := lockTimeout(conflictTimeout)
	// live restricts a statement on the record to a live one (partitioned layout): partitions
	// whose rows have all expired are pruned, and an expired record never counts.
	live := ""
	if partitioned {
		live = " AND (response_status = 0 OR expires_at > now())"
	}
	where := "WHERE key_id = $2 AND scope_id = $1" + live
	rlive := strings.NewReplacer("expires_at", "r.expires_at", "response_status", "r.response_status").Replace(live)
	// Each read returns one row: the record, if any, and the key's tombstone when it has no live
	// record. The LATERAL subquery "tb" reads the tombstone only when the record r joined before
	// it is not live (OFFSET 0 keeps the subquery from being flattened into the join, which would
	// read the tombstone on every read).
	tombstoneOfLateral := `LEFT JOIN LATERAL (` + tombstoneWhere(`NOT COALESCE(`+takenRow+`, false)`) + `
	OFFSET 0) tb ON true`
	q.read = `SELECT ` + readCols + `
FROM (SELECT 1) AS one LEFT JOIN idempotency_records r ON r.key_id = $2 AND r.scope_id = $1` + rlive + `
` + tombstoneOfLateral
	// The probe takes the claim lock shared, for the statement: a claim holds it exclusively in
	// its transaction, so the probe is busy while a claim runs, and two probes of one new key at
	// the same instant (one request delivered twice) do not make each other busy, which
	// answered both 409 with nothing claimed. (A claim's own try can still meet a probe's
	// instant: it is then lost, as against any concurrent claim, and answered 409.)
	q.readProbe = `SELECT ` + readCols + `,
	CASE WHEN r.key_id IS NULL AND tb.forget_at IS NULL THEN NOT pg_try_advisory_xact_lock_shared($3::bigint) ELSE false END AS busy
FROM (SELECT 1) AS one LEFT JOIN idempotency_records r ON r.key_id = $2 AND r.scope_id = $1` + rlive + `
` + tombstoneOfLateral

	// A remembered key (a tombstone) takes no lock: it will not be claimed.
	q.readLock = `SELECT ` + readCols + `,
	` + claimAtRead("r.key_id IS NOT NULL OR tb.forget_at IS NOT NULL", "$3::bigint", wait, e) + ` AS claim
FROM (SELECT 1) AS one LEFT JOIN idempotency_records r ON r.key_id = $2 AND r.scope_id = $1` + rlive + `
` + tombstoneOfLateral
	if !e.keyTaken {
		q.readLocked = `SELECT ` + recordCols + ` FROM idempotency_records r
WHERE current_setting('idemgen.claim_lock', true) = 'true' AND r.key_id = $2 AND r.scope_id = $1` + rlive
	}

	for _, probe := range []string{"", "probe", "lock"} {
		// busy is p's column: whether a concurrent claim holds the key, or (lock) the claim
		// column of readLock; counts is when the claim is counted: a key that is not taken (no
		// record, or an expired one: a new claim of the key) and not held by a concurrent claim,
		// nor (lock) by one that committed between the snapshot and our lock.
		untaken := "NOT EXISTS (SELECT 1 FROM r WHERE " + takenCTE("r") + ") AND NOT EXISTS (SELECT 1 FROM tb)"
		busy, counts := "false AS busy", "NOT p.busy AND "+untaken
		switch probe {
		case "probe":
			busy = "CASE WHEN NOT EXISTS (SELECT 1 FROM r) AND NOT EXISTS (SELECT 1 FROM tb) THEN NOT pg_try_advisory_xact_lock_shared($6::bigint) ELSE false END AS busy"
		case "lock":
			busy = claimAtRead("EXISTS (SELECT 1 FROM r) OR EXISTS (SELECT 1 FROM tb)", "$6::bigint", wait, e) + " AS claim"
			counts = "p.claim IN (" + smallint(claimNone) + ", " + smallint(claimLocked) + ") AND " + untaken
		}
		// A remembered key (a tombstone) is neither claimed nor counted.
		charged := `WITH r AS (SELECT ` + recordCols + ` FROM idempotency_records r WHERE r.key_id = $2 AND r.scope_id = $1` + rlive + `),
` + tombstoneCTE("r") + `,
p AS (SELECT ` + busy + `),
` + chargeClaimCTE("FROM p WHERE "+counts, "$3", "$4", "$5") + `
SELECT r.*, ` + tombstoneCols + `, p.*, EXISTS (SELECT 1 FROM c) AS admitted, ` + intervalLeft("$4") + ` AS interval_left_us
FROM p LEFT JOIN r ON true LEFT JOIN tb ON true`
		switch probe {
		case "probe":
			q.readProbeCharged = charged
		case "lock":
			q.readLockCharged = charged
		default:
			q.readCharged = charged
		}
	}
	q.chargeClaim = `WITH r AS (SELECT 1 FROM idempotency_records r WHERE r.key_id = $2 AND r.scope_id = $1 AND ` + takenRow + `
	UNION ALL SELECT 1 FROM idempotency_tombstones WHERE key_id = $2 AND scope_id = $1 AND forget_at > now()),
` + chargeClaimCTE("FROM (SELECT 1) AS one WHERE NOT EXISTS (SELECT 1 FROM r)", "$3", "$4", "$5") + `
SELECT ` + admittedNoted + ` OR EXISTS (SELECT 1 FROM r), ` + intervalLeft("$4")

	if partitioned {
		q.reserveLock = `SELECT set_config('idemgen.claim_lock', (` + takeClaimLocks("$1::bigint", false, wait) + `)::text, true)`
		q.reserve = `WITH cur AS (SELECT ` + recordCols + ` FROM idempotency_records r
	WHERE r.key_id = $2 AND r.scope_id = $1` + rlive + `),
` + tombstoneCTE("cur") + `,
ins AS (
	INSERT INTO idempotency_records ` + recordInsertCols + `
	SELECT ` + strings.Replace(runningValuesPartitioned, "$6", `COALESCE($6::bigint, (SELECT COALESCE(max(fencing_token), 0) + 1
		FROM idempotency_records WHERE key_id = $2 AND scope_id = $1))`, 1) + `
	WHERE current_setting('idemgen.claim_lock', true) = 'true' AND NOT EXISTS (SELECT 1 FROM cur) AND NOT EXISTS (SELECT 1 FROM tb)
	RETURNING fencing_token
)
SELECT (SELECT fencing_token FROM ins) AS claimed, cur.*, ` + tombstoneCols + `
FROM (SELECT 1) AS one LEFT JOIN cur ON true LEFT JOIN tb ON true`
	} else {
		// The record is read first and the INSERT tried only when there is none: an INSERT
		// that meets a row which a running completion has locked (lockLease) would wait for the
		// whole completion, holding the duplicate's connection.
		q.reserve = `WITH cur AS (SELECT ` + recordCols + ` FROM idempotency_records r WHERE r.key_id = $2 AND r.scope_id = $1),
` + tombstoneCTE("cur") + `,
ins AS (
	INSERT INTO idempotency_records ` + recordInsertCols + `
	SELECT ` + runningValues + `
	WHERE NOT EXISTS (SELECT 1 FROM cur) AND NOT EXISTS (SELECT 1 FROM tb)
	ON CONFLICT DO NOTHING
	RETURNING fencing_token
)
SELECT (SELECT fencing_token FROM ins) AS claimed, cur.*, ` + tombstoneCols + `
FROM (SELECT 1) AS one LEFT JOIN cur ON true LEFT JOIN tb ON true`
	}

	q.lockOrStop = stopUnlessClaimed(takeClaimLocks("$1::bigint", false, wait))
	q.lockOrStopChecked = stopUnlessClaimed(takeClaimLocks("$1::bigint", false, wait) + `
	AND set_config('client_connection_check_interval', $2, true) IS NOT NULL`)
	q.storageBytes = sqlStorageBytes
	if e.citus {
		q.lockOrStop = stopUnlessClaimed(routeLock(takeClaimLocks("$1::bigint", false, wait))) + routedFrom("$2", "$3")
		q.lockOrStopChecked = ""
		q.storageBytes = sqlStorageBytesCitus
	}
	for _, l := range []claimLock{lockTry, lockNone} {
		q.lockOnly[l] = "SELECT " + strings.ReplaceAll(l.expr(wait), "$9", "$1") + " AS ok"
		if e.citus && l == lockTry {
			q.lockOnly[l] = "SELECT " + routeLock(strings.ReplaceAll(l.expr(wait), "$9", "$1")) + " AS ok" + routedFrom("$2", "$3")
		}
		if !partitioned {
			q.claimAtomic[l] = `WITH cur AS (SELECT ` + recordCols + ` FROM idempotency_records r WHERE r.key_id = $2 AND r.scope_id = $1),
` + tombstoneCTE("cur") + `,
lk AS (SELECT CASE WHEN EXISTS (SELECT 1 FROM cur) OR EXISTS (SELECT 1 FROM tb) THEN true ELSE ` + l.expr(wait) + ` END AS ok),
ins AS (
	INSERT INTO idempotency_records ` + recordInsertCols + `
	SELECT ` + runningValues + `
	WHERE (SELECT ok FROM lk) AND NOT EXISTS (SELECT 1 FROM cur) AND NOT EXISTS (SELECT 1 FROM tb)
	ON CONFLICT DO NOTHING
	RETURNING fencing_token
)
SELECT (SELECT fencing_token FROM ins) AS claimed, (SELECT ok FROM lk) AS free, cur.*, ` + tombstoneCols + `
FROM (SELECT 1) AS one LEFT JOIN cur ON true LEFT JOIN tb ON true`
		}
	}

	q.claimedOrStop = `SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM idempotency_records
	WHERE key_id = $2 AND scope_id = $1 AND fencing_token = $3 AND response_status = 0)
	THEN '1' ELSE 'idemgen: the key already has a record; this claim stops here (not an error)' END AS integer)`

	if !partitioned {
		q.takeExpired = `UPDATE idempotency_records SET
	operation = $3, fingerprint = $4, fingerprint_version = $5, response_status = 0,
	fencing_token = COALESCE($6::bigint, fencing_token + 1),
	locked_until = now() + $8::bigint * interval '1 microsecond',
	response_headers = '\x', response_body = '\x', body_omitted = false, created_at = now(),
	expires_at = now() + ($7::bigint + $8::bigint) * interval '1 microsecond', forget_at = NULL
WHERE key_id = $2 AND scope_id = $1 AND expires_at <= now() AND response_status <> 0 AND (forget_at IS NULL OR forget_at <= now())
RETURNING fencing_token`
		for _, l := range []claimLock{lockTry, lockNone} {
			q.takeExpiredAtomic[l] = `WITH lk AS (SELECT ` + l.expr(wait) + ` AS ok),
upd AS (` + strings.Replace(q.takeExpired, "WHERE key_id = $2", "WHERE (SELECT ok FROM lk) AND key_id = $2", 1) + `)
SELECT (SELECT ok FROM lk) AS free, (SELECT fencing_token FROM upd) AS token`
		}
	}

	// A record whose completion is running is locked (lockLease): the takeover skips it
	// rather than wait for the completion, and the duplicate is answered 409. A takeover of a
	// record whose call phase started calls marks it uncertain (taken over); the new owner's
	// completion clears the mark.
	q.takeOverLease = `WITH lk AS (SELECT 1 FROM idempotency_records
` + where + ` AND fencing_token = $3 AND response_status = 0 AND locked_until <= now()
	FOR UPDATE SKIP LOCKED)
UPDATE idempotency_records SET
	fencing_token = fencing_token + 1,
	uncertain = CASE WHEN ` + callsStarted + ` THEN 4 ELSE uncertain END,
	uncertain_at = ` + markedAt(callsStarted) + `,
	locked_until = now() + $4::bigint * interval '1 microsecond',
	expires_at = ` + leaseMoved("$4") + `
` + where + ` AND fencing_token = $3 AND response_status = 0 AND locked_until <= now() AND EXISTS (SELECT 1 FROM lk)
RETURNING fencing_token`
	q.extendLease = `UPDATE idempotency_records SET
	locked_until = now() + $4::bigint * interval '1 microsecond',
	expires_at = ` + leaseMoved("$4") + `
` + where + ` AND fencing_token = $3 AND response_status = 0`
	q.lockLease = `UPDATE idempotency_records SET locked_until = locked_until
` + where + ` AND fencing_token = $3 AND response_status = 0`
	q.complete = `UPDATE idempotency_records SET
	response_status = $4, response_headers = $5, response_body = ` + keptBody("$6") + `, body_omitted = ` + keptOmitted("$7") + `,
	uncertain = 0, uncertain_at = NULL,
	locked_until = statement_timestamp(),
	expires_at = statement_timestamp() + $8::bigint * interval '1 microsecond',
	forget_at = statement_timestamp() + NULLIF($9::bigint, 0) * interval '1 microsecond'
` + where + ` AND fencing_token = $3 AND response_status = 0`
	// Every completion sets its record's forget_at ($9: the tombstone's horizon after completion,
	// µs; 0 keeps none). On the plain table the expired record is its own tombstone until the
	// sweeper moves it; the partitioned layout, whose reads never see an expired record, writes
	// the tombstone row with the completion.
	doneTombstone := ""
	if partitioned {
		doneTombstone = `,
tomb AS (` + tombstoneInsert(`SELECT scope_id, key_id, locked_until, forget_at,
		fingerprint_version, response_status / 100, substring(fingerprint from 1 for 16) FROM done WHERE forget_at IS NOT NULL`) + `)`
	}
	completeReturning := q.complete + ` RETURNING scope_id, key_id, locked_until, forget_at, fingerprint_version, response_status, fingerprint`
	q.completeOrStop = `WITH done AS (` + completeReturning + `)` + doneTombstone + `
SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM done) THEN '1'
	ELSE 'idemgen: the record is no longer owned by this request' END AS integer)`

	// The completed record of a claim that holds only the advisory lock. On the plain table it
	// is a plain INSERT: the primary key refuses a record that exists anyway (unique_violation,
	// whose DETAIL holds only the key's digest; a row that a claim without the lock has not
	// committed yet, NoAdvisoryLocks, is waited for and then refused alike), which the commit
	// takes as the lost claim, so no probe of the index is needed before the insertion. Not ON
	// CONFLICT: that would cost every new key a speculative insertion (a confirm WAL record, 48
	// bytes per key in bench/README.md's profile). The partitioned table has no unique index on
	// the key alone: there NOT EXISTS, under the key's advisory lock taken by a statement before
	// this one (so under READ COMMITTED it sees any record committed before the lock), finds
	// the live record.
	// $12: the tombstone's horizon after completion, µs (0: none), for forget_at.
	completedValues := `$1, $2, now(), statement_timestamp() + $11::bigint * interval '1 microsecond',
	statement_timestamp(), $6, $4, $5, $7, ` + keptOmitted("$10") + `, $3, $8, ` + keptBody("$9") + `,
	statement_timestamp() + NULLIF($12::bigint, 0) * interval '1 microsecond'`
	completedInsertCols := strings.TrimSuffix(recordInsertCols, ")") + `, forget_at)`
	if partitioned {
		insert := `INSERT INTO idempotency_records ` + completedInsertCols + `
	SELECT ` + completedValues + `
	WHERE NOT EXISTS (SELECT 1 FROM idempotency_records ` + where + `)
	RETURNING scope_id, key_id, locked_until, forget_at, fingerprint_version, response_status, fingerprint`
		q.insertCompleted = `WITH ins AS (` + insert + `),
tomb AS (` + tombstoneInsert(`SELECT scope_id, key_id, locked_until, forget_at,
		fingerprint_version, response_status / 100, substring(fingerprint from 1 for 16) FROM ins WHERE forget_at IS NOT NULL`) + `)
SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM ins) THEN '1'
	ELSE 'idemgen: the key already has a record; this claim stops here (not an error)' END AS integer)`
	} else {
		q.insertCompleted = `INSERT INTO idempotency_records ` + completedInsertCols + `
	VALUES (` + completedValues + `)`
	}

	q.completeSettling = `WITH done AS (` + completeReturning + `)` + doneTombstone + `,
settled AS (` + strings.Replace(sqlSettleCalls, "$3", "$4", 1) + ` AND EXISTS (SELECT 1 FROM done))
SELECT count(*) FROM done`

	q.release = `WITH released AS (DELETE FROM idempotency_records
` + where + ` AND fencing_token = $3 AND response_status = 0 RETURNING 1)
` + sqlReleaseCalls + ` AND EXISTS (SELECT 1 FROM released)`
	return q
}

// leaseMoved is a running record's expires_at once its lease ends $lease µs after now() (Extend,
// TakeOver): as far after the lease's end as before, and never earlier. The sum is taken in UTC
// timestamps without a time zone, whose arithmetic is immutable: timestamptz + interval is
// stable, and Citus refuses a stable function with a column among its arguments in a
// distributed UPDATE. now() + the lease has no column: the coordinator evaluates it once. In
// UTC a day is 24 hours, so the gap (an interval of days and hours) moves unchanged.
func leaseMoved(lease string) string {
	return `GREATEST(expires_at, ((now() + ` + lease + `::bigint * interval '1 microsecond') AT TIME ZONE 'UTC'
		+ (expires_at - locked_until)) AT TIME ZONE 'UTC')`
}

// markedAt is a record's uncertain_at once a statement marks it when cond (never NULL) holds:
// now(), or else unchanged. Not a CASE, which Citus refuses around now() in a distributed
// UPDATE's SET list: the UTC timestamp of now() plus an interval that is NULL unless cond holds
// (immutable arithmetic; the coordinator evaluates now() once), which GREATEST ignores when it
// is NULL. A mark set earlier by the same database clock is never later than now().
func markedAt(cond string) string {
	return `GREATEST(uncertain_at, ((now() AT TIME ZONE 'UTC')
		+ NULLIF(CAST(` + cond + ` AS integer), 0) * interval '0') AT TIME ZONE 'UTC')`
}

// Statements around a claim that set and reset its lock wait. set_config(..., true) and SET
// LOCAL end with the transaction: no session state outlives it.
const (
	sqlSetLockTimeout   = "SELECT set_config('lock_timeout', $1, true)"
	sqlResetLockTimeout = "SET LOCAL lock_timeout TO DEFAULT"
)

// sqlPropagateSetLocal makes Citus send the transaction's SET LOCAL commands to its workers
// (Store.lockWait), for this transaction only.
const sqlPropagateSetLocal = "SELECT set_config('citus.propagate_set_commands', 'local', true)"

// stopUnlessClaimed is statements.lockOrStop for the SQL boolean claimed: a statement that fails
// (an integer cast of a sentence: 22P02, isStop) unless it holds, so that the statements queued
// behind it in the same pipeline never run for a claim that lost the key.
func stopUnlessClaimed(claimed string) string {
	return `SELECT CAST(CASE WHEN ` + claimed + ` THEN '1'
	ELSE 'idemgen: the key is claimed by a concurrent request; this claim stops here (409)' END AS integer)`
}

// sqlUnlock releases the session-level claim locks ($1) that ClaimWithStatement.LockAtRead took
// with the read (releaseClaimLocks); true when they were held.
const sqlUnlock = "SELECT pg_advisory_unlock(($1::bigint >> 32)::integer, $1::bigint::bit(32)::integer)::integer + pg_advisory_unlock($1::bigint)::integer = 2"

// sqlSetCheckInterval turns on client_connection_check_interval ($1, milliseconds) for a
// transaction that claims before its handler starts.
const sqlSetCheckInterval = "SELECT set_config('client_connection_check_interval', $1, true)"

// Digest returns the two digests a record is stored under (store.DigestOf): scopeID, the
// first 64 bits of SHA-256 over "idemgen/scope/v1", a zero byte and the scope (the column to
// distribute the table by: records of one scope share it), and keyID, the first 128 bits of
// SHA-256 over "idemgen/record/v1", a zero byte, the scope's length in bytes as a big-endian
// uint64, the scope and the key (the primary key). docs/runtime.md has the same in SQL, for
// looking a record up by hand. A collision of keyIDs needs about 2^64 records to become likely.
func Digest(id store.ID) (scopeID int64, keyID [16]byte) {
	d := store.DigestOf(id)
	return d.Scope, d.Key
}

// recordDigest is what statements need of a store.ID: its digests and its claim lock key.
type recordDigest struct {
	scope int64
	// key is the key's digest as the uuid column takes it in every query exec mode (in the
	// simple protocol a [16]byte would travel as bytea text).
	key pgtype.UUID
	// lock is the advisory lock key of the record's claims: the next 64 bits of the key's
	// SHA-256, independent of key.
	lock int64
}

func digest(id store.ID) recordDigest {
	d := store.DigestOf(id)
	return recordDigest{scope: d.Scope, key: pgtype.UUID{Bytes: d.Key, Valid: true}, lock: d.Lock}
}
