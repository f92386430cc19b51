package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 7 item 7: an expired record counts as absent even while its row exists, decided by the
// database clock; the same key then starts a new request (no 422 for another body).
func TestExpiredRecordIsAbsent(t *testing.T) {
	for _, mode := range []Mode{Atomic, Lease} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newEnv(t, nil)
			op := payOp()
			if mode == Lease {
				op = leaseOp()
			}
			op.Retention = time.Second
			h := e.atomicHandler(op)
			if mode == Lease {
				h = e.leaseHandler(op, &provider{})
			}
			if w := serve(h, req("t1", key1, body100)); w.Code != 201 {
				t.Fatal(w.Code)
			}
			if w := serve(h, req("t1", key1, body100)); w.Header().Get(HeaderReplayed) != "true" {
				t.Fatal("no replay within retention")
			}
			time.Sleep(1200 * time.Millisecond)
			w := serve(h, req("t1", key1, `{"amount":300}`))
			if w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
				t.Fatalf("after retention: %d %s", w.Code, w.Body)
			}
			if e.payments("t1") != 2 {
				t.Fatalf("payments %d", e.payments("t1"))
			}
			if w := serve(h, req("t1", key1, `{"amount":300}`)); w.Header().Get(HeaderReplayed) != "true" {
				t.Fatal("the new record must replay")
			}
		})
	}
}

// The sweeper deletes expired rows only, in batches, and several sweepers may run at once.
func TestSweeper(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	// 230 expired rows and 20 live ones, written directly.
	_, err := e.pool.Exec(ctx, `INSERT INTO idempotency_records
		(scope, key, operation, fingerprint, fingerprint_version, state, fencing_token, created_at, expires_at)
		SELECT 't1', 'key-' || g, 'op', '\x00', 1, 'completed', 1, now(),
		       CASE WHEN g <= 230 THEN now() - interval '1 second' ELSE now() + interval '1 hour' END
		FROM generate_series(1, 250) g`)
	if err != nil {
		t.Fatal(err)
	}
	obs := &recordingObserver{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &Sweeper{Pool: e.pool, BatchSize: 25, Pause: time.Millisecond, Observer: obs}
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
	var left int
	e.pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_records").Scan(&left)
	if total != 230 || left != 20 || obs.swept != 230 {
		t.Fatalf("deleted %d (observed %d), left %d; want 230 and 20", total, obs.swept, left)
	}
	portable := &Sweeper{Pool: e.pool, Portable: true}
	if n, err := portable.SweepOnce(ctx); err != nil || n != 0 {
		t.Fatalf("portable sweep: %d %v", n, err)
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
			errs <- Migrate(context.Background(), e.pool)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var versions int
	e.pool.QueryRow(context.Background(), "SELECT count(*) FROM idemgen_schema_versions").Scan(&versions)
	if versions != 1 {
		t.Fatalf("versions = %d", versions)
	}
}

// Several replicas migrating a fresh database at the same instant.
func TestMigrateFreshConcurrent(t *testing.T) {
	e := newEnvNoMigrate(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- Migrate(context.Background(), e)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestSchemaSQL(t *testing.T) {
	s := SchemaSQL()
	for _, want := range []string{"CREATE TABLE IF NOT EXISTS idempotency_records", "PRIMARY KEY (scope, key)", "idempotency_records_expires_at_idx"} {
		if !strings.Contains(s, want) {
			t.Errorf("SchemaSQL lacks %q", want)
		}
	}
}

// key.required: false with no key runs the handler in a plain transaction, with no record.
func TestOptionalKeyRunsUnguarded(t *testing.T) {
	e := newEnv(t, nil)
	op := payOp()
	op.Key.Required = false
	h := e.atomicHandler(op)
	for i := range 2 {
		if w := serve(h, req("t1", "", body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
			t.Fatalf("%d: %d", i, w.Code)
		}
	}
	if w := serve(h, req("t1", "", body100, "X-Fail", "500")); w.Code != 500 {
		t.Fatal(w.Code)
	}
	var records int
	e.pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_records").Scan(&records)
	if e.payments("t1") != 2 || records != 0 {
		t.Fatalf("payments %d records %d", e.payments("t1"), records)
	}
	lop := leaseOp()
	lop.Key.Required = false
	if w := serve(e.leaseHandler(lop, &provider{}), req("t1", "", body100)); w.Code != 201 {
		t.Fatalf("lease unguarded: %d %s", w.Code, w.Body)
	}
}

// The goose copy of each migration must say exactly what the golang-migrate files say.
func TestGooseMigrationsMatch(t *testing.T) {
	for _, m := range mustMigrations(t) {
		base := strings.TrimSuffix(m.name, ".up.sql")
		up, err1 := os.ReadFile(filepath.Join("migrations", base+".up.sql"))
		down, err2 := os.ReadFile(filepath.Join("migrations", base+".down.sql"))
		goose, err3 := os.ReadFile(filepath.Join("migrations", "goose", base+".sql"))
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		want := "-- +goose Up\n" + string(up) + "\n-- +goose Down\n" + string(down)
		if string(goose) != want {
			t.Errorf("migrations/goose/%s.sql differs from the up and down files; regenerate it", base)
		}
	}
}

func mustMigrations(t *testing.T) []migration {
	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 {
		t.Fatalf("migrations: %v (%d)", err, len(ms))
	}
	return ms
}
