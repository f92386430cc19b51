// Package reqcost measures what one request costs the server in counts that the machine's load
// cannot move: heap allocations (objects and bytes), statements and round trips to PostgreSQL,
// and, run under valgrind's callgrind (Mark), instructions. Wall-clock and CPU time move with
// whatever else the machine runs; these do not, so they can be compared with recorded values in
// CI (bench/guard) and between revisions in one run (bench/ab/run.sh -counts).
//
// A Rig serves the benchmark harness's handlers (bench/internal/baseline: the same business code
// as bench/cmd/benchserver's variants) from net/http servers on loopback in this process, on one
// pool whose pgx tracer counts statements and round trips, and drives them from a client that
// writes prepared request bytes on a kept-alive connection and reads the response with no
// allocation of its own, so that what is counted is the server's request path: net/http's
// request and response, the runtime, pgx and the handler.
package reqcost

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/bench/internal/baseline"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Path is the handler a request goes through.
type Path string

const (
	// Generated is createPayment through the conformance spec's generated handler on
	// ClaimWithStatement with no records cap (benchserver's "A/B ClaimWithStatement" variants,
	// baseline.Strategy).
	Generated Path = "generated handler"
	// Middleware is the same business code behind runtime.Middleware on the same runtime
	// configuration (benchserver's "middleware (ClaimWithStatement)" variants, baseline.Middleware).
	Middleware Path = "middleware"
	// MiddlewareLockAtRead is Middleware on ClaimWithStatement{LockAtRead: true}, the opt-in
	// claim whose read holds the key the Middleware confirms (benchserver's "middleware
	// (ClaimWithStatement LockAtRead)" variants).
	MiddlewareLockAtRead Path = "middleware with LockAtRead"
	// Plain is the business INSERT in a plain transaction, no idempotency (the control).
	Plain Path = "plain transaction"
	// Bare decodes the body and answers, no database: net/http's share of every request.
	Bare Path = "bare handler"
)

// Kind is what the request meets.
type Kind string

const (
	Replay   Kind = "replay"   // a key completed with the same body: the stored response
	Mismatch Kind = "mismatch" // a key completed with another body: 422
	NewKey   Kind = "new key"  // a fresh key: the handler runs and its response is stored
)

// Scenario is one kind of request through one path. Plain and Bare have no key: every request
// is the same (their Kind is NewKey).
type Scenario struct {
	Path Path
	Kind Kind
}

func (s Scenario) String() string { return string(s.Path) + ", " + string(s.Kind) }

// Scenarios are the ones the guard records: the three kinds through both idemgen paths.
var Scenarios = []Scenario{
	{Generated, Replay}, {Generated, Mismatch}, {Generated, NewKey},
	{Middleware, Replay}, {Middleware, Mismatch}, {Middleware, NewKey},
}

// Controls are the paths without idempotency, for comparison.
var Controls = []Scenario{{Plain, NewKey}, {Bare, NewKey}}

// The request bodies: the harness's createPayment body (bench/cmd/benchdrive), and the body of a
// mismatch.
const (
	paymentBody  = `{"amount": 1500, "currency": "EUR", "to": "acc_123", "description": "benchmark"}`
	mismatchBody = `{"amount": 1501, "currency": "EUR", "to": "acc_123", "description": "benchmark"}`
)

// Counts are one scenario's costs per request, averaged over the requests measured.
type Counts struct {
	Requests   int
	Allocs     float64 // heap objects allocated by the whole process
	Bytes      float64 // heap bytes allocated
	Statements float64 // SQL statements sent (a batch's each count)
	RoundTrips float64 // queries and batches sent (a batch is one)
}

// Rig serves the paths on loopback and counts what requests to them cost. Not safe for
// concurrent use.
type Rig struct {
	pool    *pgxpool.Pool
	tr      *tracer
	servers map[Path]*server
	run     string // makes tenants and keys unique to this Rig
	seq     int
}

type server struct {
	ln  net.Listener
	srv *http.Server
}

