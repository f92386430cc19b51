package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/runtime/store"
)

// The read-only statements of support tools (store.Inspector) and of the sweeper's monitoring
// sample. None of them takes a lock or a transaction id.

var _ store.Inspector = (*Store)(nil)

// sqlInspect reads the rows of one scope ($1, its digest) for a list of key digests ($2), with
// the body only when $3 is true. Expired rows are returned too: support staff must see a record
// that stopped replaying but is still there. Records are stored under digests (Digest): the
// caller maps key_id back to the keys it asked for.
const sqlInspect = `SELECT r.key_id, r.operation, r.fingerprint, r.fingerprint_version, r.response_status, r.fencing_token,
	(r.response_status = 0 OR r.expires_at > now()), r.created_at, r.expires_at, r.locked_until,
	CAST(EXTRACT(EPOCH FROM (r.locked_until - now())) * 1000000 AS bigint), now(),
	r.response_headers, CASE WHEN $3::boolean THEN r.response_body END,
	octet_length(r.response_body), r.body_omitted, r.uncertain_at, ` + recordUncertain + `, ` + recordCallsJSON + `, r.forget_at
FROM idempotency_records r WHERE r.scope_id = $1 AND r.key_id = ANY($2::uuid[])
ORDER BY r.expires_at`

// sqlInspectTombstones reads the tombstones of one scope ($1) for a list of key digests ($2).
const sqlInspectTombstones = `SELECT t.key_id, t.fingerprint, t.fingerprint_version, t.status_class, t.completed_at, t.forget_at,
	t.forget_at > now(), now()
FROM idempotency_tombstones t WHERE t.scope_id = $1 AND t.key_id = ANY($2::uuid[])`

// sqlTombstoneStats counts the tombstones whose horizon runs (rows of idempotency_tombstones,
// and expired records still remembered, which the sweeper has not moved there yet) and those the
// sweeper has not deleted yet after it. It reads the whole table (support and CLI only).
const sqlTombstoneStats = `SELECT (SELECT count(*) FROM idempotency_tombstones WHERE forget_at > now())
	+ (SELECT count(*) FROM idempotency_records WHERE response_status <> 0 AND expires_at <= now() AND forget_at > now()),
	(SELECT count(*) FROM idempotency_tombstones WHERE forget_at <= now())`

// sqlStats summarises every row by operation. It reads the whole table (support and CLI only).
const sqlStats = `SELECT operation,
	count(*) FILTER (WHERE response_status = 0),
	count(*) FILTER (WHERE response_status <> 0),
	count(*) FILTER (WHERE response_status = 0 AND locked_until <= now()),
	min(created_at) FILTER (WHERE response_status = 0),
	count(*) FILTER (WHERE response_status <> 0 AND expires_at <= now()),
	min(expires_at) FILTER (WHERE response_status <> 0 AND expires_at <= now()),
	COALESCE(sum(octet_length(response_body) + octet_length(response_headers)), 0)::bigint
FROM idempotency_records GROUP BY operation ORDER BY operation`

// sqlStorageBytes is the tables' size (the records' and the tombstones') with their indexes and TOAST (PostgreSQL's own function;
// engines without it report 0). On the partitioned layout it is the sum over the partitions.
const sqlStorageBytes = `SELECT now(), COALESCE((SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
	WHERE c.relkind = 'r' AND (c.oid = to_regclass('idempotency_records') OR c.oid = to_regclass('idempotency_tombstones') OR c.oid IN
		(SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass('idempotency_records')))), 0)::bigint`

// sqlStorageBytesCitus is sqlStorageBytes on Citus: the shards' sizes with their indexes and
// TOAST, summed over the workers (the coordinator's table is an empty shell).
const sqlStorageBytesCitus = `SELECT now(), COALESCE(citus_total_relation_size('idempotency_records'), 0)::bigint`

// sqlStaleRunning counts running claims whose lease has ended, by operation, through the partial
// index idempotency_records_running_idx (migration 0002).
const sqlStaleRunning = `SELECT operation, count(*) FROM idempotency_records
WHERE response_status = 0 AND locked_until <= now() GROUP BY operation`

// sqlSweepLag is how long ago the oldest expired row still present expired, in microseconds
// (0 when there is none): the first entry of the expiry index.
const sqlSweepLag = `SELECT COALESCE(CAST(EXTRACT(EPOCH FROM now() - min(expires_at)) * 1000000 AS bigint), 0)
FROM idempotency_records WHERE expires_at <= now() AND response_status <> 0`

