package pgstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/store"
)

// Limits bound what one tenant can make the store keep, and they hold by default: without them
// one tenant grows the table as fast as it sends (60 keys with responses near 1 MiB: 55 MiB in
// under 2 s). Zero values take the defaults stated on
// each field; negative values turn a cap off. The tenant is the claim's (store.Claim.Tenant: the
// runtime's ScopeFunc's, before scope headers such as Stripe-Account joined it), so rotating a
// scope header gives no more room. The counters live in idempotency_scope_usage, per tenant and
// interval.
type Limits struct {
	// BodyBytes caps the bytes of stored responses (body and headers) one tenant may store per
	// BodyWindow. A response that would go over it is still delivered, but its record keeps
	// only the status and headers, and a replay says the body was omitted
	// (Idempotent-Replay-Body: omitted), as for a body above the operation's limits.response.
	// Default 256 MiB; negative: no cap. The count travels in the commit's own round trip, and
	// is exact under concurrency: concurrent commits of a tenant, on any number of Stores,
	// never store more than BodyBytes in a window together.
	//
	// A commit that counts also counts ahead a reservation of BodyBytes/1024 bytes (at most
	// 64 KiB; none under a cap below 1 KiB, which every commit counts to the byte) for the
	// tenant's next responses on the same Store, which are then stored without a count of
	// their own until the reservation is used up or its window is about to end (within a
	// second). Once a reservation is down to half, or cannot take a response, the first
	// commit that finds it so counts the next one ahead, one such commit at a time per tenant
	// and Store, so that a busy tenant's commits do not all find it empty at once and queue on
	// the counter row. Reserved bytes count as stored: a tenant may be refused (its body
	// omitted) up to the reservations left unused on its Stores before it reaches BodyBytes,
	// per Store at most a reservation plus the larger of half a reservation and the largest
	// response (96 KiB for responses up to 32 KiB under the default), and a reservation a
	// process did not use before it stopped is lost to the tenant until the window ends.
	BodyBytes int64
	// BodyWindow is the interval BodyBytes counts over, aligned to the Unix epoch by the
	// database clock (so a tenant may store up to BodyBytes in each window; live bytes stay
	// below BodyBytes times (retention / BodyWindow + 1)). Default 24h.
	BodyWindow time.Duration
	// BodyCountedAbove is a response size in bytes up to which responses are not counted.
	// Default 0: every stored byte counts.
	BodyCountedAbove int64
	// Records caps the new keys one tenant may claim per RecordsInterval: a new key over it is
	// refused before its handler runs with store.LimitError (429 rate-limited, Retry-After: the
	// rest of the interval); replays and other answers from existing records are not limited.
	// A claim counts when it is made, so concurrent new keys cannot pass the cap together (a
	// claim that then fails or loses to a concurrent duplicate still counts). Default 6000 per
	// minute, 100 per second on average: Stripe's documented rate limit for live-mode requests
	// (docs/runtime.md, "Per-scope limits"); negative: no cap. The count travels with the
	// lookup (lease mode: one statement more in the same round trip). Under a cap,
	// ClaimPipelined claims as ClaimReadFirst, whose read counts the claim.
	//
	// Under a cap of 100 or more and a RecordsInterval of 10 s or more, a Store counts claims
	// ahead (atomic mode and Admit): the lookup is the plain read (a replay touches no
	// counter), and a new key takes a claim of the tenant's reservation on the Store; when the
	// reservation is below half, or empty, one new key at a time counts the next Records/100
	// claims (and, when empty, itself) in a round trip after its read. Reserved claims count as
	// claimed: a tenant may be refused about a reservation and a half per Store early (90
	// claims under the default), never let past the cap.
	Records int64
	// RecordsInterval is the interval Records counts over, aligned to the Unix epoch by the
	// database clock. Default 1 minute.
	RecordsInterval time.Duration
}

// Defaults of Limits.
const (
	DefaultBodyBytes = 256 << 20
	DefaultRecords   = 6000
)

// limits are the effective Limits of a store, as statements take them.
type limits struct {
	bodyBytes   int64 // 0: no cap
	bodyWindow  int64 // seconds
	bodyAbove   int64
	records     int64 // 0: no cap
	recordsEach int64 // seconds
}

