package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// The runtime on PostgreSQL: handlers built with runtime.AtomicHandler and LeaseHandler, as
// generated code builds them, over pgstore, on a database of each test's own
// (internal/testkit/pgtest), with a pool whose round trips are counted twice: by a pgx tracer and by
// the writes to the server's socket.

// roundTrips counts what a pgx connection sends to the server: one per Query/Exec/QueryRow and
// one per batch (a batch is one pipeline with one Sync, so one network round trip).
type roundTrips struct {
	n atomic.Int64
	// writes counts flushes to the server's socket: each pipeline, prepare or query is one, so
	// it also sees the round trips pgx makes without tracing them (re-prepares, deallocations).
	writes atomic.Int64
	mu     sync.Mutex
	log    []string
	// ownCharges and refills count the counts of stored bytes sent in commit pipelines: those
	// that count a response's own bytes, and those that only count a reservation ahead (zero
	// bytes of their own).
	ownCharges, refills atomic.Int64
	// usage counts the statements that read or write the tenants' counters
	// (idempotency_scope_usage).
	usage atomic.Int64
}

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	if strings.Contains(d.SQL, "idempotency_scope_usage") {
		c.usage.Add(1)
	}
	c.note(d.SQL)
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	c.note(fmt.Sprintf("batch of %d", d.Batch.Len()))
	return ctx
}
func (c *roundTrips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if strings.Contains(d.SQL, "idempotency_scope_usage") {
		c.usage.Add(1)
	}
	if strings.Contains(d.SQL, "set_config('idemgen.body_kept'") && len(d.Args) > 2 {
		if n, ok := d.Args[2].(int64); ok && n == 0 {
			c.refills.Add(1)
		} else {
			c.ownCharges.Add(1)
		}
	}
}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *roundTrips) note(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(s) > 60 {
		s = s[:60]
	}
	c.log = append(c.log, strings.Join(strings.Fields(s), " "))
}

// count runs f and returns how many round trips it made by the tracer's count and by socket
// writes, with the traced statements' start for failure messages.
func (c *roundTrips) count(f func()) (traced, writes int64, log []string) {
	c.mu.Lock()
	c.log = nil
	c.mu.Unlock()
	before, wbefore := c.n.Load(), c.writes.Load()
	f()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n.Load() - before, c.writes.Load() - wbefore, append([]string(nil), c.log...)
}

// countingConn counts writes to the server.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// env is one test's database, store, runtime and business table.
type env struct {
	t    testing.TB
	pool *pgxpool.Pool
	st   *pgstore.Store
	rt   *runtime.Runtime
	rtt  *roundTrips
	obs  *recordingObserver
	url  string

	mu    sync.Mutex
	gates map[string]*gate
}

// setup is what a test may change before the runtime is built.
type setup struct {
	cfg   runtime.Config
	store pgstore.Options
	// maxConns is the pool's size; default 60.
	maxConns int32
	// open builds the store with pgstore.Open (which checks the deployment) instead of New.
	open bool
}

func newEnv(t *testing.T, tweak func(*setup)) *env {
	t.Helper()
	return newEnvAt(t, pgtest.NewDatabase(t), tweak)
}

// newEnvB is newEnv for benchmarks.
func newEnvB(b *testing.B, tweak func(*setup)) *env {
	b.Helper()
	// Benchmarks measure the store, not its per-tenant caps: one tenant makes every new key.
	return newEnvAt(b, pgtest.NewDatabase(b), func(s *setup) {
		s.store.Limits.Records = -1
		if tweak != nil {
			tweak(s)
		}
	})
}

// concurrently runs f(0) … f(n-1) at once and returns their results in order.
func concurrently(n int, f func(i int) int) []int {
	out := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = f(i)
		}()
	}
	wg.Wait()
	return out
}

