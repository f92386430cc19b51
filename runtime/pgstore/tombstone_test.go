package pgstore_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// A late retry never runs the operation again (issue 39): after the retention the record's
// answer is gone, but its tombstone remembers the key, under every claim strategy, the portable
// path and lease mode, on both layouts. The same request gets 410 result-expired and another
// one 422, before and after the sweeper removed the expired row; once the tombstone's horizon
// has passed, the key is new again, and its new record writes a new tombstone. Before
// tombstones the late retry ran the handler a second time (TestExpiredRecordIsAbsent is that
// behaviour, kept for tombstone: 0s).
func TestExpiredRecordIsRemembered(t *testing.T) {
	type variant struct {
		name  string
		lease bool
		tweak func(*setup)
	}
	var variants []variant
	for _, s := range strategies {
		variants = append(variants, variant{"atomic/" + s.name, false, withStrategy(s.strategy)})
	}
	variants = append(variants,
		variant{"atomic/portable", false, func(c *setup) { c.store.NoAdvisoryLocks = true }},
		variant{"lease", true, nil})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel() // each waits a second of the database clock
			ctx := context.Background()
			e := newEnv(t, v.tweak)
			op := payOp()
			if v.lease {
				op = leaseOp()
			}
			op.Retention, op.Tombstone = time.Second, time.Hour
			h := e.atomicHandler(op)
			if v.lease {
				h = e.leaseHandler(op, &provider{})
			}
			if w := serve(h, req("t1", key1, body100)); w.Code != http.StatusCreated {
				t.Fatal(w.Code, w.Body)
			}
			eventually(t, "the retention to end", func() bool {
				rec, _ := e.leaseRecord(key1)
				return rec.State == store.Expired
			})
			late := func(when string) {
				t.Helper()
				if w := serve(h, req("t1", key1, body100)); w.Code != http.StatusGone || problemType(t, w) != runtime.ProblemResultExpired {
					t.Fatalf("late retry %s: %d %s, want 410 result-expired", when, w.Code, w.Body)
				}
				if w := serve(h, req("t1", key1, `{"amount":300}`)); w.Code != http.StatusUnprocessableEntity {
					t.Fatalf("another request %s: %d %s, want 422", when, w.Code, w.Body)
				}
				if n := e.payments("t1"); n != 1 {
					t.Fatalf("payments %d %s, want 1: a late retry ran the operation again", n, when)
				}
			}
			late("with the expired row still there")
			if !partitioned() {
				// The partitioned layout drops whole partitions; the plain one deletes the row.
				if _, err := (&pgstore.Sweeper{Pool: e.pool}).SweepOnce(ctx); err != nil {
					t.Fatal(err)
				}
				if n := e.records(); n != 0 {
					t.Fatalf("%d records after the sweep, want 0", n)
				}
				late("after the sweeper deleted the row")
			}

			forget(t, e, key1)
			if w := serve(h, req("t1", key1, `{"amount":300}`)); w.Code != http.StatusCreated || w.Header().Get(runtime.HeaderReplayed) != "" {
				t.Fatalf("after the tombstone's horizon: %d %s, want a new execution", w.Code, w.Body)
			}
			if n := e.payments("t1"); n != 2 {
				t.Fatalf("payments %d, want 2 (the key was forgotten)", n)
			}
			var remembered bool
			if err := e.pool.QueryRow(ctx, `SELECT GREATEST((SELECT max(forget_at) FROM idempotency_records WHERE key_id = $1 AND response_status <> 0),
				(SELECT forget_at FROM idempotency_tombstones WHERE key_id = $1)) > now() + interval '50 minutes'`,
				keyID("t1", key1)).Scan(&remembered); err != nil || !remembered {
				t.Fatalf("the new record's tombstone: %v %v, want the key remembered an hour ahead", remembered, err)
			}
		})
	}
}