// Inspect implements store.Inspector: one SELECT by primary key for all of keys.
func (s *Store) Inspect(ctx context.Context, scope string, keys []string, withBody bool) ([]store.Snapshot, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	scopeID, _ := Digest(store.ID{Scope: scope})
	byDigest := make(map[[16]byte]string, len(keys))
	ids := make([]pgtype.UUID, 0, len(keys))
	for _, k := range keys {
		_, kid := Digest(store.ID{Scope: scope, Key: k})
		if _, dup := byDigest[kid]; !dup {
			byDigest[kid] = k
			ids = append(ids, pgtype.UUID{Bytes: kid, Valid: true})
		}
	}
	rows, err := s.pool.Query(ctx, sqlInspect, scopeID, ids, withBody)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Snapshot, error) {
		var (
			sn          store.Snapshot
			kid         [16]byte
			fp          []byte
			fpVersion   int16
			status      int16
			lockedUntil time.Time
			leftUS      int64
			since       *time.Time
			reason      int16
			calls       []byte
			forget      *time.Time
		)
		sn.ID.Scope = scope
		err := row.Scan(&kid, &sn.Operation, &fp, &fpVersion, &status, &sn.Token, &sn.Live,
			&sn.CreatedAt, &sn.ExpiresAt, &lockedUntil, &leftUS, &sn.ReadAt,
			&sn.Response.Header, &sn.Response.Body, &sn.BodySize, &sn.Response.BodyOmitted,
			&since, &reason, &calls, &forget)
		if err != nil {
			return sn, err
		}
		if forget != nil {
			sn.ForgetAt = *forget
		}
		sn.ID.Key = byDigest[kid]
		sn.Ref = uuidText(kid)
		sn.Uncertain = store.Uncertainty(reason)
		if since != nil && sn.Uncertain != store.NotUncertain && sn.Uncertain != store.UncertainLeaseEnded {
			sn.UncertainSince = *since
		}
		if sn.Calls, err = parseCalls(calls); err != nil {
			return sn, err
		}
		copy(sn.Fingerprint.Sum[:], fp)
		sn.Fingerprint.Version = uint16(fpVersion)
		if status == 0 {
			// Running: locked_until is the lease's end.
			sn.State = store.Running
			sn.LockedUntil = lockedUntil
			sn.LeaseLeft = time.Duration(leftUS) * time.Microsecond
			sn.Response.Header, sn.Response.Body, sn.BodySize = nil, nil, 0
		} else {
			// Completed: locked_until is when it completed.
			sn.State = store.Completed
			sn.CompletedAt = lockedUntil
			sn.Response.Status = int(status)
			if len(sn.Response.Header) == 0 {
				sn.Response.Header = nil
			}
		}
		if !withBody {
			sn.Response.Body = nil
		}
		if sn.State == store.Completed && !sn.Live && sn.ForgetAt.After(sn.ReadAt) {
			// Past its expiry and still remembered: the record is the key's tombstone.
			sn = rowTombstone(sn)
		}
		return sn, nil
	})
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if out, err = s.inspectTombstones(ctx, scope, scopeID, ids, byDigest, out); err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	order := make(map[string]int, len(keys))
	for i, k := range keys {
		if _, dup := order[k]; !dup {
			order[k] = i
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return order[out[i].ID.Key] < order[out[j].ID.Key] })
	return out, nil
}

// rowTombstone is the tombstone an expired completed record still remembered is (plain table):
// what a tombstone keeps of it, Live.
func rowTombstone(sn store.Snapshot) store.Snapshot {
	t := store.Snapshot{ID: sn.ID, Ref: sn.Ref, State: store.Expired, Live: true, StatusClass: sn.Response.Status / 100,
		CompletedAt: sn.CompletedAt, ExpiresAt: sn.ExpiresAt, ForgetAt: sn.ForgetAt, ReadAt: sn.ReadAt}
	t.Fingerprint.Version = sn.Fingerprint.Version
	copy(t.Fingerprint.Sum[:store.TombstoneSumBytes], sn.Fingerprint.Sum[:])
	return t
}