// New connects to the database at url (which it migrates: the store's, the conformance
// service's and the baselines' tables) and starts the paths' servers.
func New(ctx context.Context, url string) (*Rig, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	cfg.MaxConns = 8
	tr := &tracer{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	r := &Rig{pool: pool, tr: tr, servers: map[Path]*server{}}
	if err := r.mount(ctx); err != nil {
		r.Close()
		return nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	r.run = hex.EncodeToString(b[:])
	return r, nil
}

// paymentsTable is the conformance service's payments table (internal/testkit/conformance's
// schema), which the baselines' business INSERT writes; created here so that the harness builds
// in a revision that keeps that schema elsewhere (bench/ab/counts.sh).
const paymentsTable = `CREATE TABLE IF NOT EXISTS payments (
	id          text PRIMARY KEY,
	tenant      text NOT NULL,
	amount      bigint NOT NULL,
	currency    text NOT NULL,
	to_account  text NOT NULL,
	description text,
	created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS payments_tenant ON payments (tenant)`

func (r *Rig) mount(ctx context.Context) error {
	if err := pgstore.Migrate(ctx, r.pool); err != nil {
		return err
	}
	if _, err := r.pool.Exec(ctx, paymentsTable); err != nil {
		return fmt.Errorf("payments table: %w", err)
	}
	gen, err := baseline.Strategy(r.pool, pgstore.ClaimWithStatement{})
	if err != nil {
		return err
	}
	mw, err := baseline.Middleware(r.pool)
	if err != nil {
		return err
	}
	handlers := map[Path]http.Handler{Generated: gen, Middleware: mw, Plain: baseline.Plain(r.pool), Bare: baseline.Bare()}
	if handlers[MiddlewareLockAtRead], err = middlewareLockAtRead(r.pool); err != nil {
		return err
	}
	for p, h := range handlers {
		if h == nil {
			continue // not in this revision (lockatread_old.go)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		s := &server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}}
		go func() { _ = s.srv.Serve(ln) }()
		r.servers[p] = s
	}
	return nil
}

// Close stops the servers and the pool.
func (r *Rig) Close() {
	for _, s := range r.servers {
		_ = s.srv.Close()
	}
	r.pool.Close()
}

// Requests is a prepared scenario: Do sends its next request on a kept-alive connection, or,
// direct, calls the path's handler in this goroutine.
type Requests struct {
	s      Scenario
	conn   net.Conn
	br     *bufio.Reader
	buf    []byte
	tenant string
	key    string // replay and mismatch: the primed key
	n      uint64
	// direct: the handler, and the request and response Do reuses.
	direct http.Handler
	req    *http.Request
	body   bytes.Reader
	w      recorder
}

// Prepare opens a connection to s's path under a tenant of its own and, for a replay or a
// mismatch, completes the key its requests send.
func (r *Rig) Prepare(s Scenario) (*Requests, error) {
	srv, ok := r.servers[s.Path]
	if !ok {
		return nil, fmt.Errorf("reqcost: no path %q", s.Path)
	}
	conn, err := net.Dial("tcp", srv.ln.Addr().String())
	if err != nil {
		return nil, err
	}
	r.seq++
	q := &Requests{s: s, conn: conn, br: bufio.NewReaderSize(conn, 64<<10), buf: make([]byte, 0, 1024),
		tenant: fmt.Sprintf("guard-%s-%d", r.run, r.seq)}
	if s.Kind == Replay || s.Kind == Mismatch {
		q.key = fmt.Sprintf("key-%s-%04d-primed", r.run, r.seq)
		if err := q.send(q.key, paymentBody, 201, false); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("prime %s: %w", s, err)
		}
	}
	return q, nil
}

// Close closes the connection.
func (q *Requests) Close() { _ = q.conn.Close() }

// Do sends the scenario's next request and checks its answer: 201 replayed, 422, or 201 not
// replayed.
func (q *Requests) Do() error {
	switch q.s.Kind {
	case Replay:
		return q.send(q.key, paymentBody, 201, true)
	case Mismatch:
		return q.send(q.key, mismatchBody, 422, false)
	}
	q.n++
	if q.s.Path == Plain || q.s.Path == Bare {
		return q.send("", paymentBody, 201, false)
	}
	// Fresh keys spread over the index as clients' random keys do (benchdrive's mix).
	var k [40]byte
	key := append(append(append(k[:0], "key-"...), q.tenant[6:]...), '-')
	key = strconv.AppendUint(key, mix(q.n), 16)
	return q.sendBytes(key, paymentBody, 201, false)
}

func (q *Requests) send(key, body string, status int, replayed bool) error {
	return q.sendBytes([]byte(key), body, status, replayed)
}

// sendBytes writes one request and reads its response, allocating nothing once its buffers
// have grown.
func (q *Requests) sendBytes(key []byte, body string, status int, replayed bool) error {
	if q.direct != nil {
		return q.call(key, body, status, replayed)
	}
	b := q.buf[:0]
	b = append(b, "POST /v1/payments HTTP/1.1\r\nHost: reqcost\r\nAuthorization: Bearer "...)
	b = append(b, q.tenant...)
	b = append(b, "\r\nContent-Type: application/json\r\n"...)
	if len(key) > 0 {
		b = append(b, "Idempotency-Key: "...)
		b = append(b, key...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	q.buf = b
	if _, err := q.conn.Write(b); err != nil {
		return err
	}
	return q.read(status, replayed)
}

var (
	headerLength   = []byte("content-length:")
	headerReplayed = []byte("idempotent-replayed: true")
)

// read reads one response: its status line, its headers (Content-Length, Idempotent-Replayed)
// and its body, which it discards.
func (q *Requests) read(status int, replayed bool) error {
	line, err := q.br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return fmt.Errorf("bad status line %q", line)
	}
	got, _ := strconv.Atoi(string(line[9:12])) // the compiler does not allocate this conversion
	length, sawReplayed := -1, false
	for {
		line, err = q.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		if len(line) > len(headerLength) && bytes.EqualFold(line[:len(headerLength)], headerLength) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(line[len(headerLength):])))
		}
		if bytes.EqualFold(line, headerReplayed) {
			sawReplayed = true
		}
	}
	if length < 0 {
		return errors.New("response without Content-Length")
	}
	if _, err := q.br.Discard(length); err != nil {
		return err
	}
	if got != status || sawReplayed != replayed {
		return fmt.Errorf("%s: got %d (replayed %v), want %d (replayed %v)", q.s, got, sawReplayed, status, replayed)
	}
	return nil
}