func newLimits(l Limits) limits {
	out := limits{bodyBytes: l.BodyBytes, records: l.Records, bodyAbove: max(l.BodyCountedAbove, 0)}
	if out.bodyBytes == 0 {
		out.bodyBytes = DefaultBodyBytes
	}
	out.bodyBytes = max(out.bodyBytes, 0)
	if out.records == 0 {
		out.records = DefaultRecords
	}
	out.records = max(out.records, 0)
	out.bodyWindow = max(int64(l.BodyWindow/time.Second), 1)
	if l.BodyWindow <= 0 {
		out.bodyWindow = 24 * 3600
	}
	out.recordsEach = max(int64(l.RecordsInterval/time.Second), 1)
	if l.RecordsInterval <= 0 {
		out.recordsEach = 60
	}
	return out
}

// stored is the bytes a response counts for: its body and headers.
func stored(r *store.Response) int64 {
	n := int64(len(r.Header))
	if !r.BodyOmitted {
		n += int64(len(r.Body))
	}
	return n
}

// counted reports whether a response of n stored bytes counts against BodyBytes.
func (l limits) counted(n int64) bool { return l.bodyBytes > 0 && n > l.bodyAbove }

// intervalEnd is the SQL end (seconds since the epoch, by the database clock) of the current
// interval of $n seconds.
func intervalEnd(n string) string {
	return `(CAST(floor(EXTRACT(EPOCH FROM now()) / ` + n + `::bigint) AS bigint) + 1) * ` + n + `::bigint`
}

// Usage kinds (idempotency_scope_usage.kind).
const (
	usageRecords = 1
	usageBody    = 2
)

// chargeClaimCTE is the data-modifying CTE "c" that counts one claim against a tenant ($owner)
// in the current interval ($each seconds) unless that reaches the cap ($cap), from the rows of
// src (a FROM clause with its WHERE): the count's one row is updated under its row lock, so
// concurrent claims of a tenant are counted one after the other and never pass the cap
// together. It returns a row when the claim was counted.
func chargeClaimCTE(src, owner, each, cap string) string {
	return `c AS (INSERT INTO idempotency_scope_usage AS u (scope_id, kind, ends_at, slot, amount)
	SELECT ` + owner + `::bigint, 1, ` + intervalEnd(each) + `, 0, 1 ` + src + `
	ON CONFLICT (scope_id, kind, ends_at, slot) DO UPDATE SET amount = u.amount + 1 WHERE u.amount < ` + cap + `::bigint
	RETURNING 1)`
}

// admittedNoted is the charged reads' "admitted" answer: whether their CTE "c" counted the claim,
// noted in the transaction (idemgen.claim_counted) for sqlReserveClaims behind it in the same
// round trip.
const admittedNoted = `CASE WHEN EXISTS (SELECT 1 FROM c) THEN set_config('idemgen.claim_counted', 'true', true) = 'true' ELSE false END`

// intervalLeft is the SQL time left in the current interval of $n seconds, in µs.
func intervalLeft(n string) string {
	return `CAST((` + intervalEnd(n) + ` - EXTRACT(EPOCH FROM now())) * 1000000 AS bigint)`
}

var (
	// sqlChargeBody adds a response of $3 bytes to a tenant's ($1) stored bytes of the current
	// window ($2 seconds) unless that would take them over $4, and notes in the transaction
	// whether it did (idemgen.body_kept, read by the record statements of the commit pipeline
	// behind it, which then store the body or omit it); it returns that note. The count is one
	// row, updated under its row lock with the cap checked on its latest version, so concurrent
	// commits of a tenant never pass the cap together; counting ahead (sqlReserveBody) makes
	// most commits skip it, so they seldom queue on that lock.
	sqlChargeBody = `WITH c AS (INSERT INTO idempotency_scope_usage AS u (scope_id, kind, ends_at, slot, amount)
	SELECT $1, 2, ` + intervalEnd("$2") + `, 0, $3::bigint WHERE $3::bigint <= $4::bigint
	ON CONFLICT (scope_id, kind, ends_at, slot) DO UPDATE SET amount = u.amount + EXCLUDED.amount
	WHERE u.amount + EXCLUDED.amount <= $4::bigint
	RETURNING 1)
SELECT set_config('idemgen.body_kept', CAST(EXISTS (SELECT 1 FROM c) AS text), true)`
	// sqlReserveBody follows sqlChargeBody in the same transaction: when that kept the body, it
	// counts bytes ahead (reserveAhead).
	sqlReserveBody = reserveAhead(usageBody, "idemgen.body_kept")
	// sqlReserveClaims follows statements.chargeClaim or sqlClaimCounted in the same round
	// trip: when the claim was counted, it counts claims ahead (reserveAhead).
	sqlReserveClaims = reserveAhead(usageRecords, "idemgen.claim_counted")
	// sqlClaimCounted notes, for sqlReserveClaims behind it in the same round trip, a claim
	// counted in memory from the reservation.
	sqlClaimCounted = `SELECT set_config('idemgen.claim_counted', 'true', true)`
	// sqlSweepUsage deletes the counters of intervals that have ended.
	sqlSweepUsage = `DELETE FROM idempotency_scope_usage WHERE ends_at <= EXTRACT(EPOCH FROM now())`
)

