package pgstore_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/pgstore/migrations"
)

// Retention by time partitions (docs/design.md section 4: expired records count as absent and are
// deleted; here a partition at a time). The table partitioned by expiry gets hourly
// partitions from three sweepers at once (several replicas); a partition whose range has ended
// is detached and dropped whole, with its rows, while the live partitions and their records
// stay; the store works on it and a record whose expiry has no partition fails its claim
// (503), it is never stored elsewhere.
func TestPartitionSweeper(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, migrations.PartitionedSchemaSQL()); err != nil {
		t.Fatalf("PartitionedSchemaSQL: %v", err)
	}
	partitions := func() (n int) {
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'idempotency_records'::regclass").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	obs := &recordingObserver{}
	sweep := func() {
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := &pgstore.PartitionSweeper{Pool: pool, Width: time.Hour, Ahead: 3 * time.Hour, Observer: obs}
				if _, err := s.SweepOnce(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	sweep()
	// This hour's partition and the next ones up to 3 h ahead.
	if n := partitions(); n < 3 || n > 4 {
		t.Fatalf("%d partitions, want this hour's and those up to 3 h ahead", n)
	}
	// A partition that was live when its rows were written, two hours ago: it ended an hour ago.
	e := &env{t: t, pool: pool}
	var hourStart time.Time
	if err := pool.QueryRow(ctx, "SELECT date_trunc('hour', now())").Scan(&hourStart); err != nil {
		t.Fatal(err)
	}
	past := "idempotency_records_p" + hourStart.Add(-2*time.Hour).UTC().Format("20060102t1504")
	if _, err := pool.Exec(ctx, "CREATE TABLE "+past+" (LIKE idempotency_records)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ALTER TABLE idempotency_records ATTACH PARTITION "+past+" FOR VALUES FROM ('"+
		hourStart.Add(-2*time.Hour).UTC().Format(time.RFC3339)+"') TO ('"+hourStart.Add(-time.Hour).UTC().Format(time.RFC3339)+"')"); err != nil {
		t.Fatal(err)
	}
	// A row in that partition (expired), and two live ones.
	for i, at := range []time.Duration{-90 * time.Minute, time.Since(hourStart) + time.Minute, time.Since(hourStart) + 90*time.Minute} {
		if _, err := pool.Exec(ctx, `INSERT INTO idempotency_records
			(scope_id, key_id, created_at, expires_at, locked_until, fencing_token, fingerprint, fingerprint_version,
			 response_status, body_omitted, operation, response_headers, response_body)
			VALUES (1, $1, now(), $2::timestamptz + $3::bigint * interval '1 microsecond', now(), 1, '\x00', 1, 201, false, 'op', '\x', '\x')`,
			keyID("t1", "row-"+string(rune('a'+i))), hourStart, at.Microseconds()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE idempotency_records"); err != nil {
		t.Fatal(err)
	}
	before := partitions()
	sweep()
	if n := partitions(); n != before-1 {
		t.Errorf("%d partitions after the sweep, want %d: the previous hour's dropped", n, before-1)
	}
	if n := e.records(); n != 2 {
		t.Errorf("%d records left, want 2 (the live ones)", n)
	}
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_records WHERE expires_at > now()").Scan(&left); err != nil || left != 2 {
		t.Errorf("%d live records (%v), want 2", left, err)
	}
	if obs.swept != 1 {
		t.Errorf("observed %d swept rows, want 1 (the dropped partition's estimate)", obs.swept)
	}
	var tables int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relname LIKE 'idempotency\\_records\\_p%'").Scan(&tables); err != nil || tables != before-1 {
		t.Errorf("%d partition tables (%v), want %d: a detached partition must be dropped", tables, err, before-1)
	}

	// The store on these partitions; a retention beyond them fails the claim.
	st := pgstore.New(pool, pgstore.Options{Partitioned: true})
	rt, err := runtime.New(runtime.Config{Store: st, SingleTenant: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (id bigserial PRIMARY KEY, scope text NOT NULL, amount bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	e = &env{t: t, pool: pool, st: st, rt: rt, gates: map[string]*gate{}}
	op := payOp()
	op.Retention = time.Hour
	if w := serve(e.atomicHandler(op), req("", key1, body100)); w.Code != 201 {
		t.Fatalf("retention within the partitions: %d %s", w.Code, w.Body)
	}
	op.Retention = 48 * time.Hour
	if w := serve(e.atomicHandler(op), req("", key1+"-long", body100)); w.Code != 503 {
		t.Fatalf("retention beyond the partitions: %d %s, want 503", w.Code, w.Body)
	}
	if n := e.payments(""); n != 1 {
		t.Errorf("payments %d, want 1", n)
	}
}

// The layouts do not convert into each other: each Migrate refuses the other's table.
func TestMigrateRefusesTheOtherLayout(t *testing.T) {
	ctx := context.Background()
	plain := pgtest.NewPool(t, 4)
	if err := pgstore.Migrate(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.MigratePartitioned(ctx, plain); err == nil {
		t.Error("MigratePartitioned on the plain table succeeded")
	}
	part := pgtest.NewPool(t, 4)
	if err := pgstore.MigratePartitioned(ctx, part); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.Migrate(ctx, part); err == nil {
		t.Error("Migrate on the partitioned table succeeded")
	}
	if err := pgstore.MigratePartitioned(ctx, part); err != nil {
		t.Errorf("MigratePartitioned again: %v", err)
	}
}

// The sweeper drops only tables it can prove are its partitions: the attached partitions of
// idempotency_records whose range has ended, and tables it detached itself (its marker names
// them) but did not drop. Tables whose names merely look like partitions are the user's: an
// old plain table kept under idempotency_records_plain while changing layouts, a backup, an
// archive. Dropping one would delete the user's rows, which no retention rule allows.
func TestPartitionSweeperLeavesUserTables(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t, 4)
	if _, err := pool.Exec(ctx, migrations.PartitionedSchemaSQL()); err != nil {
		t.Fatal(err)
	}
	user := []string{"idempotency_records_plain", "idempotency_records_pre_upgrade_backup", "idempotency_records_payments_archive",
		"idempotency_records_p20200101t0000"} // the last one a partition's name, but never ours
	for _, name := range user {
		if _, err := pool.Exec(ctx, "CREATE TABLE "+name+" AS SELECT g AS id FROM generate_series(1, 203) g"); err != nil {
			t.Fatal(err)
		}
	}
	// A partition of ours that a replica detached and did not drop (it stopped in between):
	// an ended partition, marked, then detached by hand.
	var hourStart time.Time
	if err := pool.QueryRow(ctx, "SELECT date_trunc('hour', now())").Scan(&hourStart); err != nil {
		t.Fatal(err)
	}
	orphan := "idempotency_records_p" + hourStart.Add(-5*time.Hour).UTC().Format("20060102t1504")
	if _, err := pool.Exec(ctx, "CREATE TABLE "+orphan+" (LIKE idempotency_records)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ALTER TABLE idempotency_records ATTACH PARTITION "+orphan+" FOR VALUES FROM ('"+
		hourStart.Add(-5*time.Hour).UTC().Format(time.RFC3339)+"') TO ('"+hourStart.Add(-4*time.Hour).UTC().Format(time.RFC3339)+"')"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, pgstore.MarkPartitionForTest(orphan)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ALTER TABLE idempotency_records DETACH PARTITION "+orphan); err != nil {
		t.Fatal(err)
	}
	// A user table renamed from one of our detached partitions: the marker names the old name.
	renamed := "idempotency_records_p" + hourStart.Add(-7*time.Hour).UTC().Format("20060102t1504")
	if _, err := pool.Exec(ctx, "CREATE TABLE "+renamed+" (LIKE idempotency_records)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, pgstore.MarkPartitionForTest(renamed)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ALTER TABLE "+renamed+" RENAME TO idempotency_records_kept"); err != nil {
		t.Fatal(err)
	}

	for range 2 {
		if _, err := (&pgstore.PartitionSweeper{Pool: pool, Width: time.Hour, Ahead: 3 * time.Hour}).SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range append(user, "idempotency_records_kept") {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+name).Scan(&n); err != nil {
			t.Errorf("%s after a sweep: %v", name, err)
			continue
		}
		if want := 203; name == "idempotency_records_kept" {
			want = 0
			if n != want {
				t.Errorf("%s has %d rows, want %d", name, n, want)
			}
		} else if n != want {
			t.Errorf("%s has %d rows, want %d", name, n, want)
		}
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", orphan).Scan(&exists); err != nil || exists {
		t.Errorf("the detached partition of ours %s still exists (%v): the sweeper must finish its drop", orphan, err)
	}
}
