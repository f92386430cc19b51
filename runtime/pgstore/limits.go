package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/store"
)

// Limits bound what one scope (tenant) can make the store keep (issue 16: 60 keys whose
// responses were near 1 MiB grew the table by 55 MiB in 1.8 s). Zero values take the defaults
// stated on each field. The counters live in idempotency_scope_usage, per scope and interval,
// spread over a few rows (slots) so that one scope's concurrent requests do not queue on one
// row lock until their commits; they are read under READ COMMITTED, so concurrent requests of
// one scope can pass a limit together by what they add at once.
type Limits struct {
	// BodyBytes caps the response body bytes one scope may store per BodyWindow, counting the
	// bodies larger than BodyCountedAbove. A body that would go over it is still delivered, but
	// its record keeps only the status and headers, and a replay says the body was omitted
	// (Idempotent-Replay-Body: omitted), as for a body above the operation's limits.response.
	// Default 256 MiB; negative: no cap. Counting a body costs one round trip in its
	// transaction before the commit, and a row of idempotency_scope_usage per slot and window.
	BodyBytes int64
	// BodyWindow is the interval BodyBytes counts over, aligned to the Unix epoch by the
	// database clock (so a scope may store up to BodyBytes in each window; live bytes stay below
	// BodyBytes times (retention / BodyWindow + 1)). Default 24h.
	BodyWindow time.Duration
	// BodyCountedAbove is the body size in bytes up to which bodies are not counted: most
	// responses are small, and their number is what Records bounds. Default 16 KiB.
	BodyCountedAbove int64
	// Records caps the records one scope may complete per RecordsInterval: a new key over it is
	// refused before its handler runs with store.LimitError (429 rate-limited, Retry-After: the
	// rest of the interval); replays and other answers from existing records are not limited.
	// Default 0: no cap. With a cap, the lookup of a new key also reads the scope's count (same
	// round trip; ClaimPipelined: one more), and each commit adds to it (same round trip).
	Records int64
	// RecordsInterval is the interval Records counts over, aligned to the Unix epoch by the
	// database clock. Default 1 minute.
	RecordsInterval time.Duration
}

// limits are the effective Limits of a store, as statements take them.
type limits struct {
	bodyBytes   int64 // 0: no cap
	bodyWindow  int64 // seconds
	bodyAbove   int64
	records     int64 // 0: no cap
	recordsEach int64 // seconds
}

// usageSlots is how many rows one scope's counter of one interval is spread over.
const usageSlots = 16

