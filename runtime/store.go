package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// The store's SQL. Every statement names the full primary key (scope, key), so on a distributed
// engine sharded by scope each one is routed to one shard; none keeps session state beyond its
// own transaction (set_config(..., true) and SET LOCAL end with it). Durations travel as integer
// microseconds and are added to the database clock: the application's clock is never used.

// recordCols reads a record together with the two clock decisions made by the database: whether
// it is still live (expires_at in the future) and how long its lease has left.
const recordCols = `r.operation, r.fingerprint, r.fingerprint_version, r.state, r.fencing_token,
	r.expires_at > now() AS live,
	COALESCE(CAST(EXTRACT(EPOCH FROM (r.locked_until - now())) * 1000000 AS bigint), 0) AS lease_left_us,
	r.response_status, r.response_headers, r.response_body, r.body_omitted`

// sqlRead is the replay read: one plain SELECT, no lock, no transaction id.
const sqlRead = `SELECT ` + recordCols + ` FROM idempotency_records r WHERE r.scope = $1 AND r.key = $2`

// sqlClaim inserts a running record unless (scope, key) exists, and returns the existing record
// as of the statement's snapshot. ON CONFLICT DO NOTHING takes no row lock and, when the
// conflicting row is committed, assigns no transaction id: a replay writes nothing. When the
// conflicting row is not yet committed the statement waits for its transaction (bounded by
// lock_timeout), and the row that then appears is newer than the snapshot, so the result shows
// neither a claim nor a record: callers re-read (the READ COMMITTED trap of issue 7).
// $6 fencing token, $7 retention (µs), $8 lease (µs, 0 = no lease: atomic mode).
const sqlClaim = `WITH ins AS (
	INSERT INTO idempotency_records
		(scope, key, operation, fingerprint, fingerprint_version, state, fencing_token,
		 locked_until, created_at, expires_at)
	VALUES ($1, $2, $3, $4, $5, 'running', $6,
		CASE WHEN $8::bigint > 0 THEN now() + $8::bigint * interval '1 microsecond' END, now(),
		GREATEST(now() + $7::bigint * interval '1 microsecond', now() + $8::bigint * interval '1 microsecond'))
	ON CONFLICT (scope, key) DO NOTHING
	RETURNING fencing_token
)
SELECT (SELECT fencing_token FROM ins) AS claimed, ` + recordCols + `
FROM (SELECT 1) AS one LEFT JOIN idempotency_records r ON r.scope = $1 AND r.key = $2`

// claimLock is how an atomic-mode claim learns that a concurrent claim of the same key is still
// running. Atomic claims are uncommitted while their handler runs, so the row itself is invisible;
// an INSERT that meets it waits for the whole handler.
type claimLock uint8

