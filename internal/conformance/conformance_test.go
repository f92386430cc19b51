package conformance

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/cases"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// EnvCases names a folder of extra cases (same format) that TestCases runs too; a relative path
// is taken from the repository root, where `make test` runs.
const EnvCases = "IDEMGEN_CASES"

// minPoolSize is the least connection pool the service gets. A parallel step needs about one
// connection per copy (in atomic mode every copy that is still executing holds one), so the
// pool is at least twice the largest parallel step of the cases loaded, leaving room for the
// requests of the next step while the last copies release theirs.
const minPoolSize = 40

// TestCases runs every request-sequence case against the conformance service on a real
// PostgreSQL: the shared cases (testdata/cases), the service's own (testdata/cases here), and
// the cases in $IDEMGEN_CASES. Each case is a subtest named after its file.
func TestCases(t *testing.T) {
	runCases(t, nil)
}

// labelled is a case with the name of its subtest.
type labelled struct {
	name string
	c    *cases.Case
}

// loadCases loads every case TestCases runs, and the connection pool they need.
func loadCases(t *testing.T) ([]labelled, int32) {
	dirs := []struct{ label, dir string }{
		{"", "../../testdata/cases"},
		{"service/", "testdata/cases"},
	}
	if extra := os.Getenv(EnvCases); extra != "" {
		if !filepath.IsAbs(extra) {
			extra = filepath.Join("..", "..", extra)
		}
		dirs = append(dirs, struct{ label, dir string }{EnvCases + "/", extra})
	}
	var all []labelled
	poolSize := int32(minPoolSize)
	for _, d := range dirs {
		list, err := cases.LoadDir(d.dir)
		if err != nil {
			t.Errorf("%s: %v", d.dir, err)
			continue
		}
		for _, c := range list {
			all = append(all, labelled{d.label + c.Name, c})
			for _, s := range c.Steps {
				poolSize = max(poolSize, int32(2*s.Parallel))
			}
		}
	}
	return all, poolSize
}

// runCases runs every case against the service on a fresh database, with the idempotency store
// newStore makes over its pool (nil: pgstore's).
func runCases(t *testing.T, newStore func(t *testing.T, pool *pgxpool.Pool) store.Transactional[pgstore.DBTX]) {
	all, poolSize := loadCases(t)
	pool := pgtest.NewPool(t, poolSize)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	o := Options{Logger: testLogger(t)}
	if newStore != nil {
		o.Store = newStore(t, pool)
	}
	h, err := NewHandlerWith(pool, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	runner := &cases.Runner{BaseURL: srv.URL, Client: srv.Client()}

	for _, l := range all {
		t.Run(l.name, func(t *testing.T) {
			if err := runner.Run(ctx, l.c); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Cases must not depend on their order or on an empty database: run them all again, last
	// first, on the database the first pass filled (the runner gives every run fresh tenants).
	t.Run("again-in-reverse-on-used-database", func(t *testing.T) {
		for i := len(all) - 1; i >= 0; i-- {
			if err := runner.Run(ctx, all[i].c); err != nil {
				t.Error(err)
			}
		}
	})
}

// testLogger sends the runtime's logs to the test log, shown when a test fails or with -v.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
