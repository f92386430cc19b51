package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/pgstore/migrations"
)

// docs/design.md section 4, Clocks and Retention: an expired record of an operation that keeps no
// tombstone (tombstone: 0s) counts as absent even while its row exists, decided by the database
// clock; the same key then starts a new request (no 422 for another body), under every claim
// strategy and in lease mode. TestExpiredRecordIsRemembered is the same with a tombstone.
func TestExpiredRecordIsAbsent(t *testing.T) {
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
			e := newEnv(t, v.tweak)
			op := payOp()
			if v.lease {
				op = leaseOp()
			}
			op.Retention, op.Tombstone = time.Second, runtime.NoTombstone
			h := e.atomicHandler(op)
			if v.lease {
				h = e.leaseHandler(op, &provider{})
			}
			if w := serve(h, req("t1", key1, body100)); w.Code != 201 {
				t.Fatal(w.Code)
			}
			if w := serve(h, req("t1", key1, body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
				t.Fatal("no replay within retention")
			}
			eventually(t, "the record to expire", func() bool {
				_, found := e.leaseRecord(key1)
				return !found
			})
			if e.records() != 1 {
				t.Fatal("the expired row must still be there (nothing swept it)")
			}
			w := serve(h, req("t1", key1, `{"amount":300}`))
			if w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" {
				t.Fatalf("after retention: %d %s", w.Code, w.Body)
			}
			if e.payments("t1") != 2 {
				t.Fatalf("payments %d", e.payments("t1"))
			}
			if w := serve(h, req("t1", key1, `{"amount":300}`)); w.Header().Get(runtime.HeaderReplayed) != "true" {
				t.Fatal("the new record must replay")
			}
			if w := serve(h, req("t1", key1, body100)); w.Code != 422 {
				t.Fatalf("the old body against the new record: %d, want 422", w.Code)
			}
		})
	}
}

