package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/store"
)

// The statements of an operator's resolution (Store.Resolve), one transaction per record.

// sqlResolveScope finds the scope of the call $1 (by the provider key alone, which every scope
// may hold on a distributed engine: a plain read of every shard); sqlResolveCall then locks the
// call by its whole key, (scope $2, provider key $1), and reads what the resolution needs. Citus
// refuses FOR UPDATE in a read of several shards, so the lock is taken by the routed read.
const (
	sqlResolveScope = `SELECT scope_id FROM idempotency_provider_calls WHERE provider_key = $1`
	sqlResolveCall  = `SELECT scope_id, key_id, operation, outcome, retention_us FROM idempotency_provider_calls
WHERE provider_key = $1 AND scope_id = $2 FOR UPDATE`
)

// resolvable is the record $1/$2 running under $3 whose lease has ended: no owner can complete
// it any more.
const resolvable = `WHERE key_id = $2 AND scope_id = $1 AND fencing_token = $3 AND response_status = 0 AND locked_until <= now()`

// sqlResolveComplete completes it with the provider's outcome ($4 status, $5 headers, $6 body),
// replaying for $7 µs.
const sqlResolveComplete = `UPDATE idempotency_records SET
	response_status = $4, response_headers = $5, response_body = $6, body_omitted = false,
	uncertain = 0, uncertain_at = NULL,
	locked_until = statement_timestamp(), expires_at = statement_timestamp() + $7::bigint * interval '1 microsecond'
` + resolvable

// sqlResolveRelease releases it.
const sqlResolveRelease = `DELETE FROM idempotency_records ` + resolvable

// sqlResolveLive reads whether the key still has a live record (which the resolution did not
// match: another token, a running lease, a completion).
const sqlResolveLive = `SELECT fencing_token FROM idempotency_records
WHERE key_id = $2 AND scope_id = $1 AND (response_status = 0 OR expires_at > now()) LIMIT 1`

// sqlResolveCalls settles the record's calls that are still started or released: $3 outcome,
// $4 status.
const sqlResolveCalls = `UPDATE idempotency_provider_calls SET outcome = $3, response_status = $4, settled_at = now()
WHERE key_id = $2 AND scope_id = $1 AND outcome IN (0, 2)`

// sqlResolutionAudit appends the resolution to the audit trail. The report ($10) travels as
// text: as bytes, the statement modes that infer types from Go values (exec, simple_protocol:
// those for transaction-pooling proxies) would send it as a bytea literal.
const sqlResolutionAudit = `INSERT INTO idempotency_resolutions (scope_id, key_id, fencing_token, provider_key, operation,
	action, record_written, response_status, class, report, operator, reason, resolved_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text::jsonb, $11, $12, now())
RETURNING resolved_at`

