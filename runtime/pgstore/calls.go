package pgstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/runtime/store"
)

// The provider call log (migration 0003, table idempotency_provider_calls) and uncertain
// outcomes: what a lease-mode call phase records before it calls out (BeginCall), the marks of
// an uncertain record (MarkUncertain, and TakeOver in sql.go), and what reconciliation reads and
// writes (store.Reconcilable). docs/runtime.md, "Uncertain outcomes and reconciliation".

var (
	_ store.CallLog      = (*Store)(nil)
	_ store.Reconcilable = (*Store)(nil)
)

// callInsert records a call ($4 provider key, $5 label, $6 operation, $7 fingerprint,
// $8 fingerprint version, $3 token, $9 retention µs, $10 amount, $11 currency) of the record
// $1/$2. A call recorded again (a takeover's call phase, the same label twice) keeps its first
// start while it is still started, and takes the new token; a call of a key whose earlier
// record completed and expired (the key is new again, and so is the call) starts afresh.
const callInsert = `INSERT INTO idempotency_provider_calls (provider_key, scope_id, key_id, label, operation,
	fingerprint, fingerprint_version, fencing_token, retention_us, amount, currency, started_at, outcome, response_status)
SELECT $4, $1, $2, $5, $6, $7, $8, $3, $9, $10, $11, now(), 0, 0`

// callUpsert names the call log's primary key by its constraint, not by its columns: on a
// single PostgreSQL it is (provider_key), distributed it is (scope_id, provider_key)
// (migrations.CitusTables), and the same statement meets either.
const callUpsert = `
ON CONFLICT ON CONSTRAINT idempotency_provider_calls_pkey DO UPDATE SET fencing_token = EXCLUDED.fencing_token,
	operation = EXCLUDED.operation, fingerprint = EXCLUDED.fingerprint,
	fingerprint_version = EXCLUDED.fingerprint_version, retention_us = EXCLUDED.retention_us,
	amount = EXCLUDED.amount, currency = EXCLUDED.currency,
	started_at = CASE WHEN idempotency_provider_calls.outcome = 0 THEN idempotency_provider_calls.started_at ELSE EXCLUDED.started_at END,
	outcome = 0, response_status = 0, settled_at = NULL
RETURNING 1`

// sqlBeginCall records a call of the record running under token $3; no row when there is none.
const sqlBeginCall = callInsert + `
WHERE EXISTS (SELECT 1 FROM idempotency_records WHERE key_id = $2 AND scope_id = $1 AND fencing_token = $3 AND response_status = 0)` + callUpsert

// sqlLogCall records a call of a claim this store does not hold (store.CallLog).
const sqlLogCall = callInsert + callUpsert

// callsStarted is the SQL condition that the record $1/$2 has calls with no known outcome.
const callsStarted = `EXISTS (SELECT 1 FROM idempotency_provider_calls c WHERE c.key_id = $2 AND c.scope_id = $1 AND c.outcome = 0)`

// sqlMarkUncertain marks the record running under $3 uncertain for reason $4, when its call
// phase started calls.
const sqlMarkUncertain = `UPDATE idempotency_records SET uncertain = $4, uncertain_at = now()
WHERE key_id = $2 AND scope_id = $1 AND fencing_token = $3 AND response_status = 0 AND ` + callsStarted

// sqlSettleCalls writes the outcome of a completion ($3 status) to the record's started calls; it
// runs in the completion's transaction.
const sqlSettleCalls = `UPDATE idempotency_provider_calls SET outcome = 1, response_status = $3, settled_at = statement_timestamp()
WHERE key_id = $2 AND scope_id = $1 AND outcome = 0`

// sqlReleaseCalls marks the record's started calls released.
const sqlReleaseCalls = `UPDATE idempotency_provider_calls SET outcome = 2, settled_at = now()
WHERE key_id = $2 AND scope_id = $1 AND outcome = 0`