// inspectTombstones reads the tombstones of ids and merges them into the rows read: a key
// whose record is live stays that record (with its tombstone's ForgetAt); a key whose record
// has expired, or is gone, and whose tombstone's horizon runs is that tombstone; otherwise the
// expired record, or else the forgotten tombstone, as the sweeper has left it.
func (s *Store) inspectTombstones(ctx context.Context, scope string, scopeID int64, ids []pgtype.UUID, byDigest map[[16]byte]string, out []store.Snapshot) ([]store.Snapshot, error) {
	rows, err := s.pool.Query(ctx, sqlInspectTombstones, scopeID, ids)
	if err != nil {
		return nil, err
	}
	tombs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Snapshot, error) {
		var (
			sn      store.Snapshot
			kid     [16]byte
			fp      []byte
			version int16
			class   int16
		)
		err := row.Scan(&kid, &fp, &version, &class, &sn.CompletedAt, &sn.ForgetAt, &sn.Live, &sn.ReadAt)
		sn.ID = store.ID{Scope: scope, Key: byDigest[kid]}
		sn.Ref, sn.State, sn.StatusClass = uuidText(kid), store.Expired, int(class)
		copy(sn.Fingerprint.Sum[:store.TombstoneSumBytes], fp)
		sn.Fingerprint.Version = uint16(version)
		return sn, err
	})
	if err != nil {
		return nil, err
	}
	for _, t := range tombs {
		i := slices.IndexFunc(out, func(sn store.Snapshot) bool { return sn.ID.Key == t.ID.Key })
		switch {
		case i < 0:
			out = append(out, t)
		case out[i].Live:
			out[i].ForgetAt = t.ForgetAt
		case t.Live:
			t.ExpiresAt = out[i].ExpiresAt
			out[i] = t
		}
	}
	return out, nil
}

// Stats implements store.Inspector. It reads the whole table once, plus PostgreSQL's size
// functions; an engine without pg_total_relation_size reports StorageBytes 0.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	if err := s.ready(ctx); err != nil {
		return store.Stats{}, err
	}
	var st store.Stats
	if err := s.pool.QueryRow(ctx, s.q.storageBytes).Scan(&st.ReadAt, &st.StorageBytes); err != nil {
		// The size is a bonus; the clock is not.
		st.StorageBytes = 0
		if err := s.pool.QueryRow(ctx, "SELECT now()").Scan(&st.ReadAt); err != nil {
			return st, fmt.Errorf("stats: %w", err)
		}
	}
	rows, err := s.pool.Query(ctx, sqlStats)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	ops, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.OperationStats, error) {
		var o store.OperationStats
		var oldestExpired *time.Time
		err := row.Scan(&o.Operation, &o.Running, &o.Completed, &o.Stale, &o.OldestRunning, &o.Expired,
			&oldestExpired, &o.ResponseBytes)
		if err == nil && oldestExpired != nil && (st.OldestExpired == nil || oldestExpired.Before(*st.OldestExpired)) {
			st.OldestExpired = oldestExpired
		}
		return o, err
	})
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	uncertain, err := uncertainByOperation(ctx, s.pool)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	for i := range ops {
		ops[i].Uncertain = uncertain[ops[i].Operation]
		st.Uncertain += ops[i].Uncertain
	}
	if err := s.pool.QueryRow(ctx, sqlTombstoneStats).Scan(&st.Tombstones, &st.ForgottenTombstones); err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	st.Operations = ops
	if st.Operations == nil {
		st.Operations = []store.OperationStats{}
	}
	for _, o := range ops {
		st.Running += o.Running
		st.Completed += o.Completed
		st.Stale += o.Stale
		st.Expired += o.Expired
		st.ResponseBytes += o.ResponseBytes
		if o.OldestRunning != nil && (st.OldestRunning == nil || o.OldestRunning.Before(*st.OldestRunning)) {
			st.OldestRunning = o.OldestRunning
		}
	}
	return st, nil
}

// sampleBacklog reads what the sweeper reports after a sweep: stale running claims and uncertain
// records by operation, and the lag of the oldest expired row. Every statement goes through an
// index.
func sampleBacklog(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}) (stale, uncertain map[string]int64, lag time.Duration, err error) {
	if uncertain, err = uncertainByOperation(ctx, q); err != nil {
		return nil, nil, 0, err
	}
	stale, lag, err = sampleStale(ctx, q)
	return stale, uncertain, lag, err
}

// sampleStale reads the stale running claims by operation and the lag of the oldest expired
// row.
func sampleStale(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}) (map[string]int64, time.Duration, error) {
	rows, err := q.Query(ctx, sqlStaleRunning)
	if err != nil {
		return nil, 0, fmt.Errorf("sample stale running records: %w", err)
	}
	stale := map[string]int64{}
	var (
		op string
		n  int64
	)
	_, err = pgx.ForEachRow(rows, []any{&op, &n}, func() error {
		stale[op] = n
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("sample stale running records: %w", err)
	}
	var lagUS int64
	if err := q.QueryRow(ctx, sqlSweepLag).Scan(&lagUS); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, fmt.Errorf("sample sweep lag: %w", err)
	}
	return stale, time.Duration(lagUS) * time.Microsecond, nil
}