// steadyCap keeps the default records cap but counts it per day rather than per minute: tests
// that count round trips in the steady state would otherwise meet, when they run across a
// minute's end, the round trip that counts a tenant's claims ahead in the next minute.
func steadyCap(c *setup) { c.store.Limits.RecordsInterval = 24 * time.Hour }

// withStrategy sets the claim strategy.
func withStrategy(s pgstore.ClaimStrategy) func(*setup) {
	return func(c *setup) { c.store.Claim = s }
}

func newEnvAt(t testing.TB, url string, tweak func(*setup)) *env {
	t.Helper()
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	rtt := &roundTrips{}
	pcfg.ConnConfig.Tracer = rtt
	pcfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, writes: &rtt.writes}, nil
	}
	s := setup{cfg: runtime.Config{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, maxConns: 60}
	if tweak != nil {
		tweak(&s)
	}
	if _, ok := s.store.Claim.(pgstore.ClaimPipelined); ok && s.store.Limits.Records == 0 {
		// ClaimPipelined claims as ClaimReadFirst under a records cap (the default): its tests
		// measure it without one.
		s.store.Limits.Records = -1
	}
	if partitioned() {
		if s.store.NoAdvisoryLocks {
			t.Skip("the partitioned layout needs advisory locks (IDEMGEN_PG_LAYOUT=partitioned)")
		}
		if _, ok := s.store.Claim.(pgstore.ClaimPipelined); ok {
			t.Skip("ClaimPipelined claims as ClaimReadFirst on the partitioned layout (IDEMGEN_PG_LAYOUT=partitioned)")
		}
		s.store.Partitioned = true
	}
	pcfg.MaxConns = s.maxConns
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS payments (
		id bigserial PRIMARY KEY, scope text NOT NULL, amount bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	obs := &recordingObserver{}
	if s.cfg.Scope == nil && !s.cfg.SingleTenant {
		s.cfg.Scope = bearerScope
	}
	if s.cfg.Observer == nil {
		s.cfg.Observer = obs
	}
	var st *pgstore.Store
	if s.open {
		if st, err = pgstore.Open(ctx, pool, s.store); err != nil {
			t.Fatal(err)
		}
	} else {
		st = pgstore.New(pool, s.store)
	}
	s.cfg.Store = st
	rt, err := runtime.New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, pool: pool, st: st, rt: rt, rtt: rtt, obs: obs, url: url, gates: map[string]*gate{}}
}

// envLayout names the environment variable that runs this package's tests on the layout
// partitioned by expiry: IDEMGEN_PG_LAYOUT=partitioned (scripts/test.sh runs the suite on both).
const envLayout = "IDEMGEN_PG_LAYOUT"

// partitioned reports whether the tests run on the layout partitioned by expiry.
func partitioned() bool { return os.Getenv(envLayout) == "partitioned" }

// migrate creates the schema of the layout under test: distributed on a Citus coordinator
// (make test-citus).
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if citus(pool) {
		return pgstore.MigrateDistributed(ctx, pool)
	}
	if partitioned() {
		return pgstore.MigratePartitioned(ctx, pool)
	}
	return pgstore.Migrate(ctx, pool)
}

// citus reports whether pool's database has the citus extension.
func citus(pool *pgxpool.Pool) bool {
	var ok bool
	err := pool.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&ok)
	return err == nil && ok
}

func bearerScope(r *http.Request) (string, error) {
	tenant, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tenant == "" {
		return "", errors.New("no bearer token")
	}
	return tenant, nil
}

