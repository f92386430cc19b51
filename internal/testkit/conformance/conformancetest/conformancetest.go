// Package conformancetest runs the request-sequence cases against a service that implements the
// conformance API (testdata/specs/conformance.yaml): idemgen's own conformance service and the
// example services of examples/ (oapi-codegen, ogen, chi, echo, gin, fiber), each on a fresh database
// of the test server (internal/testkit/pgtest) and on the idempotency store the test chooses (a
// StoreFactory; PGStore by default).
package conformancetest

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/cases"
	"github.com/idemgen/idemgen/internal/conform"
	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// EnvCases names a folder of extra cases (same format) that Run runs too; a relative path is
// taken from the repository root, where `make test` runs.
const EnvCases = "IDEMGEN_CASES"

// MinPoolSize is the least connection pool a service gets. A parallel step needs about one
// connection per copy (in atomic mode every copy that is still executing holds one), so the
// pool is at least twice the largest parallel step of the cases loaded, leaving room for the
// requests of the next step while the last copies release theirs.
const MinPoolSize = 40

// Env is what a service under test is built on.
type Env struct {
	// DB is a fresh database of the test server, closed when the test ends, with the
	// idempotency store's table (pgstore.Migrate) and the business tables
	// (conformance.Migrate). The business rows are written and counted here, whatever the
	// store.
	DB *pgxpool.Pool
	// Store is the idempotency store the test chose (its StoreFactory's, over DB). A service
	// under test keeps its records there and nowhere else.
	Store store.Transactional[pgstore.DBTX]
	// Provider is the fake payment provider; the effects oracles count its charges.
	Provider *conformance.Provider
	// Logger sends the runtime's logs to the test log (Logger).
	Logger *slog.Logger
}

// StoreFactory makes the idempotency store of one test over db, whose pgstore table exists.
// It may register cleanups on t and fail it.
type StoreFactory func(t testing.TB, db *pgxpool.Pool) store.Transactional[pgstore.DBTX]

// PGStore is the factory of the PostgreSQL store with options o: pgstore.New(db, o).
func PGStore(o pgstore.Options) StoreFactory {
	return func(_ testing.TB, db *pgxpool.Pool) store.Transactional[pgstore.DBTX] {
		return pgstore.New(db, o)
	}
}

// NewEnv makes a fresh database with a pool of at most conns connections, creates the
// idempotency store's and the business tables in it, and makes its store with stores. It
// skips t when there is no test server (internal/testkit/pgtest).
func NewEnv(t testing.TB, conns int32, stores StoreFactory) Env {
	t.Helper()
	db := pgtest.NewPool(t, conns)
	ctx := context.Background()
	migrate := pgstore.Migrate
	if pgtest.IsCitus(t) {
		// make test-citus: the store's tables distributed on the coordinator; the business
		// tables stay the coordinator's own.
		migrate = pgstore.MigrateDistributed
	}
	if err := migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := conformance.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return Env{DB: db, Store: stores(t, db), Provider: conformance.NewProvider(), Logger: Logger(t)}
}

// Service builds the service under test on env.
type Service func(env Env) (http.Handler, error)

// Listen starts the service under test on env with a server of its own (fiber's fasthttp,
// for one) and returns its base URL ("http://127.0.0.1:port"); it stops the server when t ends.
type Listen func(t testing.TB, env Env) (baseURL string, err error)

// Run is RunOn on the PostgreSQL store with its default options.
func Run(t *testing.T, root string, svc Service, skip map[string]string) {
	RunOn(t, root, PGStore(pgstore.Options{}), svc, skip)
}

// RunListening is Run for a service that serves on a server of its own (Listen).
func RunListening(t *testing.T, root string, listen Listen, skip map[string]string) {
	runOn(t, root, PGStore(pgstore.Options{}), listen, skip)
}

// ConformListening is Conform for a service that serves on a server of its own (Listen).
func ConformListening(t *testing.T, root string, listen Listen) {
	conformOn(t, root, PGStore(pgstore.Options{}), listen)
}