// mix is splitmix64's finalizer (as bench/cmd/benchdrive's): a bijection whose outputs look
// random.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// PrepareDirect is Prepare for requests that Do hands to the path's handler in the calling
// goroutine, with no connection: what is measured is then the handler alone, without net/http's
// server, its goroutines, or a client (whose instructions callgrind cannot tell apart from the
// handler's when goroutines switch). Each request is built as net/http's server builds one: its
// own cancelable context, its headers, a body of known length.
func (r *Rig) PrepareDirect(s Scenario) (*Requests, error) {
	q, err := r.Prepare(s) // primes the key through the server
	if err != nil {
		return nil, err
	}
	q.direct = r.servers[s.Path].srv.Handler
	q.req = &http.Request{Method: "POST", URL: &url.URL{Path: "/v1/payments"}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Host: "reqcost", RequestURI: "/v1/payments", RemoteAddr: "127.0.0.1:1"}
	q.w.h = http.Header{}
	return q, nil
}

// call hands one request to the handler and checks what it wrote.
func (q *Requests) call(key []byte, body string, status int, replayed bool) error {
	h := http.Header{"Authorization": {"Bearer " + q.tenant}, "Content-Type": {"application/json"}}
	if len(key) > 0 {
		h["Idempotency-Key"] = []string{string(key)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q.body.Reset([]byte(body))
	r := *q.req
	r.Header, r.ContentLength, r.Body = h, int64(len(body)), io.NopCloser(&q.body)
	q.w.reset()
	q.direct.ServeHTTP(&q.w, r.WithContext(ctx))
	got, sawReplayed := q.w.status, q.w.h.Get("Idempotent-Replayed") == "true"
	if got != status || sawReplayed != replayed {
		return fmt.Errorf("%s: got %d (replayed %v), want %d (replayed %v)", q.s, got, sawReplayed, status, replayed)
	}
	return nil
}

// recorder is the direct requests' http.ResponseWriter: it keeps the status and the headers
// and discards the body.
type recorder struct {
	h      http.Header
	status int
	n      int
}

func (w *recorder) Header() http.Header { return w.h }
func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(b)
	return len(b), nil
}
func (w *recorder) reset() { clear(w.h); w.status, w.n = 0, 0 }

// Measure sends warm requests of s, then batches of n more, and returns the costs per request
// of each batch. It runs with GOMAXPROCS 1, as testing.AllocsPerRun does, so that no other
// goroutine of the process runs beside the requests; allocations are the whole process's. What
// the requests do not always pay (a new key's claim sent alone when its handler is slow to send
// its first statement, a refill of a counted-ahead reservation, a pool's background work) shows
// in some batches only: Min is the cost every request pays.
func (r *Rig) Measure(s Scenario, warm, batches, n int) ([]Counts, error) {
	q, err := r.Prepare(s)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(1))
	for range warm {
		if err := q.Do(); err != nil {
			return nil, err
		}
	}
	out := make([]Counts, 0, batches)
	for range batches {
		var m0, m1 goruntime.MemStats
		st0, rt0 := r.tr.statements.Load(), r.tr.roundTrips.Load()
		goruntime.ReadMemStats(&m0)
		for range n {
			if err := q.Do(); err != nil {
				return nil, err
			}
		}
		goruntime.ReadMemStats(&m1)
		st1, rt1 := r.tr.statements.Load(), r.tr.roundTrips.Load()
		f := float64(n)
		out = append(out, Counts{Requests: n, Allocs: float64(m1.Mallocs-m0.Mallocs) / f, Bytes: float64(m1.TotalAlloc-m0.TotalAlloc) / f,
			Statements: float64(st1-st0) / f, RoundTrips: float64(rt1-rt0) / f})
	}
	return out, nil
}