// payments counts the business rows of a tenant.
func (e *env) payments(scope string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM payments WHERE scope = $1", scope).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// records counts the idempotency records.
func (e *env) records() int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_records").Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// payOp is an atomic-mode operation with the defaults of docs/design.md section 2.
func payOp() *runtime.Operation {
	return &runtime.Operation{
		ID: "createPayment", Method: "POST", Path: "/v1/payments",
		Key:        runtime.KeyRule{Header: "Idempotency-Key", Required: true},
		Retention:  time.Hour,
		Lease:      time.Second,
		MediaTypes: []string{"application/json"},
	}
}

func leaseOp() *runtime.Operation {
	op := payOp()
	op.ID = "createProviderCharge"
	op.Mode = runtime.ModeLease
	op.Lease = 500 * time.Millisecond
	return op
}

// payReq is the decoded request: {"amount": N}, the tenant from the bearer token, and the
// request's headers, which carry the tests' knobs:
//
//	X-Hold    the handler (after its business write; in lease mode, the call phase after the
//	          provider call) enters the named gate and waits until the test opens it
//	X-Delay   sleeps there (a duration), or until the handler's context ends
//	X-Fail    "panic", "error", or a status the handler answers after its write
//	X-Big     the response body has that many bytes
//	X-Signal  prints IN_HANDLER to stdout there (the crash tests' child)
//	X-Extend  lease mode: the call phase extends its lease to 2s
type payReq struct {
	Amount int64
	Tenant string
	Header http.Header
}

// decodePay plays a generated decoder: it decodes {"amount": N} (a positive integer), frames
// the body as raw bytes, and reads the tenant as the scope function does.
func decodePay(in *gen.Input) (payReq, error) {
	var body struct {
		Amount *int64 `json:"amount"`
	}
	if err := json.Unmarshal(in.Body, &body); err != nil {
		return payReq{}, &gen.BodyError{Reason: err.Error()}
	}
	if body.Amount == nil || *body.Amount <= 0 {
		return payReq{}, &gen.BodyError{At: "/amount", Reason: "amount must be positive"}
	}
	in.RawBody()
	tenant, _ := bearerScope(in.Request)
	return payReq{Amount: *body.Amount, Tenant: tenant, Header: in.Request.Header}, nil
}

const insertPay = "INSERT INTO payments (scope, amount) VALUES ($1, $2)"

// atomicHandler is generated code plus a business handler that writes one payments row.
func (e *env) atomicHandler(op *runtime.Operation) http.Handler {
	return runtime.AtomicHandler(e.rt, op, runtime.BindAtomic(decodePay, func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		var id int64
		if err := db.QueryRow(ctx, insertPay+" RETURNING id", r.Tenant, r.Amount).Scan(&id); err != nil {
			return runtime.Response{}, err
		}
		return e.answer(ctx, r, id)
	}))
}

// handlerWith serves op with fn as the business handler (the decoded request gives it the
// knobs).
func (e *env) handlerWith(op *runtime.Operation, fn func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error)) http.Handler {
	return runtime.AtomicHandler(e.rt, op, runtime.BindAtomic(decodePay, fn))
}

// leaseHandler calls the provider in the call phase (then X-Hold, X-Delay, and X-Fail error or
// panic), then writes one payments row in the completion.
func (e *env) leaseHandler(op *runtime.Operation, p *provider) http.Handler {
	return runtime.LeaseHandler(e.rt, op, runtime.BindLease(decodePay, func(ctx context.Context, l *runtime.Lease, r *payReq) (runtime.CompleteFunc[pgstore.DBTX], error) {
		pk, err := l.ProviderKey(ctx, "charge")
		if err != nil {
			return nil, err
		}
		p.charge(pk)
		if r.Header.Get("X-Extend") != "" {
			if err := l.Extend(ctx, 2*time.Second); err != nil {
				return nil, err
			}
		}
		e.pause(ctx, r)
		switch r.Header.Get("X-Fail") {
		case "error":
			return nil, errors.New("provider said no")
		case "panic":
			panic("call phase panic")
		}
		return func(ctx context.Context, db pgstore.DBTX) (runtime.Response, error) {
			var id int64
			if err := db.QueryRow(ctx, insertPay+" RETURNING id", r.Tenant, r.Amount).Scan(&id); err != nil {
				return runtime.Response{}, err
			}
			done := *r
			done.Header = r.Header.Clone()
			for _, h := range []string{"X-Hold", "X-Delay", "X-Signal"} {
				done.Header.Del(h)
			}
			return e.answer(ctx, &done, id)
		}, nil
	}))
}