const (
	// lockTry takes a transaction-scoped advisory lock on a hash of (scope, key) without waiting:
	// a claimant that finds it taken answers 409 at once, and claims never wait on each other's
	// rows, so the claim's lock_timeout only bounds unrelated waits (relation extension under
	// load, which a short lock_timeout alone would turn into false 409s for new keys).
	lockTry claimLock = iota
	// lockWait waits for the advisory lock under lock_timeout = Operation.Wait, so a duplicate
	// replays if the first request commits in time.
	lockWait
	// lockNone is the portable path (Config.NoAdvisoryLocks): the INSERT waits on the conflicting
	// row under lock_timeout = Config.ConflictTimeout.
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

// sqlClaimAtomic is sqlClaim for atomic mode: it reads the key's record first, takes the claim
// lock only when there is none, and inserts only under the lock. It returns whether the lock was
// free (false: a concurrent claim holds the key), our token when we claimed, and the record.
// The statement of each lock kind is built once (building it per request was a tenth of the
// bytes a replay allocated).
func sqlClaimAtomic(l claimLock) string { return sqlClaimAtomicByLock[l] }

var sqlClaimAtomicByLock = [...]string{
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
		GREATEST(now() + $7::bigint * interval '1 microsecond', now() + $8::bigint * interval '1 microsecond')
	WHERE (SELECT ok FROM lk) AND NOT EXISTS (SELECT 1 FROM cur)
	ON CONFLICT (scope, key) DO NOTHING
	RETURNING fencing_token
)
SELECT (SELECT fencing_token FROM ins) AS claimed, (SELECT ok FROM lk) AS free, cur.*
FROM (SELECT 1) AS one LEFT JOIN cur ON true`
}

// sqlTakeExpiredAtomic is sqlTakeExpired under the claim lock; it returns whether the lock was
// free and the new token when the row was taken.
func sqlTakeExpiredAtomic(l claimLock) string {
	return `WITH lk AS (SELECT ` + l.expr() + ` AS ok),
upd AS (` + strings.Replace(sqlTakeExpired, "WHERE scope = $1", "WHERE (SELECT ok FROM lk) AND scope = $1", 1) + `)
SELECT (SELECT ok FROM lk) AS free, (SELECT fencing_token FROM upd) AS token`
}

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

// sqlClaimedOrStop fails (SQLSTATE 22P02) unless this transaction holds the running record with
// its claim token. In the pipelined atomic claim it stands between the claim and BEGIN: when the
// key already had a record, the failure ends the pipeline's implicit transaction, so BEGIN never
// runs and the replay needs no ROLLBACK round trip.
const sqlClaimedOrStop = `SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM idempotency_records
	WHERE scope = $1 AND key = $2 AND fencing_token = $3 AND state = 'running')
	THEN '1' ELSE 'idemgen: the key already has a record; this claim stops here (not an error)' END AS integer)`

// sqlTakeExpired reuses the row of an expired record for a new claim (the key counts as absent
// once expires_at has passed, DESIGN section 4). The token grows, so it stays monotonic per key.
// $6 is the new token for atomic claims, or NULL to take fencing_token + 1 (lease mode).
const sqlTakeExpired = `UPDATE idempotency_records SET
	operation = $3, fingerprint = $4, fingerprint_version = $5, state = 'running',
	fencing_token = COALESCE($6::bigint, fencing_token + 1),
	locked_until = CASE WHEN $8::bigint > 0 THEN now() + $8::bigint * interval '1 microsecond' END,
	response_status = NULL, response_headers = NULL, response_body = NULL, body_omitted = false,
	created_at = now(), completed_at = NULL,
	expires_at = GREATEST(now() + $7::bigint * interval '1 microsecond', now() + $8::bigint * interval '1 microsecond')
WHERE scope = $1 AND key = $2 AND expires_at <= now()
RETURNING fencing_token`

// sqlTakeOverLease moves an expired lease to a new owner with the next fencing token; the old
// owner's completion then fails its compare-and-swap. $3 old token, $4 lease (µs).
const sqlTakeOverLease = `UPDATE idempotency_records SET
	fencing_token = fencing_token + 1,
	locked_until = now() + $4::bigint * interval '1 microsecond',
	expires_at = GREATEST(expires_at, now() + $4::bigint * interval '1 microsecond')
WHERE scope = $1 AND key = $2 AND fencing_token = $3 AND state = 'running' AND locked_until <= now()
RETURNING fencing_token`

// sqlExtendLease is the heartbeat: it moves locked_until while the token is still ours.
const sqlExtendLease = `UPDATE idempotency_records SET
	locked_until = now() + $4::bigint * interval '1 microsecond',
	expires_at = GREATEST(expires_at, now() + $4::bigint * interval '1 microsecond')
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

// sqlRelease frees the key after a failed lease-mode handler: the retry is a new request.
const sqlRelease = `DELETE FROM idempotency_records
WHERE scope = $1 AND key = $2 AND fencing_token = $3 AND state = 'running'`

// record is a stored idempotency record as read together with the database's clock decisions.
type record struct {
	operation   string
	fingerprint []byte
	fpVersion   int16
	state       string
	token       int64
	live        bool
	leaseLeft   time.Duration
	status      int16
	headers     []byte
	body        []byte
	bodyOmitted bool
}

func (r *record) completed() bool { return r.state == "completed" }

// sameRequest compares the stored fingerprint with fp. Records written under another fingerprint
// version cannot be compared; a completed one replays (the key names the operation, and a replay
// runs nothing), a running one is treated as different so it is never taken over by a request
// the earlier one may not match.
func (r *record) sameRequest(fp canonical.Fingerprint) bool {
	if uint16(r.fpVersion) != fp.Version {
		return r.completed()
	}
	return bytes.Equal(r.fingerprint, fp.Sum[:])
}