// recordCallsJSON is the calls of record r as a JSON array, in the order they started.
const recordCallsJSON = `(SELECT json_agg(json_build_object('l', c.label, 'k', encode(c.provider_key, 'hex'), 'a', c.amount, 'c', c.currency)
	ORDER BY c.started_at, c.label) FROM idempotency_provider_calls c WHERE c.key_id = r.key_id AND c.scope_id = r.scope_id)`

// recordUncertain is why record r is uncertain (store.Uncertainty): its mark, or 1 (lease ended)
// for a running record with started calls whose lease has ended.
const recordUncertain = `CASE WHEN r.response_status <> 0 THEN 0 WHEN r.uncertain <> 0 THEN r.uncertain
	WHEN r.locked_until <= now() AND EXISTS (SELECT 1 FROM idempotency_provider_calls c
		WHERE c.key_id = r.key_id AND c.scope_id = r.scope_id AND c.outcome = 0) THEN 1 ELSE 0 END`

// uncertainWhere selects the uncertain records among the running ones (through the partial index
// of running records, migration 0002).
const uncertainWhere = `r.response_status = 0 AND (r.uncertain <> 0 OR (r.locked_until <= now() AND EXISTS (
	SELECT 1 FROM idempotency_provider_calls c WHERE c.key_id = r.key_id AND c.scope_id = r.scope_id AND c.outcome = 0)))`

// sqlUncertain lists uncertain records claimed at or after $1, oldest first, at most $2 (NULL:
// all).
const sqlUncertain = `SELECT r.key_id, r.operation, r.fingerprint, r.fingerprint_version, r.fencing_token,
	r.created_at, r.expires_at, r.locked_until, CAST(EXTRACT(EPOCH FROM (r.locked_until - now())) * 1000000 AS bigint),
	now(), r.uncertain_at, ` + recordUncertain + `, ` + recordCallsJSON + `
FROM idempotency_records r WHERE ` + uncertainWhere + ` AND r.created_at >= $1
ORDER BY r.created_at, r.key_id LIMIT $2`

// sqlUncertainByOperation counts uncertain records by operation.
const sqlUncertainByOperation = `SELECT r.operation, count(*) FROM idempotency_records r WHERE ` + uncertainWhere + `
GROUP BY r.operation`

// callCols reads a logged call c with the state of its record r (callRecordJoin): the record is
// read only for calls that are still started.
const callCols = `c.provider_key, c.key_id, c.label, c.operation, c.fencing_token, c.amount, c.currency,
	c.started_at, c.outcome, c.response_status, c.settled_at,
	r.response_status, r.fencing_token, r.ended, r.uncertain`

// callRecordJoin joins each call c with its live record r, reading it only when c.outcome = 0
// (a one-time filter of the lateral subquery: no index probe for settled calls).
const callRecordJoin = `FROM idempotency_provider_calls c
LEFT JOIN LATERAL (SELECT r.response_status, r.fencing_token, r.locked_until <= now() AS ended, r.uncertain
	FROM idempotency_records r WHERE c.outcome = 0 AND r.key_id = c.key_id AND r.scope_id = c.scope_id
	AND (r.response_status = 0 OR r.expires_at > now())) r ON true`

const (
	sqlFindCalls = `SELECT ` + callCols + ` ` + callRecordJoin + ` WHERE c.provider_key = ANY($1::bytea[])`
	sqlScanCalls = `SELECT ` + callCols + ` ` + callRecordJoin + ` WHERE c.started_at >= $1 AND c.started_at < $2`
)

// BeginCall records that the call phase of the record running under token starts call: one
// INSERT, which also checks the token. See store.Store.
func (s *Store) BeginCall(ctx context.Context, c store.Claim, token int64, call store.Call) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	return s.logCall(ctx, sqlBeginCall, c, token, call)
}

// LogCall records call for a claim this store does not hold (the paired Redis lease store's):
// store.CallLog.
func (s *Store) LogCall(ctx context.Context, c store.Claim, token int64, call store.Call) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	return s.logCall(ctx, sqlLogCall, c, token, call)
}