// reserveAhead is the statement that counts $3 units of kind ahead for a tenant's ($1) next
// responses or new keys in the current interval ($2 seconds), when the statement before it in
// the same transaction set noted to 'true' (it counted its own), unless that would take the
// count over the cap ($4) or less than 2 s of the interval are left (by the database clock at
// the statement: statement_timestamp(), a stable function that a distributed engine evaluates
// once, where clock_timestamp() is volatile and Citus refuses it in an UPDATE's WHERE). It
// returns whether it counted them, and the µs left in the interval.
func reserveAhead(kind int, noted string) string {
	return `WITH c AS (UPDATE idempotency_scope_usage SET amount = amount + $3::bigint
	WHERE scope_id = $1 AND kind = ` + strconv.Itoa(kind) + ` AND ends_at = ` + intervalEnd("$2") + ` AND slot = 0
	AND amount + $3::bigint <= $4::bigint AND current_setting('` + noted + `', true) = 'true'
	AND ` + intervalEnd("$2") + ` - EXTRACT(EPOCH FROM statement_timestamp()) > 2
	RETURNING 1)
SELECT EXISTS (SELECT 1 FROM c), CAST((` + intervalEnd("$2") + ` - EXTRACT(EPOCH FROM statement_timestamp())) * 1000000 AS bigint)`
}

// keptBody and keptOmitted are the record statements' body and body_omitted expressions for
// parameters body and omitted: the body is left out when the commit's sqlChargeBody found the
// tenant over its cap (idemgen.body_kept is 'false'; unset, or ” in a session that set it
// before, keeps it). Neither holds a CASE or COALESCE: in the SET list of a distributed UPDATE,
// Citus refuses one around any function that is not immutable (current_setting() is stable),
// while it evaluates such a function outside them once, on the coordinator whose session set
// the note. So the body is cut to its first 0 bytes when the tenant is over.
func keptBody(body string) string {
	return `substring(` + body + `::bytea FROM 1 FOR octet_length(` + body + `::bytea) * CAST(NOT ` + bodyOver + ` AS integer))`
}

func keptOmitted(omitted string) string {
	return `(` + omitted + `::boolean OR ` + bodyOver + `)`
}

// bodyOver is true when the commit's sqlChargeBody found the tenant over its cap, never NULL.
const bodyOver = `(current_setting('idemgen.body_kept', true) IS NOT DISTINCT FROM 'false')`

// overLimit returns the LimitError of a new key that the records cap refused; leftUS is the
// interval's time left.
func (l limits) overLimit(leftUS int64) error {
	return &store.LimitError{RetryAfter: time.Duration(max(leftUS, 0)) * time.Microsecond}
}

// limitScope is the digest a claim's counters are kept under: its tenant's.
func (sp *claimSpec) limitScope() int64 {
	if sp.tenant.exempt {
		return sp.d.scope
	}
	return sp.tenant.digest
}

// chargeArgs are statements.chargeClaim's parameters.
func (s *Store) chargeArgs(sp *claimSpec) []any {
	return []any{sp.d.scope, sp.d.key, sp.limitScope(), s.lim.recordsEach, s.lim.records}
}

// commitStatements are the statements of a commit pipeline whose record statement is record:
// they are prepared by name, since the pipeline stops on purpose when the record is lost.
func (s *Store) commitStatements(record string) []string {
	if s.lim.bodyBytes > 0 {
		return []string{sqlChargeBody, sqlReserveBody, record, "COMMIT"}
	}
	return []string{record, "COMMIT"}
}