// Min is the least of each count over batches: what every request of the scenario pays.
func Min(batches []Counts) Counts {
	m := batches[0]
	for _, c := range batches[1:] {
		m.Requests += c.Requests
		m.Allocs, m.Bytes = min(m.Allocs, c.Allocs), min(m.Bytes, c.Bytes)
		m.Statements, m.RoundTrips = min(m.Statements, c.Statements), min(m.RoundTrips, c.RoundTrips)
	}
	return m
}

// Mean is the average of each count over batches.
func Mean(batches []Counts) Counts {
	var m Counts
	for _, c := range batches {
		m.Requests += c.Requests
		m.Allocs += c.Allocs
		m.Bytes += c.Bytes
		m.Statements += c.Statements
		m.RoundTrips += c.RoundTrips
	}
	f := float64(len(batches))
	m.Allocs, m.Bytes, m.Statements, m.RoundTrips = m.Allocs/f, m.Bytes/f, m.Statements/f, m.RoundTrips/f
	return m
}

// Mark is called before and after the requests that Loop measures: run under
// `valgrind --tool=callgrind --dump-before=*reqcost.Mark`, the second dump holds exactly their
// instructions (the first, everything before them).
//
//go:noinline
func Mark(n int) int { return n + 1 }

// Loop sends warm requests of s, then n more between two calls of Mark, with GOMAXPROCS 1 (so
// that no idle processor spins while a request waits for PostgreSQL, which would add a number
// of instructions that depends on timing) and the garbage collector off.
func (r *Rig) Loop(s Scenario, warm, n int, direct bool) error {
	prepare := r.Prepare
	if direct {
		prepare = r.PrepareDirect
	}
	q, err := prepare(s)
	if err != nil {
		return err
	}
	defer q.Close()
	goruntime.GOMAXPROCS(1)
	for range warm {
		if err := q.Do(); err != nil {
			return err
		}
	}
	// No collection between the marks: its cost depends on the heap the process happens to
	// have, not on the requests (their allocations are counted by Measure).
	goruntime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	Mark(0)
	for range n {
		if err = q.Do(); err != nil {
			break
		}
	}
	Mark(1)
	return err
}

// tracer counts statements and round trips: a query is one of each, a batch one round trip
// and one statement per query in it. pgx sends BEGIN and COMMIT as queries, so they count.
type tracer struct{ statements, roundTrips atomic.Int64 }

func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.statements.Add(1)
	t.roundTrips.Add(1)
	return ctx
}
func (t *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.roundTrips.Add(1)
	return ctx
}
func (t *tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	t.statements.Add(1)
}
func (t *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