// httpTest is the Listen of an http.Handler: an httptest.Server.
func httpTest(svc Service) Listen {
	return func(t testing.TB, env Env) (string, error) {
		h, err := svc(env)
		if err != nil {
			return "", err
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL, nil
	}
}

// RunOn runs every request-sequence case against the service svc builds on a real PostgreSQL
// and the idempotency store stores makes:
// the shared cases (testdata/cases under root, the repository root relative to the test's
// directory), the conformance service's own (labelled "service/"), the tips API's
// (testdata/cases-nulls, labelled "nulls/": a service under test serves
// testdata/specs/nulls.yaml too, see conformance.TipHandlers and TipsHTTP), and the cases in
// $IDEMGEN_CASES. Each case is a subtest named after its file; then all of them run again, last
// first, on the database the first pass filled.
//
// skip names the cases that cannot apply to this service (by subtest name, "018-form-body" or
// "service/905-refund-of-unknown-payment") with the reason, which the skipped subtest reports;
// a name in skip that is no case fails the test, so a renamed case cannot be skipped silently.
func RunOn(t *testing.T, root string, stores StoreFactory, svc Service, skip map[string]string) {
	runOn(t, root, stores, httpTest(svc), skip)
}

func runOn(t *testing.T, root string, stores StoreFactory, listen Listen, skip map[string]string) {
	dirs := []struct{ label, dir string }{
		{"", filepath.Join(root, "testdata", "cases")},
		{"service/", filepath.Join(root, "internal", "testkit", "conformance", "testdata", "cases")},
		// The tips API's (testdata/specs/nulls.yaml): null is not absent through this stack.
		{"nulls/", filepath.Join(root, "testdata", "cases-nulls")},
	}
	if extra := os.Getenv(EnvCases); extra != "" {
		if !filepath.IsAbs(extra) {
			extra = filepath.Join(root, extra)
		}
		dirs = append(dirs, struct{ label, dir string }{EnvCases + "/", extra})
	}
	type labelled struct {
		name string
		c    *cases.Case
	}
	var all []labelled
	poolSize := int32(MinPoolSize)
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
	known := map[string]bool{}
	for _, l := range all {
		known[l.name] = true
	}
	for name := range skip {
		if !known[name] {
			t.Errorf("skip names %q, which is no case", name)
		}
	}

	ctx := context.Background()
	base, err := listen(t, NewEnv(t, poolSize, stores))
	if err != nil {
		t.Fatal(err)
	}
	runner := &cases.Runner{BaseURL: base}

	for _, l := range all {
		t.Run(l.name, func(t *testing.T) {
			if why, ok := skip[l.name]; ok {
				t.Skip(why)
			}
			if err := runner.Run(ctx, l.c); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Cases must not depend on their order or on an empty database: run them all again, last
	// first, on the database the first pass filled (the runner gives every run fresh tenants).
	t.Run("again-in-reverse-on-used-database", func(t *testing.T) {
		for i := len(all) - 1; i >= 0; i-- {
			if _, ok := skip[all[i].name]; ok {
				continue
			}
			if err := runner.Run(ctx, all[i].c); err != nil {
				t.Error(err)
			}
		}
	})
}

// Conform is ConformOn on the PostgreSQL store with its default options.
func Conform(t *testing.T, root string, svc Service) {
	ConformOn(t, root, PGStore(pgstore.Options{}), svc)
}

// ConformOn runs idemgen conform against the service svc builds on a fresh database and the
// idempotency store stores makes, as a user
// runs it against theirs: every check of conformance.yaml's operations (under root, the
// repository root relative to the test's directory), with two tenants, the service's test
// knobs (X-Test-Fail: 500, X-Test-Delay), an effects oracle counting both tenants' rows and
// provider calls, and the fault checks in short mode. The service is judged by the spec as
// `idemgen spec` annotates it, so that what idemgen declares for its clients (the problems it
// answers, Idempotency-Key-Expires on every stored answer and replay) is checked too. A failed
// check fails the test, with the report.
func ConformOn(t *testing.T, root string, stores StoreFactory, svc Service) {
	conformOn(t, root, stores, httpTest(svc))
}

// ConformSpec is Conform judged by another spec of the same API than conformance.yaml: the one
// a code-first service exports from its code (Huma's), with the config it is generated with
// (opts, paths relative to the test's directory). Its operations must be conformance.yaml's.
func ConformSpec(t *testing.T, root string, opts spec.Options, svc Service) {
	conformSpecOn(t, opts, PGStore(pgstore.Options{}), httpTest(svc))
}

func conformOn(t *testing.T, root string, stores StoreFactory, listen Listen) {
	conformSpecOn(t, spec.Options{Path: filepath.Join(root, "testdata", "specs", "conformance.yaml")}, stores, listen)
}

func conformSpecOn(t *testing.T, opts spec.Options, stores StoreFactory, listen Listen) {
	res := Annotated(t, opts)
	ctx := context.Background()
	env := NewEnv(t, MinPoolSize, stores)
	base, err := listen(t, env)
	if err != nil {
		t.Fatal(err)
	}
	tenants := []string{"conform-a", "conform-b"}
	effects := func(ctx context.Context) (int64, error) {
		var n int64
		err := env.DB.QueryRow(ctx, `SELECT (SELECT count(*) FROM payments WHERE tenant = ANY($1)) + (SELECT count(*) FROM refunds WHERE tenant = ANY($1))
			+ (SELECT count(*) FROM orders WHERE tenant = ANY($1)) + (SELECT count(*) FROM transfers WHERE tenant = ANY($1))
			+ (SELECT count(*) FROM charges WHERE tenant = ANY($1)) + (SELECT count(*) FROM provider_charges WHERE tenant = ANY($1))`, tenants).Scan(&n)
		for _, tn := range tenants {
			n += env.Provider.Calls(tn)
		}
		return n, err
	}
	rep, err := conform.Run(ctx, res.Doc, conform.Options{
		BaseURL:      base,
		Header:       http.Header{"Authorization": {"Bearer " + tenants[0]}},
		TenantHeader: http.Header{"Authorization": {"Bearer " + tenants[1]}},
		FailHeader:   http.Header{"X-Test-Fail": {"500"}},
		DelayHeader:  http.Header{"X-Test-Delay": {"300ms"}},
		Effects:      effects,
		Faults:       true,
		Short:        true,
		Seed:         24,
	})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	conform.WriteText(&text, rep)
	if rep.Failed() {
		t.Fatalf("idemgen conform failed:\n%s", text.String())
	}
	t.Log(text.String())
}

// Annotated loads the spec of opts as `idemgen spec` writes it (the key's rules, the answers the
// runtime gives, Idempotency-Key-Expires on stored answers), for idemgen conform to judge a
// service by what idemgen declares to its clients. The spec must have no relative $refs to
// other files: the annotated copy is written to a temporary folder.
func Annotated(t testing.TB, opts spec.Options) *spec.Result {
	t.Helper()
	path := opts.Path
	res, err := spec.Load(context.Background(), opts)
	if err != nil || res.Diags.HasErrors() {
		t.Fatalf("%s: %v %v", path, err, res.Diags.Sorted())
	}
	out, err := spec.Annotate(res, "yaml")
	if err != nil {
		t.Fatalf("annotate %s: %v", path, err)
	}
	name := filepath.Join(t.TempDir(), "annotated.yaml")
	if err := os.WriteFile(name, out, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = spec.Load(context.Background(), spec.Options{Path: name})
	if err != nil || res.Diags.HasErrors() {
		t.Fatalf("the annotated %s: %v %v", path, err, res.Diags.Sorted())
	}
	return res
}

// Logger sends a runtime's logs to the test log, shown when a test fails or with -v.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