// bodyCharge is the count of one response's stored bytes in a commit pipeline.
type bodyCharge struct {
	// ahead: the bytes sqlReserveBody asks for, the refill that ahead.take asked this commit
	// for; 0: not queued.
	tenant, ahead int64
	// taken: the response's bytes came out of the tenant's reservation, and the charge only
	// counts the next reservation ahead.
	taken bool
	// kept is sqlChargeBody's note: "false" when the tenant was over its cap.
	kept string
	// reserved and leftUS are sqlReserveBody's answers; sent is when the pipeline was sent.
	reserved bool
	leftUS   int64
	sent     time.Time
}

// statements is how many statements the charge queued.
func (c *bodyCharge) statements() int {
	if c == nil {
		return 0
	}
	if c.ahead > 0 {
		return 2
	}
	return 1
}

// read reads the charge's answers from br.
func (c *bodyCharge) read(br pgx.BatchResults) error {
	if err := br.QueryRow().Scan(&c.kept); err != nil {
		return err
	}
	if c.ahead > 0 {
		return br.QueryRow().Scan(&c.reserved, &c.leftUS)
	}
	return nil
}

// settled keeps the reservation of a charge whose transaction committed.
func (s *Store) settled(c *bodyCharge) {
	switch {
	case c == nil:
	case c.reserved:
		s.ahead.add(c.tenant, c.ahead, c.leftUS, c.sent)
	case c.ahead > 0:
		s.ahead.refillEnded(c.tenant)
	}
}

// unsettled ends a charge whose transaction did not commit (or whose outcome is unknown): a
// refill it carried is over, with nothing to add.
func (s *Store) unsettled(c *bodyCharge) {
	if c != nil && c.ahead > 0 {
		s.ahead.refillEnded(c.tenant)
	}
}

// queueChargeBody adds the count of resp's stored bytes to a commit pipeline, before its record
// statement, when resp counts and the tenant's reservation on this Store (counted ahead by an
// earlier commit) cannot take it; the returned charge's note is filled with "false" by the
// pipeline when the tenant is over its cap (the record statement then omits the body). The
// charge also counts the next reservation ahead when ahead.take asks this commit to refill:
// then, when the reservation took resp, it counts zero bytes of its own, under no cap, so its
// body is always kept. nil: nothing to count in the pipeline. A reservation used by a commit
// that then fails is not given back: the cap may only be reached early, never exceeded. The
// caller ends a returned charge with settled or unsettled.
func (s *Store) queueChargeBody(b *pgx.Batch, sp *claimSpec, resp *store.Response) *bodyCharge {
	n := stored(resp)
	if resp.BodyOmitted || !s.lim.counted(n) {
		return nil
	}
	size := aheadOf(s.lim.bodyBytes)
	taken, refill := false, false
	if size > 0 {
		taken, refill, _ = s.ahead.take(sp.limitScope(), n, size/2)
	}
	if taken && !refill {
		return nil
	}
	c := &bodyCharge{tenant: sp.limitScope(), taken: taken, sent: time.Now()}
	if refill {
		c.ahead = size
	}
	count, capBytes := n, s.lim.bodyBytes
	if taken {
		count, capBytes = 0, math.MaxInt64
	}
	b.Queue(sqlChargeBody, c.tenant, s.lim.bodyWindow, count, capBytes)
	if c.ahead > 0 {
		b.Queue(sqlReserveBody, c.tenant, s.lim.bodyWindow, c.ahead, s.lim.bodyBytes)
	}
	return c
}

// batcher sends a batch (a pool, a connection).
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// chargeBody counts resp's stored bytes against the tenant's BodyBytes with statements of their
// own (one implicit transaction, on q), and omits the body from resp when the tenant is over
// its cap.
func (s *Store) chargeBody(ctx context.Context, q batcher, sp *claimSpec, resp *store.Response) error {
	b := &pgx.Batch{}
	c := s.queueChargeBody(b, sp, resp)
	if c == nil {
		return nil
	}
	br := q.SendBatch(ctx, b)
	err := c.read(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.unsettled(c)
		return fmt.Errorf("count the response: %w", err)
	}
	s.settled(c)
	if c.kept == "false" {
		resp.Body, resp.BodyOmitted = nil, true
	}
	return nil
}

// readQuerier runs the reads of a claim: a pool or a connection.
type readQuerier interface {
	querier
	batcher
}