// rawRecord holds recordCols as scanned: every column may be NULL when a LEFT JOIN found no row.
type rawRecord struct {
	operation   *string
	fingerprint []byte
	fpVersion   *int16
	state       *string
	token       *int64
	live        *bool
	leaseLeftUS *int64
	status      *int16
	headers     []byte
	body        []byte
	bodyOmitted *bool
}

func (r *rawRecord) targets() []any {
	return []any{&r.operation, &r.fingerprint, &r.fpVersion, &r.state, &r.token, &r.live,
		&r.leaseLeftUS, &r.status, &r.headers, &r.body, &r.bodyOmitted}
}

// record converts the scanned columns; found is false when there was no row.
func (r *rawRecord) record() (rec record, found bool) {
	if r.operation == nil || r.state == nil {
		return rec, false
	}
	rec = record{
		operation: *r.operation, fingerprint: r.fingerprint, state: *r.state,
		headers: r.headers, body: r.body,
	}
	if r.fpVersion != nil {
		rec.fpVersion = *r.fpVersion
	}
	if r.token != nil {
		rec.token = *r.token
	}
	if r.live != nil {
		rec.live = *r.live
	}
	if r.leaseLeftUS != nil {
		rec.leaseLeft = time.Duration(*r.leaseLeftUS) * time.Microsecond
	}
	if r.status != nil {
		rec.status = *r.status
	}
	if r.bodyOmitted != nil {
		rec.bodyOmitted = *r.bodyOmitted
	}
	return rec, true
}

// store runs the SQL above on a pool.
type store struct {
	pool *pgxpool.Pool
	// prepared: the pool's connections cache statements (pgx's caching exec modes), so the
	// statements of batches that may fail on purpose are prepared by name (see prepare).
	prepared bool
}

func newStore(pool *pgxpool.Pool) *store {
	switch pool.Config().ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe:
		return &store{pool: pool, prepared: true}
	}
	return &store{pool: pool}
}

// claimInput is what a claim writes.
type claimInput struct {
	scope, key, op string
	fp             canonical.Fingerprint
	token          int64         // atomic: random claim id; lease: ignored (1, then +1)
	retention      time.Duration // how long the completed record replays
	lease          time.Duration // lease mode only; 0 in atomic mode
	lockTimeout    time.Duration // atomic mode: the claim statement's lock_timeout
	lock           claimLock     // atomic mode: how a concurrent claim is detected
	// deferred: an atomic claim that holds only the advisory lock; its record is inserted,
	// completed, at completion (lockAtomic).
	deferred bool
}

func (in *claimInput) args(token any) []any {
	return []any{in.scope, in.key, in.op, in.fp.Sum[:], int16(in.fp.Version), token,
		in.retention.Microseconds(), in.lease.Microseconds()}
}

// atomicArgs are args plus $9, the claim lock key.
func (in *claimInput) atomicArgs() []any {
	return append(in.args(in.token), claimLockKey(in.scope, in.key))
}

// errInFlight is a claim that met a concurrent uncommitted claim of the same key and gave up
// waiting (lock_timeout): the client gets 409 in-flight.
var errInFlight = errors.New("idempotency key in flight")

// isLockTimeout reports a claim that lost to a concurrent claim of the same key: PostgreSQL's
// lock_not_available (55P03, raised by lock_timeout), or a serialization failure or deadlock
// (40001, 40P01), which engines running READ COMMITTED as snapshot isolation (YugabyteDB without
// yb_enable_read_committed_isolation) raise instead of waiting. Either way the key is in flight.
func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "55P03", "40001", "40P01":
		return true
	}
	return false
}

// isClaimStop reports the deliberate failure of sqlClaimedOrStop.
func isClaimStop(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22P02"
}

// randomToken returns a positive random int64 for atomic claim ids.
func randomToken() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:])>>1) | 1<<32
}

// read is the plain SELECT of one record; found is false when there is no row.
func (s *store) read(ctx context.Context, q querier, scope, key string) (record, bool, error) {
	var raw rawRecord
	err := q.QueryRow(ctx, sqlRead, scope, key).Scan(raw.targets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return record{}, false, nil
	}
	if err != nil {
		return record{}, false, fmt.Errorf("read record: %w", err)
	}
	rec, found := raw.record()
	return rec, found, nil
}

// querier is what read needs from a pool or a connection.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
