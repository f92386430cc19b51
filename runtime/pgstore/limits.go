package pgstore

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	// Default 256 MiB; negative: no cap. The count travels in the commit's own round trip.
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

// usageSlots is how many rows one tenant's body bytes of one window are spread over (the
// records count is one row: a claim's count is made exact under its row lock, autocommitted).
const usageSlots = 16

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

// intervalLeft is the SQL time left in the current interval of $n seconds, in µs.
func intervalLeft(n string) string {
	return `CAST((` + intervalEnd(n) + ` - EXTRACT(EPOCH FROM now())) * 1000000 AS bigint)`
}

var (
	// sqlChargeBody adds a response of $4 bytes to a tenant's ($1) stored bytes of the current
	// window ($2 seconds), in slot $3, unless that would take them over $5, and notes in the
	// transaction whether it did (idemgen.body_kept, read by the record statements of the
	// commit pipeline behind it, which then store the body or omit it); it returns that note.
	sqlChargeBody = `WITH used AS (SELECT COALESCE(sum(amount), 0) AS n FROM idempotency_scope_usage
	WHERE scope_id = $1 AND kind = 2 AND ends_at = ` + intervalEnd("$2") + `),
c AS (INSERT INTO idempotency_scope_usage AS u (scope_id, kind, ends_at, slot, amount)
	SELECT $1, 2, ` + intervalEnd("$2") + `, $3, $4::bigint FROM used WHERE used.n + $4::bigint <= $5::bigint
	ON CONFLICT (scope_id, kind, ends_at, slot) DO UPDATE SET amount = u.amount + EXCLUDED.amount
	RETURNING 1)
SELECT set_config('idemgen.body_kept', CAST(EXISTS (SELECT 1 FROM c) AS text), true)`
	// sqlSweepUsage deletes the counters of intervals that have ended.
	sqlSweepUsage = `DELETE FROM idempotency_scope_usage WHERE ends_at <= EXTRACT(EPOCH FROM now())`
)

// keptBody and keptOmitted are the record statements' body and body_omitted expressions for
// parameters body and omitted: the body is left out when the commit's sqlChargeBody found the
// tenant over its cap (idemgen.body_kept is 'false'; unset, or ” in a session that set it
// before, keeps it).
func keptBody(body string) string {
	return `CASE WHEN current_setting('idemgen.body_kept', true) = 'false' THEN '\x'::bytea ELSE ` + body + `::bytea END`
}

func keptOmitted(omitted string) string {
	return `(` + omitted + `::boolean OR COALESCE(current_setting('idemgen.body_kept', true) = 'false', false))`
}

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
		return []string{sqlChargeBody, record, "COMMIT"}
	}
	return []string{record, "COMMIT"}
}

// queueChargeBody adds the count of resp's stored bytes to a commit pipeline, before its record
// statement, when resp counts; the returned note is filled with "false" by the pipeline when
// the tenant is over its cap (the record statement then omits the body). nil: not counted.
func (s *Store) queueChargeBody(b *pgx.Batch, sp *claimSpec, resp *store.Response) *string {
	if n := stored(resp); resp.BodyOmitted || !s.lim.counted(n) {
		return nil
	}
	b.Queue(sqlChargeBody, sp.limitScope(), s.lim.bodyWindow, int16(rand.IntN(usageSlots)), stored(resp), s.lim.bodyBytes)
	return new(string)
}

// chargeBody counts resp's stored bytes against the tenant's BodyBytes with its own statement
// (autocommitted, on q), and omits the body from resp when the tenant is over its cap.
func (s *Store) chargeBody(ctx context.Context, q querier, sp *claimSpec, resp *store.Response) error {
	if n := stored(resp); resp.BodyOmitted || !s.lim.counted(n) {
		return nil
	}
	var kept string
	err := q.QueryRow(ctx, sqlChargeBody, sp.limitScope(), s.lim.bodyWindow, int16(rand.IntN(usageSlots)),
		stored(resp), s.lim.bodyBytes).Scan(&kept)
	if err != nil {
		return fmt.Errorf("count the response: %w", err)
	}
	if kept == "false" {
		resp.Body, resp.BodyOmitted = nil, true
	}
	return nil
}

// readLimited is readProbe (probe) or read that also counts a new key against the tenant's
// records cap, in the same statement (statements.readCharged): it returns the LimitError when
// the key has no live record, no concurrent claim holds it, and the cap is reached.
func (s *Store) readLimited(ctx context.Context, q querier, sp *claimSpec, probe bool) (r *row, busy bool, err error) {
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
	if err = q.QueryRow(ctx, sql, args...).Scan(raw.targets(&busy, &admitted, &left)...); err != nil {
		return nil, false, fmt.Errorf("read record: %w", err)
	}
	r = raw.row()
	if (r == nil || !r.live) && !busy && !admitted {
		return nil, false, s.lim.overLimit(left)
	}
	return r, busy, nil
}
