package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/runtime/canonical"
)

// roundTrips counts what a pgx connection sends to the server: one per Query/Exec/QueryRow and
// one per batch (a batch is one pipeline with one Sync, so one network round trip).
type roundTrips struct {
	n atomic.Int64
	// writes counts flushes to the server's socket: each pipeline, prepare or query is one, so
	// it also sees the round trips pgx makes without tracing them (re-prepares, deallocations).
	writes atomic.Int64
	mu     sync.Mutex
	log    []string
}

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	c.note(d.SQL)
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	c.note(fmt.Sprintf("batch of %d", d.Batch.Len()))
	return ctx
}
func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

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

// env is one test's database, runtime and business table.
type env struct {
	t    testing.TB
	pool *pgxpool.Pool
	rt   *Runtime
	rtt  *roundTrips
	obs  *recordingObserver
	url  string
}

// newEnvB is newEnv for benchmarks.
func newEnvB(b *testing.B) *env {
	b.Helper()
	return newEnvAt(b, pgtest.NewDatabase(b), nil)
}

func newEnv(t *testing.T, tweak func(*Config)) *env {
	t.Helper()
	url := pgtest.NewDatabase(t)
	return newEnvAt(t, url, tweak)
}

// newEnvNoMigrate returns a pool on a fresh, empty database.
func newEnvNoMigrate(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func newEnvAt(t testing.TB, url string, tweak func(*Config)) *env {
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
	pcfg.MaxConns = 60
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS payments (
		id bigserial PRIMARY KEY, scope text NOT NULL, amount bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	obs := &recordingObserver{}
	cfg := Config{
		Pool:     pool,
		Scope:    bearerScope,
		Observer: obs,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, pool: pool, rt: rt, rtt: rtt, obs: obs, url: url}
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

// payOp is an atomic-mode operation with the defaults of DESIGN section 2.
func payOp() *Operation {
	return &Operation{
		ID: "createPayment", Method: "POST", Path: "/v1/payments",
		Key:        KeyRule{Header: "Idempotency-Key", Required: true},
		Retention:  time.Hour,
		Lease:      time.Second,
		MediaTypes: []string{"application/json"},
	}
}

// testFingerprint stands in for the generated fingerprint: operation and raw body.
func testFingerprint(op *Operation, body []byte) canonical.Fingerprint {
	return canonical.Fingerprint{Version: canonical.Version, Sum: sha256.Sum256(append([]byte(op.ID+"\x00"), body...))}
}

type payBody struct {
	Amount int64 `json:"amount"`
}

// atomicHandler plays generated code plus a business handler that writes one payments row.
// Knobs: X-Delay sleeps inside the transaction, X-Fail answers that status (or "panic", or
// "error") after the write, X-Big answers a body of that many bytes.
func (e *env) atomicHandler(op *Operation) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x, ok := e.rt.Begin(w, r, op)
		if !ok {
			return
		}
		var body payBody
		if err := json.Unmarshal(x.Body(), &body); err != nil {
			x.Fail(&BodyError{At: "", Reason: err.Error()})
			return
		}
		if body.Amount <= 0 {
			x.Fail(&BodyError{At: "/amount", Reason: "amount must be positive"})
			return
		}
		x.RunAtomic(x.HeaderKey(), testFingerprint(op, x.Body()), func(ctx context.Context, tx pgx.Tx) (Response, error) {
			var id int64
			if err := tx.QueryRow(ctx, "INSERT INTO payments (scope, amount) VALUES ($1, $2) RETURNING id",
				x.Scope(), body.Amount).Scan(&id); err != nil {
				return Response{}, err
			}
			return businessAnswer(ctx, r, id, body.Amount)
		})
	})
}

func businessAnswer(ctx context.Context, r *http.Request, id, amount int64) (Response, error) {
	signal(r)
	if d, err := time.ParseDuration(r.Header.Get("X-Delay")); err == nil {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return Response{}, ctx.Err()
		}
	}
	switch f := r.Header.Get("X-Fail"); f {
	case "":
	case "panic":
		panic("test panic")
	case "error":
		return Response{}, errors.New("test error")
	default:
		var status int
		fmt.Sscan(f, &status)
		return Response{Status: status, Body: []byte(`{"failed":true}`)}, nil
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Location", fmt.Sprintf("/v1/payments/%d", id))
	h.Set("Set-Cookie", "session=secret")
	h.Set("X-Internal", "not replayed")
	h.Set("Date", "Mon, 30 Nov 2026 10:00:00 GMT")
	body := fmt.Appendf(nil, `{"id":%d,"amount":%d}`, id, amount)
	var big int
	if _, err := fmt.Sscan(r.Header.Get("X-Big"), &big); err == nil && big > 0 {
		body = []byte(strings.Repeat("x", big))
	}
	return Response{Status: http.StatusCreated, Header: h, Body: body}, nil
}

// req builds a request with the tenant, key and JSON body.
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
func problemType(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	if w.Header().Get("Content-Type") != "application/problem+json" {
		return ""
	}
	var p problemDoc
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body.String(), err)
	}
	if p.Status != w.Code {
		t.Errorf("problem status %d, response status %d", p.Status, w.Code)
	}
	return strings.TrimPrefix(p.Type, DefaultProblemBase)
}

// recordingObserver counts outcomes.
type recordingObserver struct {
	mu       sync.Mutex
	outcomes map[Outcome]int
	claims   int
	swept    int64
}

func (o *recordingObserver) Outcome(_ string, _ Mode, out Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.outcomes == nil {
		o.outcomes = map[Outcome]int{}
	}
	o.outcomes[out]++
}
func (o *recordingObserver) ClaimLatency(string, Mode, time.Duration) {
	o.mu.Lock()
	o.claims++
	o.mu.Unlock()
}
func (o *recordingObserver) Swept(n int64) {
	o.mu.Lock()
	o.swept += n
	o.mu.Unlock()
}
func (o *recordingObserver) get(out Outcome) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.outcomes[out]
}

const key1 = "k-test-0001-aaaaaaaaaaaa"

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// signal tells a parent process (crash tests) that the handler is running: its business write
// (atomic) or provider call (lease) is done and it is about to sleep.
func signal(r *http.Request) {
	if r.Header.Get("X-Signal") != "" {
		os.Stdout.WriteString("IN_HANDLER\n")
	}
}