// The sweepers keep tombstones and delete them past their horizon, and only those: on the plain
// table the sweeper moves each expired record still remembered into a tombstone, in the
// statement that deletes it, and deletes the tombstones past their horizon, reporting them apart
// from the records (store.SweepReport.Tombstones); the partitioned layout's tombstones are
// written with the completion and deleted by the partition sweeper.
func TestSweeperDeletesForgottenTombstones(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	op := payOp()
	op.Retention, op.Tombstone = time.Second, 2*time.Hour
	h := e.atomicHandler(op)
	keys := []string{"k-tomb-000000000001", "k-tomb-000000000002", "k-tomb-000000000003"}
	for _, k := range keys {
		if w := serve(h, req("t1", k, body100)); w.Code != http.StatusCreated {
			t.Fatal(w.Code)
		}
	}
	tombstones := func() int {
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_tombstones`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	eventually(t, "the retention to end", func() bool {
		rec, _ := e.leaseRecord(keys[2])
		return rec.State == store.Expired
	})
	obs := &sweepReports{}
	sweep := func() int64 {
		if partitioned() {
			if _, err := (&pgstore.PartitionSweeper{Pool: e.pool}).SweepOnce(ctx); err != nil {
				t.Fatal(err)
			}
			return -1 // the partition sweeper reports no tombstones; the table says what it did
		}
		if _, err := (&pgstore.Sweeper{Pool: e.pool, Observer: obs, BatchSize: 1}).SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
		return obs.reports[len(obs.reports)-1].Tombstones
	}
	if !partitioned() {
		if n := tombstones(); n != 0 {
			t.Fatalf("%d tombstones before the sweep: the plain table's expired records are their own", n)
		}
		if n := sweep(); n != 0 || e.records() != 0 || tombstones() != 3 {
			t.Fatalf("the sweep deleted %d tombstones and left %d records and %d tombstones, want 0, 0 and 3 (moved)", n, e.records(), tombstones())
		}
	}
	for _, k := range keys {
		if rec, _ := e.leaseRecord(k); rec.State != store.Expired {
			t.Fatalf("%s after the sweep: %+v, want its tombstone", k, rec)
		}
	}
	forget(t, e, keys[0])
	forget(t, e, keys[1])
	if n := sweep(); (n != 2 && n != -1) || tombstones() != 1 {
		t.Fatalf("swept %d tombstones, %d left; want 2 swept (the forgotten ones), 1 left", n, tombstones())
	}
}

// forget moves the tombstone of (t1, key) past its horizon, wherever it is: its tombstone row,
// or its expired record (plain table, not swept yet).
func forget(t *testing.T, e *env, key string) {
	t.Helper()
	var n int64
	for _, q := range []string{`UPDATE idempotency_tombstones SET forget_at = now() - interval '1 second' WHERE key_id = $1`,
		`UPDATE idempotency_records SET forget_at = now() - interval '1 second' WHERE key_id = $1 AND response_status <> 0 AND expires_at <= now()`} {
		ct, err := e.pool.Exec(context.Background(), q, keyID("t1", key))
		if err != nil {
			t.Fatalf("forget %s: %v", key, err)
		}
		n += ct.RowsAffected()
	}
	if n == 0 {
		t.Fatalf("forget %s: no tombstone", key)
	}
}

// A key with a live record never reads the tombstones table: the reads gate it behind a one-time
// filter on the record, so replays, 409s and 422s cost what they did before tombstones. The
// plans of the reads, run for a live key, show the tombstones' scan never executed; for a key
// whose record is gone (swept, or on the partitioned layout never read once expired), executed
// once.
func TestReplayNeverReadsTombstones(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, nil)
	op := payOp()
	op.Retention, op.Tombstone = time.Second, time.Hour
	h := e.atomicHandler(op)
	for _, k := range []string{"k-live-00000000001", "k-gone-00000000001"} {
		if w := serve(h, req("t1", k, body100)); w.Code != http.StatusCreated {
			t.Fatal(w.Code)
		}
	}
	if _, err := e.pool.Exec(ctx, `UPDATE idempotency_records SET expires_at = now() + interval '1 hour' WHERE key_id = $1`, keyID("t1", "k-live-00000000001")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other key's retention to end", func() bool {
		rec, _ := e.leaseRecord("k-gone-00000000001")
		return rec.State == store.Expired
	})
	if !partitioned() {
		// On the plain table the expired record is its own tombstone until the sweeper moves it.
		if _, err := (&pgstore.Sweeper{Pool: e.pool}).SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for name, sql := range e.st.ReadsForTest() {
		for key, want := range map[string]float64{"k-live-00000000001": 0, "k-gone-00000000001": 1} {
			scope, kid := pgstore.Digest(store.ID{Scope: "t1", Key: key})
			args := []any{scope, uuidOf(kid)}
			switch name {
			case "readProbe":
				args = append(args, int64(1))
			case "readCharged":
				args = append(args, scope, int64(60), int64(1000))
			case "readProbeCharged":
				args = append(args, scope, int64(60), int64(1000), int64(1))
			}
			loops, found := tombstoneScanLoops(t, e, sql, args)
			if !found || loops != want {
				t.Errorf("%s of %s: the tombstones' scan ran %v times (in the plan: %v), want %v", name, key, loops, found, want)
			}
		}
	}
}

// tombstoneScanLoops runs sql under EXPLAIN ANALYZE in a transaction it rolls back (the charged
// reads count), and returns how many times the plan's scan of idempotency_tombstones ran.
func tombstoneScanLoops(t *testing.T, e *env, sql string, args []any) (float64, bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var plan []map[string]any
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		t.Fatalf("explain: %v", err)
	}
	var walk func(n map[string]any) (float64, bool)
	walk = func(n map[string]any) (float64, bool) {
		if n["Relation Name"] == "idempotency_tombstones" {
			loops, _ := n["Actual Loops"].(float64)
			return loops, true
		}
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				if l, found := walk(m); found {
					return l, true
				}
			}
		}
		return 0, false
	}
	return walk(plan[0]["Plan"].(map[string]any))
}

// uuidOf is a key digest as the uuid columns take it.
func uuidOf(kid [16]byte) pgtype.UUID { return pgtype.UUID{Bytes: kid, Valid: true} }
