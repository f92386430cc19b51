package pgstore_test

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

func inspectClaim(scope, key, op string, lease time.Duration) store.Claim {
	return store.Claim{
		ID:          store.ID{Scope: scope, Key: key},
		Operation:   op,
		Fingerprint: canonical.Fingerprint{Version: canonical.Version, Sum: sha256.Sum256([]byte(key))},
		Retention:   time.Hour,
		Lease:       lease,
	}
}

// reserve claims c and returns its token.
func reserve(t *testing.T, st *pgstore.Store, c store.Claim) int64 {
	t.Helper()
	r, err := st.Reserve(context.Background(), c)
	if err != nil || !r.Claimed() {
		t.Fatalf("reserve %s: %+v %v", c.ID.Key, r, err)
	}
	return r.Token
}

// Inspect reads rows as support staff need them: timestamps, lease end, the body only when asked,
// expired rows until they are swept, in the order of the keys asked for.
func TestInspect(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	st := pgstore.New(pool, pgstore.Options{Partitioned: partitioned()})

	done := inspectClaim("t1", "k-done-000000000001", "createPayment", time.Minute)
	tok := reserve(t, st, done)
	resp := store.Response{Status: 201, Header: []byte(`{"Content-Type":["application/json"],"Location":["/v1/payments/7"]}`), Body: []byte(`{"id":7}`)}
	if err := st.Complete(ctx, withRetention(done, time.Hour), tok, resp); err != nil {
		t.Fatal(err)
	}
	running := inspectClaim("t1", "captureCharge k-run-0000000000001", "captureCharge", time.Minute)
	reserve(t, st, running)
	stale := inspectClaim("t1", "k-stale-00000000001", "captureCharge", time.Minute)
	reserve(t, st, stale)
	expired := inspectClaim("t1", "k-expired-000000001", "createPayment", time.Minute)
	tok = reserve(t, st, expired)
	if err := st.Complete(ctx, withRetention(expired, time.Hour), tok, resp); err != nil {
		t.Fatal(err)
	}
	other := inspectClaim("t2", "k-done-000000000001", "createPayment", time.Minute)
	reserve(t, st, other)
	if _, err := pool.Exec(ctx, `UPDATE idempotency_records SET locked_until = now() - interval '5 seconds' WHERE key_id = $1`, keyID(stale.ID.Scope, stale.ID.Key)); err != nil {
		t.Fatal(err)
	}
	expiredAt, _ := anHourAgo(t, pool)
	if _, err := pool.Exec(ctx, `UPDATE idempotency_records SET expires_at = $2 WHERE key_id = $1`, keyID(expired.ID.Scope, expired.ID.Key), expiredAt); err != nil {
		t.Fatal(err)
	}

	keys := []string{expired.ID.Key, "k-absent-0000000001", running.ID.Key, done.ID.Key, stale.ID.Key}
	snaps, err := st.Inspect(ctx, "t1", keys, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 4 {
		t.Fatalf("%d snapshots, want 4: %+v", len(snaps), snaps)
	}
	for i, want := range []string{expired.ID.Key, running.ID.Key, done.ID.Key, stale.ID.Key} {
		if snaps[i].ID.Key != want || snaps[i].ID.Scope != "t1" {
			t.Errorf("snapshot %d is %v, want t1/%s (the order of the keys)", i, snaps[i].ID, want)
		}
	}
	ex, run, dn, sl := snaps[0], snaps[1], snaps[2], snaps[3]
	if ex.Live || ex.State != store.Completed || !ex.ExpiresAt.Before(ex.ReadAt) {
		t.Errorf("expired row: live %v state %v expires %v read %v", ex.Live, ex.State, ex.ExpiresAt, ex.ReadAt)
	}
	if !run.Live || run.State != store.Running || run.LeaseLeft <= 50*time.Second || run.LockedUntil.IsZero() || !run.CompletedAt.IsZero() || run.Operation != "captureCharge" {
		t.Errorf("running row: %+v", run)
	}
	if sl.State != store.Running || sl.LeaseLeft > -4*time.Second || !sl.LockedUntil.Before(sl.ReadAt) {
		t.Errorf("stale row: lease left %v, locked until %v, read at %v", sl.LeaseLeft, sl.LockedUntil, sl.ReadAt)
	}
	if !dn.Live || dn.State != store.Completed || dn.Response.Status != 201 || dn.Response.Body != nil || dn.BodySize != 8 ||
		string(dn.Response.Header) == "" || dn.CompletedAt.IsZero() || dn.CompletedAt.Before(dn.CreatedAt) ||
		dn.ExpiresAt.Sub(dn.CompletedAt) < 59*time.Minute || dn.Fingerprint != done.Fingerprint {
		t.Errorf("completed row without body: %+v", dn)
	}
	withBody, err := st.Inspect(ctx, "t1", []string{done.ID.Key}, true)
	if err != nil || len(withBody) != 1 || string(withBody[0].Response.Body) != `{"id":7}` {
		t.Fatalf("with body: %+v %v", withBody, err)
	}
	if none, err := st.Inspect(ctx, "t3", keys, true); err != nil || len(none) != 0 {
		t.Errorf("another tenant sees %+v %v", none, err)
	}

	s, err := st.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Running != 3 || s.Completed != 2 || s.Stale != 1 || s.Expired != 1 || s.OldestRunning == nil || s.OldestExpired == nil ||
		s.ResponseBytes < 2*8 || s.StorageBytes <= 0 || len(s.Operations) != 2 {
		t.Errorf("stats: %+v", s)
	}
	if o := s.Operations[0]; o.Operation != "captureCharge" || o.Running != 2 || o.Stale != 1 || o.Completed != 0 {
		t.Errorf("stats of captureCharge: %+v", o)
	}
	if o := s.Operations[1]; o.Operation != "createPayment" || o.Running != 1 || o.Completed != 2 || o.Expired != 1 {
		t.Errorf("stats of createPayment: %+v", o)
	}
}

type sweepReports struct {
	mu      sync.Mutex
	reports []store.SweepReport
	swept   int64
}

func (s *sweepReports) Swept(n int64) { s.mu.Lock(); s.swept += n; s.mu.Unlock() }
func (s *sweepReports) SweepDone(r store.SweepReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reports = append(s.reports, r)
}

// A sweeper whose observer is a store.SweepObserver reports each sweep with the stale running
// claims by operation and its lag: the age of the oldest expired row it could not delete.
func TestSweeperReportsBacklog(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	st := pgstore.New(pool, pgstore.Options{Partitioned: partitioned()})
	for i, c := range []store.Claim{
		inspectClaim("t1", "k-stale-a-000000001", "captureCharge", time.Minute),
		inspectClaim("t2", "k-stale-b-000000001", "captureCharge", time.Minute),
		inspectClaim("t1", "k-stale-c-000000001", "refund", time.Minute),
		inspectClaim("t1", "k-fresh-0000000001", "refund", time.Minute),
		inspectClaim("t1", "k-old-1-0000000001", "createPayment", time.Minute),
		inspectClaim("t1", "k-old-2-0000000001", "createPayment", time.Minute),
	} {
		tok := reserve(t, st, c)
		if i >= 4 {
			if err := st.Complete(ctx, withRetention(c, time.Hour), tok, store.Response{Status: 200}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE idempotency_records SET locked_until = now() - interval '1 second' WHERE key_id = ANY($1)`,
		[][16]byte{keyID("t1", "k-stale-a-000000001"), keyID("t2", "k-stale-b-000000001"), keyID("t1", "k-stale-c-000000001")}); err != nil {
		t.Fatal(err)
	}
	expiredAt, now := anHourAgo(t, pool)
	if _, err := pool.Exec(ctx, `UPDATE idempotency_records SET expires_at = $2 WHERE key_id = ANY($1)`,
		[][16]byte{keyID("t1", "k-old-1-0000000001"), keyID("t1", "k-old-2-0000000001")}, expiredAt); err != nil {
		t.Fatal(err)
	}
	// Another transaction holds one expired row: the sweeper skips it (SKIP LOCKED), so it is
	// still there after the sweep and the lag is its age.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM idempotency_records WHERE key_id = $1 FOR UPDATE`, keyID("t1", "k-old-1-0000000001")); err != nil {
		t.Fatal(err)
	}
	obs := &sweepReports{}
	sw := &pgstore.Sweeper{Pool: pool, Observer: obs}
	if n, err := sw.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("first sweep: %d %v, want 1 deleted", n, err)
	}
	r := obs.reports[0]
	if r.Err != nil || !r.Sampled || r.Deleted != 1 || r.Duration <= 0 {
		t.Fatalf("report: %+v", r)
	}
	if len(r.StaleRunning) != 2 || r.StaleRunning["captureCharge"] != 2 || r.StaleRunning["refund"] != 1 {
		t.Errorf("stale running: %v", r.StaleRunning)
	}
	if age := now.Sub(expiredAt); r.Lag < age-time.Minute || r.Lag > age+time.Minute {
		t.Errorf("lag %v, want about %v (the age of the row the sweeper skipped)", r.Lag, age)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := sw.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("second sweep: %d %v", n, err)
	}
	if r := obs.reports[1]; r.Lag != 0 || r.Err != nil {
		t.Errorf("caught up: %+v, want lag 0", r)
	}
	// A canceled sweep is reported as failed, without a sample.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sw.SweepOnce(cctx); err == nil {
		t.Fatal("a canceled sweep succeeded")
	}
	if r := obs.reports[2]; r.Err == nil || r.Sampled {
		t.Errorf("canceled sweep: %+v", r)
	}
}

// anHourAgo is when these tests make a record expire, and the database's now: an hour before
// now, or on the partitioned layout no earlier than the start of the current UTC day, since a
// fresh database has no partition before that day's (between 00:00 and 01:00 UTC an hour ago
// had nowhere to go, and the UPDATE failed).
func anHourAgo(t *testing.T, pool *pgxpool.Pool) (at, now time.Time) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	at = now.Add(-time.Hour)
	if day := now.UTC().Truncate(24 * time.Hour); partitioned() && at.Before(day) {
		at = day
	}
	return at, now
}