// pause is where a handler waits when the request asks it to: it signals the crash test's
// parent, enters its gate, and sleeps.
func (e *env) pause(ctx context.Context, r *payReq) error {
	if r.Header.Get("X-Signal") != "" {
		os.Stdout.WriteString("IN_HANDLER\n")
	}
	if name := r.Header.Get("X-Hold"); name != "" {
		g := e.gate(name)
		g.enter()
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if d, err := time.ParseDuration(r.Header.Get("X-Delay")); err == nil {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (e *env) answer(ctx context.Context, r *payReq, id int64) (runtime.Response, error) {
	if err := e.pause(ctx, r); err != nil {
		return runtime.Response{}, err
	}
	switch f := r.Header.Get("X-Fail"); f {
	case "":
	case "panic":
		panic("test panic")
	case "error":
		return runtime.Response{}, errors.New("test error")
	default:
		status, _ := strconv.Atoi(f)
		return runtime.Response{Status: status, Body: []byte(`{"failed":true}`)}, nil
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Location", fmt.Sprintf("/v1/payments/%d", id))
	h.Set("Set-Cookie", "session=secret")
	h.Set("X-Internal", "not replayed")
	h.Set("Date", "Mon, 30 Nov 2026 10:00:00 GMT")
	body := fmt.Appendf(nil, `{"id":%d,"amount":%d}`, id, r.Amount)
	if n, err := strconv.Atoi(r.Header.Get("X-Big")); err == nil && n > 0 {
		body = []byte(strings.Repeat("x", n))
	}
	return runtime.Response{Status: http.StatusCreated, Header: h, Body: body}, nil
}

// gate lets a test hold handlers at a known point: entered is closed when the first handler
// gets there; release, closed by open, lets every handler at the gate go on.
type gate struct {
	entered, release chan struct{}
	enterOnce        sync.Once
	openOnce         sync.Once
}

func (e *env) gate(name string) *gate {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.gates[name]
	if g == nil {
		g = &gate{entered: make(chan struct{}), release: make(chan struct{})}
		e.gates[name] = g
		e.t.Cleanup(g.open)
	}
	return g
}

func (g *gate) enter() { g.enterOnce.Do(func() { close(g.entered) }) }
func (g *gate) open()  { g.openOnce.Do(func() { close(g.release) }) }

// wait waits until a handler entered the gate.
func (g *gate) wait(t testing.TB) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no handler entered the gate")
	}
}

// req builds a request with the tenant, key and JSON body; extra are header name/value pairs.
func req(tenant, key, body string, extra ...string) *http.Request {
	r := httptest.NewRequest("POST", "/v1/payments", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if tenant != "" {
		r.Header.Set("Authorization", "Bearer "+tenant)
	}
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		r.Header.Add(extra[i], extra[i+1])
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// problemType returns the problem name of a problem+json response ("" when it is not one).
func problemType(t testing.TB, w *httptest.ResponseRecorder) string {
	t.Helper()
	if w.Header().Get("Content-Type") != "application/problem+json" {
		return ""
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body.String(), err)
	}
	if p.Status != w.Code {
		t.Errorf("problem status %d, response status %d", p.Status, w.Code)
	}
	return strings.TrimPrefix(p.Type, runtime.DefaultProblemBase)
}

type responseSummary struct {
	status     int
	replayed   bool
	problem    string
	retryAfter string
	body       string
}

func summarize(t testing.TB, w *httptest.ResponseRecorder) *responseSummary {
	return &responseSummary{status: w.Code, replayed: w.Header().Get(runtime.HeaderReplayed) == "true",
		retryAfter: w.Header().Get("Retry-After"), problem: problemType(t, w), body: w.Body.String()}
}

// recordingObserver counts outcomes.
type recordingObserver struct {
	mu       sync.Mutex
	outcomes map[runtime.Outcome]int
	claims   int
	swept    int64
}

func (o *recordingObserver) Outcome(_ string, _ runtime.Mode, out runtime.Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.outcomes == nil {
		o.outcomes = map[runtime.Outcome]int{}
	}
	o.outcomes[out]++
}

func (o *recordingObserver) ClaimLatency(string, runtime.Mode, time.Duration) {
	o.mu.Lock()
	o.claims++
	o.mu.Unlock()
}

func (o *recordingObserver) Swept(n int64) {
	o.mu.Lock()
	o.swept += n
	o.mu.Unlock()
}

func (o *recordingObserver) get(out runtime.Outcome) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.outcomes[out]
}

func (o *recordingObserver) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.outcomes)
}