func (s *Store) logCall(ctx context.Context, q string, c store.Claim, token int64, call store.Call) error {
	pk, ok := decodeProviderKey(call.ProviderKey)
	if !ok {
		return fmt.Errorf("record call %q: the provider key is not 64 hex digits", call.Label)
	}
	d := digest(c.ID)
	var amount pgtype.Int8
	var currency pgtype.Text
	if call.Currency != "" {
		amount = pgtype.Int8{Int64: call.Amount, Valid: true}
		currency = pgtype.Text{String: call.Currency, Valid: true}
	}
	var one int
	err := s.pool.QueryRow(ctx, q, d.scope, d.key, token, pk, call.Label, c.Operation, c.Fingerprint.Sum[:],
		int16(c.Fingerprint.Version), c.Retention.Microseconds(), amount, currency).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.ErrLost
	case err != nil:
		return fmt.Errorf("record call %q: %w", call.Label, err)
	}
	return nil
}

// MarkUncertain marks the record running under token uncertain; see store.Store.
func (s *Store) MarkUncertain(ctx context.Context, id store.ID, token int64, reason store.Uncertainty) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	d := digest(id)
	if _, err := s.pool.Exec(ctx, sqlMarkUncertain, d.scope, d.key, token, int16(reason)); err != nil && !isMoved(err) {
		return fmt.Errorf("mark uncertain: %w", err)
	}
	return nil
}

// ReleaseCalls marks the started calls of id released: store.CallLog.
func (s *Store) ReleaseCalls(ctx context.Context, id store.ID) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	d := digest(id)
	if _, err := s.pool.Exec(ctx, sqlReleaseCalls, d.scope, d.key); err != nil {
		return fmt.Errorf("release calls: %w", err)
	}
	return nil
}

// Uncertain lists the uncertain records (store.Inspector): one SELECT over the running records.
func (s *Store) Uncertain(ctx context.Context, since time.Time, limit int) ([]store.Snapshot, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := s.pool.Query(ctx, sqlUncertain, since, lim)
	if err != nil {
		return nil, fmt.Errorf("uncertain records: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Snapshot, error) {
		var (
			sn        store.Snapshot
			kid       [16]byte
			fp        []byte
			fpVersion int16
			leftUS    int64
			since     *time.Time
			reason    int16
			calls     []byte
		)
		err := row.Scan(&kid, &sn.Operation, &fp, &fpVersion, &sn.Token, &sn.CreatedAt, &sn.ExpiresAt,
			&sn.LockedUntil, &leftUS, &sn.ReadAt, &since, &reason, &calls)
		if err != nil {
			return sn, err
		}
		sn.State, sn.Live = store.Running, true
		sn.Ref = uuidText(kid)
		copy(sn.Fingerprint.Sum[:], fp)
		sn.Fingerprint.Version = uint16(fpVersion)
		sn.LeaseLeft = time.Duration(leftUS) * time.Microsecond
		sn.Uncertain = store.Uncertainty(reason)
		if since != nil && sn.Uncertain != store.UncertainLeaseEnded {
			sn.UncertainSince = *since
		}
		sn.Calls, err = parseCalls(calls)
		return sn, err
	})
	if err != nil {
		return nil, fmt.Errorf("uncertain records: %w", err)
	}
	return out, nil
}