// The sweeper deletes expired rows only, in batches, and several sweepers may run at once.
func TestSweeper(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	// 230 expired rows and 20 live ones, written directly.
	for g := 1; g <= 250; g++ {
		expires := time.Hour
		if g <= 230 {
			expires = -time.Second
		}
		if err := e.insertRecord(ctx, testRecord{scope: "t1", key: fmt.Sprintf("key-%d", g), operation: "op",
			status: 201, token: 1, expiresIn: expires}); err != nil {
			t.Fatal(err)
		}
	}
	obs := &recordingObserver{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &pgstore.Sweeper{Pool: e.pool, BatchSize: 25, Pause: time.Millisecond, Observer: obs}
			n, err := s.SweepOnce(ctx)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if left := e.records(); total != 230 || left != 20 || obs.swept != 230 {
		t.Fatalf("deleted %d (observed %d), left %d; want 230 and 20", total, obs.swept, left)
	}
	portable := &pgstore.Sweeper{Pool: e.pool, Portable: true}
	if n, err := portable.SweepOnce(ctx); err != nil || n != 0 {
		t.Fatalf("portable sweep: %d %v", n, err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE idempotency_records SET expires_at = now() - interval '1 second' WHERE key_id = $1`,
		keyID("t1", "key-250")); err != nil {
		t.Fatal(err)
	}
	if n, err := portable.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("portable sweep of one expired row: %d %v", n, err)
	}
	if _, err := (&pgstore.Sweeper{}).SweepOnce(ctx); err == nil {
		t.Error("a Sweeper without a Pool must fail")
	}
}

// Sweeper.Run sweeps at once, then every Interval, until its context ends.
func TestSweeperRun(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	expire := func(key string) {
		if err := e.insertRecord(context.Background(), testRecord{scope: "t1", key: key, operation: "op",
			status: 201, token: 1, expiresIn: -time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	expire("first")
	done := make(chan error)
	go func() { done <- (&pgstore.Sweeper{Pool: e.pool, Interval: 20 * time.Millisecond}).Run(ctx) }()
	eventually(t, "the first sweep", func() bool { return e.records() == 0 })
	expire("second")
	eventually(t, "a later sweep", func() bool { return e.records() == 0 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
}

// Migrate is safe on every start and from several replicas at once.
func TestMigrateConcurrent(t *testing.T) {
	e := newEnv(t, nil) // migrated once already
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- migrate(context.Background(), e.pool)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ms, err := migrations.Up()
	if partitioned() {
		ms, err = migrations.UpPartitioned()
	}
	if err != nil {
		t.Fatal(err)
	}
	var versions int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM idemgen_schema_versions").Scan(&versions); err != nil || versions != len(ms) {
		t.Fatalf("versions = %d (%v), want %d", versions, err, len(ms))
	}
}

// Several replicas migrating a fresh database at the same instant.
func TestMigrateFreshConcurrent(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- migrate(context.Background(), pool)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_records").Scan(&n); err != nil {
		t.Fatalf("the table is not there: %v", err)
	}
}

func TestSchemaSQL(t *testing.T) {
	s := migrations.SchemaSQL()
	for _, want := range []string{"-- 0001_idempotency_records.up.sql\n", "CREATE TABLE IF NOT EXISTS idempotency_records",
		"PRIMARY KEY (key_id)", "idempotency_records_expires_at_idx"} {
		if !strings.Contains(s, want) {
			t.Errorf("SchemaSQL lacks %q", want)
		}
	}
	// What SchemaSQL prints creates the schema Migrate creates: a store works on it.
	pool, err := pgxpool.New(context.Background(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), s); err != nil {
		t.Fatalf("SchemaSQL does not run: %v", err)
	}
	st := pgstore.New(pool, pgstore.Options{})
	rt, err := runtime.New(runtime.Config{Store: st, SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, pool: pool, st: st, rt: rt, gates: map[string]*gate{}}
	h := runtime.LeaseHandler(rt, leaseOp(), runtime.BindLease(decodePay, func(context.Context, *runtime.Lease, *payReq) (runtime.CompleteFunc[pgstore.DBTX], error) {
		return func(context.Context, pgstore.DBTX) (runtime.Response, error) { return created("ok"), nil }, nil
	}))
	for i := range 2 {
		if w := serve(h, req("", key1, body100)); w.Code != 201 || (i == 1) != (w.Header().Get(runtime.HeaderReplayed) == "true") {
			t.Fatalf("request %d on the SchemaSQL schema: %d %s", i, w.Code, w.Body)
		}
	}
	if e.records() != 1 {
		t.Error("no record")
	}
}

// The goose copy of each migration must say exactly what the golang-migrate files say.
func TestGooseMigrationsMatch(t *testing.T) {
	plain, err := migrations.Up()
	if err != nil || len(plain) == 0 {
		t.Fatalf("migrations: %v (%d)", err, len(plain))
	}
	partitioned, err := migrations.UpPartitioned()
	if err != nil || len(partitioned) == 0 {
		t.Fatalf("partitioned migrations: %v (%d)", err, len(partitioned))
	}
	for _, m := range append(plain, partitioned...) {
		base := strings.TrimSuffix(m.Name, ".up.sql")
		up, err1 := os.ReadFile(filepath.Join("migrations", filepath.FromSlash(base)+".up.sql"))
		down, err2 := os.ReadFile(filepath.Join("migrations", filepath.FromSlash(base)+".down.sql"))
		goose, err3 := os.ReadFile(filepath.Join("migrations", "goose", filepath.FromSlash(base)+".sql"))
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		if string(up) != m.SQL {
			t.Errorf("%s: the embedded SQL differs from the file", m.Name)
		}
		// goose splits statements on semicolons: a DO block or a function's body goes between
		// StatementBegin and StatementEnd.
		gooseUp := strings.ReplaceAll(string(up), "\nDO $$\n", "\n-- +goose StatementBegin\nDO $$\n")
		gooseUp = strings.ReplaceAll(gooseUp, "\nCREATE OR REPLACE FUNCTION ", "\n-- +goose StatementBegin\nCREATE OR REPLACE FUNCTION ")
		gooseUp = strings.ReplaceAll(gooseUp, "\n$$;\n", "\n$$;\n-- +goose StatementEnd\n")
		want := "-- +goose Up\n" + gooseUp + "\n-- +goose Down\n" + string(down)
		if string(goose) != want {
			t.Errorf("migrations/goose/%s.sql differs from the up and down files; regenerate it", base)
		}
	}
}

// key.required: false with no key runs the handler in a plain transaction, with no record, in
// both modes.
func TestOptionalKeyRunsUnguarded(t *testing.T) {
	e := newEnv(t, nil)
	op := payOp()
	op.Key.Required = false
	h := e.atomicHandler(op)
	for i := range 2 {
		if w := serve(h, req("t1", "", body100)); w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" {
			t.Fatalf("%d: %d", i, w.Code)
		}
	}
	if w := serve(h, req("t1", "", body100, "X-Fail", "500")); w.Code != 500 {
		t.Fatal(w.Code)
	}
	if e.payments("t1") != 2 || e.records() != 0 {
		t.Fatalf("payments %d records %d", e.payments("t1"), e.records())
	}
	lop := leaseOp()
	lop.Key.Required = false
	if w := serve(e.leaseHandler(lop, &provider{}), req("t1", "", body100)); w.Code != 201 {
		t.Fatalf("lease unguarded: %d %s", w.Code, w.Body)
	}
	if e.payments("t1") != 3 || e.records() != 0 {
		t.Fatalf("payments %d records %d", e.payments("t1"), e.records())
	}
}