// Resolve writes an operator's resolution (store.Reconcilable): the record, its calls and the
// audit trail, in one transaction.
func (s *Store) Resolve(ctx context.Context, r store.Resolution) (store.Resolved, error) {
	if err := s.ready(ctx); err != nil {
		return store.Resolved{}, err
	}
	pk, ok := decodeProviderKey(r.ProviderKey)
	if !ok {
		return store.Resolved{}, fmt.Errorf("resolve: the provider key is not 64 hex digits")
	}
	report := r.Report
	if len(report) == 0 {
		report = []byte("{}")
	}
	var done store.Resolved
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			scope     int64
			key       pgtype.UUID
			operation string
			outcome   int16
			retention int64
		)
		err := tx.QueryRow(ctx, sqlResolveScope, pk).Scan(&scope)
		if err == nil {
			// A call swept between the two reads is not found by the second.
			err = tx.QueryRow(ctx, sqlResolveCall, pk, scope).Scan(&scope, &key, &operation, &outcome, &retention)
		}
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("%w: the call log holds no call of this provider key", store.ErrLost)
		case err != nil:
			return err
		case store.CallOutcome(outcome) != store.CallStarted && store.CallOutcome(outcome) != store.CallReleased:
			return fmt.Errorf("%w: the call is %s", store.ErrLost, store.CallOutcome(outcome))
		}
		action, callOutcome, status := "released", store.CallResolvedReleased, 0
		if r.Complete {
			action, callOutcome, status = "completed", store.CallResolvedCompleted, r.Response.Status
		}
		if store.CallOutcome(outcome) == store.CallStarted {
			var n int64
			if r.Complete {
				headers, body := r.Response.Header, r.Response.Body
				if headers == nil {
					headers = []byte{}
				}
				if body == nil {
					body = []byte{}
				}
				ct, err := tx.Exec(ctx, sqlResolveComplete, scope, key, r.Token, int16(status), headers, body, retention)
				if err != nil {
					return err
				}
				n = ct.RowsAffected()
			} else {
				ct, err := tx.Exec(ctx, sqlResolveRelease, scope, key, r.Token)
				if err != nil {
					return err
				}
				n = ct.RowsAffected()
			}
			done.Record = n > 0
			if n == 0 {
				var token int64
				switch err := tx.QueryRow(ctx, sqlResolveLive, scope, key).Scan(&token); {
				case err == nil:
					return fmt.Errorf("%w: the record is running under token %d with its lease, or completed, since it was read", store.ErrLost, token)
				case !errors.Is(err, pgx.ErrNoRows):
					return err
				}
			}
		}
		if _, err := tx.Exec(ctx, sqlResolveCalls, scope, key, int16(callOutcome), int16(status)); err != nil {
			return err
		}
		return tx.QueryRow(ctx, sqlResolutionAudit, scope, key, r.Token, pk, operation, action, done.Record,
			int16(status), r.Class, string(report), r.Operator, r.Reason).Scan(&done.At)
	})
	if err != nil {
		if isMoved(err) {
			err = fmt.Errorf("%w: the record moved meanwhile", store.ErrLost)
		}
		return store.Resolved{}, fmt.Errorf("resolve: %w", err)
	}
	done.At = done.At.UTC()
	return done, nil
}

// callRetentionDefault is Sweeper.CallRetention's default.
const callRetentionDefault = 30 * 24 * time.Hour

// sqlSweepCalls deletes up to $1 calls started more than $2 µs ago, oldest first, skipping rows
// other sweepers hold; sqlSweepCallsPortable without SKIP LOCKED.
const (
	sqlSweepCalls = `DELETE FROM idempotency_provider_calls c
USING (SELECT provider_key FROM idempotency_provider_calls WHERE started_at < now() - $2::bigint * interval '1 microsecond'
       ORDER BY started_at LIMIT $1 FOR UPDATE SKIP LOCKED) d
WHERE c.provider_key = d.provider_key`
	sqlSweepCallsPortable = `DELETE FROM idempotency_provider_calls c
USING (SELECT provider_key FROM idempotency_provider_calls WHERE started_at < now() - $2::bigint * interval '1 microsecond'
       ORDER BY started_at LIMIT $1) d
WHERE c.provider_key = d.provider_key`
)

// sweepCalls deletes the calls started more than retention ago (default callRetentionDefault)
// in batches of batch, pausing between batches, and returns how many it deleted.
func sweepCalls(ctx context.Context, pool *pgxpool.Pool, retention time.Duration, batch int, pause time.Duration, portable bool) (int64, error) {
	if retention <= 0 {
		retention = callRetentionDefault
	}
	q := sqlSweepCalls
	if portable {
		q = sqlSweepCallsPortable
	}
	var total int64
	for {
		ct, err := pool.Exec(ctx, q, batch, retention.Microseconds())
		if err != nil {
			return total, fmt.Errorf("sweep provider calls: %w", err)
		}
		total += ct.RowsAffected()
		if ct.RowsAffected() < int64(batch) {
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(pause):
		}
	}
}