// uncertainByOperation counts the uncertain records by operation.
func uncertainByOperation(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) (map[string]int64, error) {
	rows, err := q.Query(ctx, sqlUncertainByOperation)
	if err != nil {
		return nil, fmt.Errorf("count uncertain records: %w", err)
	}
	out := map[string]int64{}
	var (
		op string
		n  int64
	)
	_, err = pgx.ForEachRow(rows, []any{&op, &n}, func() error {
		out[op] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count uncertain records: %w", err)
	}
	return out, nil
}

// parseCalls reads recordCallsJSON.
func parseCalls(b []byte) ([]store.Call, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var raw []struct {
		L string  `json:"l"`
		K string  `json:"k"`
		A *int64  `json:"a"`
		C *string `json:"c"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("read calls: %w", err)
	}
	out := make([]store.Call, len(raw))
	for i, r := range raw {
		out[i] = store.Call{Label: r.L, ProviderKey: r.K}
		if r.A != nil && r.C != nil {
			out[i].Amount, out[i].Currency = *r.A, *r.C
		}
	}
	return out, nil
}

// uuidText formats a key_id digest as PostgreSQL prints a uuid (Snapshot.Ref).
func uuidText(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// decodeProviderKey returns the 32 bytes of a provider key's 64 hex digits.
func decodeProviderKey(k string) ([]byte, bool) {
	if len(k) != 64 {
		return nil, false
	}
	b, err := hex.DecodeString(k)
	return b, err == nil
}

// FindCalls reads the logged calls of providerKeys in one SELECT by primary key
// (store.Reconcilable).
func (s *Store) FindCalls(ctx context.Context, providerKeys []string) ([]store.CallRecord, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	keys := make([][]byte, 0, len(providerKeys))
	for _, k := range providerKeys {
		if b, ok := decodeProviderKey(k); ok {
			keys = append(keys, b)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, sqlFindCalls, keys)
	if err != nil {
		return nil, fmt.Errorf("find calls: %w", err)
	}
	var out []store.CallRecord
	var raw rawCall
	_, err = pgx.ForEachRow(rows, raw.targets(), func() error {
		out = append(out, raw.record())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find calls: %w", err)
	}
	return out, nil
}

// ScanCalls streams the calls started in [from, to) (store.Reconcilable).
func (s *Store) ScanCalls(ctx context.Context, from, to time.Time, fn func(*store.CallRecord) error) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, sqlScanCalls, from, to)
	if err != nil {
		return fmt.Errorf("scan calls: %w", err)
	}
	var raw rawCall
	var fnErr error
	_, err = pgx.ForEachRow(rows, raw.targets(), func() error {
		rec := raw.record()
		if err := fn(&rec); err != nil {
			fnErr = err
			return err
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("scan calls: %w", err)
	}
	return nil
}

// rawCall holds callCols as scanned.
type rawCall struct {
	pk        []byte
	keyID     [16]byte
	label     string
	operation string
	token     int64
	amount    pgtype.Int8
	currency  pgtype.Text
	started   time.Time
	outcome   int16
	status    int16
	settled   pgtype.Timestamptz
	rStatus   pgtype.Int2
	rToken    pgtype.Int8
	rEnded    pgtype.Bool
	rUncertan pgtype.Int2
}

func (r *rawCall) targets() []any {
	return []any{&r.pk, &r.keyID, &r.label, &r.operation, &r.token, &r.amount, &r.currency, &r.started,
		&r.outcome, &r.status, &r.settled, &r.rStatus, &r.rToken, &r.rEnded, &r.rUncertan}
}

func (r *rawCall) record() store.CallRecord {
	c := store.CallRecord{
		Call:      store.Call{Label: r.label, ProviderKey: hex.EncodeToString(r.pk)},
		Operation: r.operation,
		Ref:       uuidText(r.keyID),
		Token:     r.token,
		StartedAt: r.started,
		Outcome:   store.CallOutcome(r.outcome),
		Status:    int(r.status),
	}
	if r.amount.Valid && r.currency.Valid {
		c.Amount, c.Currency = r.amount.Int64, r.currency.String
	}
	if r.settled.Valid {
		c.SettledAt = r.settled.Time
	}
	if r.rStatus.Valid {
		rs := &c.Record
		rs.Token = r.rToken.Int64
		if r.rStatus.Int16 == 0 {
			rs.State = store.Running
			rs.LeaseEnded = r.rEnded.Bool
			switch {
			case r.rUncertan.Int16 != 0:
				rs.Uncertain = store.Uncertainty(r.rUncertan.Int16)
			case rs.LeaseEnded:
				rs.Uncertain = store.UncertainLeaseEnded
			}
		} else {
			rs.State = store.Completed
			rs.Status = int(r.rStatus.Int16)
		}
	}
	return c
}