// readLimited is readProbe (probe) or read under the tenant's records cap: it returns the
// LimitError when the key has no live record, no concurrent claim holds it, and the cap is
// reached. Under a cap that counts claims ahead (claimsAheadOf) the read is the plain one, and
// a new key is counted after it (countNewKey); under a smaller cap the same statement counts a
// new key exactly (statements.readCharged). A replay or a busy key counts nothing either way.
func (s *Store) readLimited(ctx context.Context, q readQuerier, sp *claimSpec, probe bool) (r *row, busy bool, err error) {
	if size := claimsAheadOf(s.lim.records, s.lim.recordsEach); size > 0 {
		if probe {
			r, busy, err = s.readProbe(ctx, q, sp.d, sp.Operation)
		} else {
			r, err = s.read(ctx, q, sp.d, sp.Operation)
		}
		if err != nil || busy || (r != nil && r.live) {
			return r, busy, err
		}
		return r, false, s.countNewKey(ctx, q, sp, size)
	}
	var raw rawRecord
	var admitted bool
	var left int64
	d := sp.d
	args := []any{d.scope, d.key, sp.limitScope(), s.lim.recordsEach, s.lim.records}
	sql := s.q.readCharged
	if probe {
		sql = s.q.readProbeCharged
		args = append(args, d.lock)
	}
	if err = q.QueryRow(ctx, sql, args...).Scan(raw.targetsTomb(&busy, &admitted, &left)...); err != nil {
		return nil, false, fmt.Errorf("read record: %w", err)
	}
	r = raw.row()
	if (r == nil || !r.live) && !busy && !admitted {
		return nil, false, s.lim.overLimit(left)
	}
	return r, busy, nil
}

// refillWait is how long a new key that finds the reservation empty waits for the refill on its
// way before it counts itself.
const refillWait = 100 * time.Millisecond

// countNewKey counts a new key that a plain read found against the tenant's records cap: with
// a claim of the reservation this Store counted ahead, in memory; otherwise in the database
// (statements.chargeClaim), a LimitError when the cap is reached. When the reservation is
// below half of size, or empty, and no refill of it is on its way, the same round trip counts
// the next size claims ahead (sqlReserveClaims): a new key of a tenant costs a round trip more
// once per size/2 or so, and when it comes to a Store that holds no reservation for it.
func (s *Store) countNewKey(ctx context.Context, q batcher, sp *claimSpec, size int64) error {
	tenant := sp.limitScope()
	took, refill, refilled := s.claims.take(tenant, 1, size/2)
	if refilled != nil {
		// The reservation is empty and another new key is refilling it: wait for that round
		// trip rather than count this key alone under the counter's row lock behind it (a
		// tenant's first burst of new keys on a Store would otherwise queue there).
		wait := time.NewTimer(refillWait)
		select {
		case <-refilled:
		case <-wait.C:
		case <-ctx.Done():
		}
		wait.Stop()
		took, refill, _ = s.claims.take(tenant, 1, size/2)
	}
	if took && !refill {
		return nil
	}
	b := &pgx.Batch{}
	if took {
		b.Queue(sqlClaimCounted)
	} else {
		b.Queue(s.q.chargeClaim, s.chargeArgs(sp)...)
	}
	if refill {
		b.Queue(sqlReserveClaims, tenant, s.lim.recordsEach, size, s.lim.records)
	}
	sent := time.Now()
	var admitted, reserved bool
	var left, reserveLeft int64
	br := q.SendBatch(ctx, b)
	var err error
	if took {
		_, err = br.Exec()
		admitted = true
	} else {
		err = br.QueryRow().Scan(&admitted, &left)
	}
	if err == nil && refill {
		err = br.QueryRow().Scan(&reserved, &reserveLeft)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case !refill:
	case err == nil && reserved:
		s.claims.add(tenant, size, reserveLeft, sent)
	case err == nil && admitted:
		// Counted, but no room for a reservation: the cap is less than one away, or the
		// interval about to end.
		s.claims.closeRefills(tenant, sent.Add(time.Duration(reserveLeft)*time.Microsecond))
	default:
		s.claims.refillEnded(tenant)
	}
	switch {
	case err != nil:
		return fmt.Errorf("count the claim: %w", err)
	case !admitted:
		return s.lim.overLimit(left)
	}
	return nil
}