const (
	key1    = "k-test-0001-aaaaaaaaaaaa"
	body100 = `{"amount":100}`
)

// strategies are the three claim strategies, by name.
var strategies = []struct {
	name     string
	strategy pgstore.ClaimStrategy
}{
	{"WithStatement", pgstore.ClaimWithStatement{}},
	{"ReadFirst", pgstore.ClaimReadFirst{}},
	{"Pipelined", pgstore.ClaimPipelined{}},
}

// forClaimLocks runs test under each claim strategy with advisory claim locks, and with the
// portable path (NoAdvisoryLocks).
func forClaimLocks(t *testing.T, test func(t *testing.T, tweak func(*setup))) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) { test(t, withStrategy(s.strategy)) })
	}
	t.Run("portable", func(t *testing.T) { test(t, func(c *setup) { c.store.NoAdvisoryLocks = true }) })
}

// eventually waits until cond holds (polling every few milliseconds), or fails the test.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// advisoryLockHeld reports whether some session holds a claim's advisory lock: the claim of a
// ClaimWithStatement request went out (with a statement, or alone from its timer).
func (e *env) advisoryLockHeld() bool {
	var held bool
	if err := e.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`).Scan(&held); err != nil {
		e.t.Fatal(err)
	}
	return held
}

// keyID is the primary key of the record of (scope, key).
func keyID(scope, key string) [16]byte {
	_, k := pgstore.Digest(store.ID{Scope: scope, Key: key})
	return k
}

// testRecord is a record a test writes directly into the table.
type testRecord struct {
	scope, key, operation string
	fingerprint           []byte
	version               int16
	// status 0 is a running record.
	status int16
	token  int64
	body   string
	// expiresIn is added to now() for expires_at (negative: already expired).
	expiresIn time.Duration
}

// insertRecord writes r with the table's columns, as the store would.
func (e *env) insertRecord(ctx context.Context, r testRecord) error {
	scopeID, key := pgstore.Digest(store.ID{Scope: r.scope, Key: r.key})
	if r.fingerprint == nil {
		r.fingerprint = []byte{0}
	}
	if r.version == 0 {
		r.version = 1
	}
	_, err := e.pool.Exec(ctx, `INSERT INTO idempotency_records
		(scope_id, key_id, created_at, expires_at, locked_until, fencing_token, fingerprint, fingerprint_version,
		 response_status, body_omitted, operation, response_headers, response_body)
		VALUES ($1, $2, now(), now() + $3::bigint * interval '1 microsecond', now() + interval '1 hour', $4, $5, $6,
		        $7, false, $8, '\x', convert_to($9, 'UTF8'))`,
		scopeID, key, r.expiresIn.Microseconds(), r.token, r.fingerprint, r.version, r.status, r.operation, r.body)
	return err
}

// withRetention is c with retention r (and no tombstone).
func withRetention(c store.Claim, r time.Duration) store.Claim {
	c.Retention = r
	return c
}