func newLimits(l Limits) limits {
	out := limits{bodyBytes: l.BodyBytes, records: max(l.Records, 0), bodyAbove: l.BodyCountedAbove}
	if out.bodyBytes == 0 {
		out.bodyBytes = 256 << 20
	}
	out.bodyBytes = max(out.bodyBytes, 0)
	if out.bodyAbove <= 0 {
		out.bodyAbove = 16 << 10
	}
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

// counted reports whether a body of n bytes counts against BodyBytes.
func (l limits) counted(n int) bool { return l.bodyBytes > 0 && int64(n) > l.bodyAbove }

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

var (
	// sqlRecordsUsed reads a scope's ($1) count of completed records in the current interval
	// ($2 seconds) and how long the interval has left (µs).
	sqlRecordsUsed = `SELECT COALESCE(sum(amount), 0),
	CAST((` + intervalEnd("$2") + ` - EXTRACT(EPOCH FROM now())) * 1000000 AS bigint)
FROM idempotency_scope_usage WHERE scope_id = $1 AND kind = 1 AND ends_at = ` + intervalEnd("$2")
	// sqlCountRecord adds one completed record to a scope's ($1) count of the current interval
	// ($2 seconds), in slot $3.
	sqlCountRecord = `INSERT INTO idempotency_scope_usage AS u (scope_id, kind, ends_at, slot, amount)
VALUES ($1, 1, ` + intervalEnd("$2") + `, $3, 1)
ON CONFLICT (scope_id, kind, ends_at, slot) DO UPDATE SET amount = u.amount + 1`
	// sqlChargeBody adds a body of $4 bytes to a scope's ($1) body bytes of the current window
	// ($2 seconds), in slot $3, unless that would take them over $5: it returns a row when the
	// body may be stored.
	sqlChargeBody = `WITH used AS (SELECT COALESCE(sum(amount), 0) AS n FROM idempotency_scope_usage
	WHERE scope_id = $1 AND kind = 2 AND ends_at = ` + intervalEnd("$2") + `)
INSERT INTO idempotency_scope_usage AS u (scope_id, kind, ends_at, slot, amount)
SELECT $1, 2, ` + intervalEnd("$2") + `, $3, $4::bigint FROM used WHERE used.n + $4::bigint <= $5::bigint
ON CONFLICT (scope_id, kind, ends_at, slot) DO UPDATE SET amount = u.amount + EXCLUDED.amount
RETURNING 1`
	// sqlSweepUsage deletes the counters of intervals that have ended.
	sqlSweepUsage = `DELETE FROM idempotency_scope_usage WHERE ends_at <= EXTRACT(EPOCH FROM now())`
)

// withRecordsUsed is a read statement (read or readProbe, "SELECT <columns> FROM ...") that
// also returns the scope's count of completed records in the current interval ($n seconds) and
// the interval's time left (µs).
func withRecordsUsed(read, n string) string {
	const from = "\nFROM "
	cols := `,
	(SELECT COALESCE(sum(u.amount), 0) FROM idempotency_scope_usage u
		WHERE u.scope_id = $1 AND u.kind = 1 AND u.ends_at = ` + intervalEnd(n) + `) AS records_used,
	CAST((` + intervalEnd(n) + ` - EXTRACT(EPOCH FROM now())) * 1000000 AS bigint) AS interval_left_us`
	i := strings.Index(read, from)
	if i < 0 {
		// read and readProbe always have their FROM on a line of its own (newStatements).
		panic("pgstore: read statement without a FROM line")
	}
	return read[:i] + cols + read[i:]
}

// overLimit returns the LimitError of a scope whose count used has reached the records cap.
func (l limits) overLimit(used, leftUS int64) error {
	if l.records <= 0 || used < l.records {
		return nil
	}
	return &store.LimitError{RetryAfter: time.Duration(max(leftUS, 0)) * time.Microsecond}
}

// checkRecords reads the scope's count with its own statement (ClaimPipelined, lease mode).
func (s *Store) checkRecords(ctx context.Context, q querier, d recordDigest) error {
	if s.lim.records <= 0 {
		return nil
	}
	var used, left int64
	if err := q.QueryRow(ctx, sqlRecordsUsed, d.scope, s.lim.recordsEach).Scan(&used, &left); err != nil {
		return fmt.Errorf("read the scope's record count: %w", err)
	}
	return s.lim.overLimit(used, left)
}

// queueCountRecord adds the record's count to a commit pipeline, when records are capped.
func (s *Store) queueCountRecord(b *pgx.Batch, d recordDigest) {
	if s.lim.records > 0 {
		b.Queue(sqlCountRecord, d.scope, s.lim.recordsEach, int16(rand.IntN(usageSlots)))
	}
}

// commitStatements are the statements of a commit pipeline whose record statement is record:
// they are prepared by name, since the pipeline stops on purpose when the record is lost.
func (s *Store) commitStatements(record string) []string {
	if s.lim.records > 0 {
		return []string{record, sqlCountRecord, "COMMIT"}
	}
	return []string{record, "COMMIT"}
}

// chargeBody counts resp's body against the scope's BodyBytes, in the transaction (or
// autocommitted) on q, and omits it from resp when the scope is over its cap.
func (s *Store) chargeBody(ctx context.Context, q querier, d recordDigest, resp *store.Response) error {
	if resp.BodyOmitted || !s.lim.counted(len(resp.Body)) {
		return nil
	}
	var one int
	err := q.QueryRow(ctx, sqlChargeBody, d.scope, s.lim.bodyWindow, int16(rand.IntN(usageSlots)),
		int64(len(resp.Body)), s.lim.bodyBytes).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		resp.Body, resp.BodyOmitted = nil, true
		return nil
	case err != nil:
		return fmt.Errorf("count the response body: %w", err)
	}
	return nil
}

// readLimited is readProbe or read with the scope's record count, for a store with a records
// cap: it returns the LimitError when the key has no live record and the scope is over the cap.
func (s *Store) readLimited(ctx context.Context, q querier, d recordDigest, probe bool) (r *row, busy bool, err error) {
	var raw rawRecord
	var used, left int64
	targets := raw.targets()
	sql, args := s.q.readUsed, []any{d.scope, d.key, s.lim.recordsEach}
	if probe {
		sql, args = s.q.readProbeUsed, []any{d.scope, d.key, d.lock, s.lim.recordsEach}
		targets = append(targets, &busy)
	}
	if err = q.QueryRow(ctx, sql, args...).Scan(append(targets, &used, &left)...); err != nil {
		return nil, false, fmt.Errorf("read record: %w", err)
	}
	r = raw.row()
	if r == nil || !r.live {
		if err := s.lim.overLimit(used, left); err != nil {
			return nil, false, err
		}
	}
	return r, busy, nil
}
