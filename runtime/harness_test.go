package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// The machine tests run the runtime's HTTP layer and state machines over the in-memory store
// (runtime/store/memstore): every path of runAtomic, runLease and runUnguarded without a
// database. What only a real database can prove lives in runtime/pgstore's tests.

// clock is the memstore's clock, moved by the tests (leases and retention without sleeping).
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// memEnv is one test's runtime over a fresh memstore.
type memEnv struct {
	t     testing.TB
	clock *clock
	mem   *memstore.Store
	rt    *Runtime
	obs   *recordingObserver
	logs  *logBuffer

	seq     atomic.Int64
	mu      sync.Mutex
	written []string // business keys written through memstore.DB
	gates   map[string]*gate
	calls   map[string]bool // provider charges, by provider key
}

// newMemEnv returns an env whose store is memstore (or what wrap makes of it) on a test clock.
func newMemEnv(t testing.TB, tweak func(*Config)) *memEnv {
	t.Helper()
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := &memEnv{t: t, clock: c, mem: memstore.New(c.Now), obs: &recordingObserver{}, logs: &logBuffer{},
		gates: map[string]*gate{}, calls: map[string]bool{}}
	cfg := Config{
		Store:    e.mem,
		Scope:    bearerScope,
		Observer: e.obs,
		Logger:   slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.rt = rt
	return e
}

func bearerScope(r *http.Request) (string, error) {
	tenant, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tenant == "" {
		return "", errors.New("no bearer token")
	}
	return tenant, nil
}

// payReq is the decoded request of the test operation: {"amount": N}, the tenant, and the
// test's knobs from request headers:
//
//	X-Hold    the handler (atomic) or call phase (lease) enters the named gate and waits for
//	          its release
//	X-Fail    "panic", "error", or a status the handler answers (after its write)
//	X-Big     the response body has that many bytes
type payReq struct {
	Amount int64
	Tenant string
	Header http.Header
}

// decodePay plays a generated decoder: strict enough for the tests, the body framed raw.
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

// payOp is an atomic-mode operation with the defaults of docs/design.md section 2.
func payOp() *Operation {
	return &Operation{
		ID: "createPayment", Method: "POST", Path: "/v1/payments",
		Key:        KeyRule{Header: "Idempotency-Key", Required: true},
		Retention:  time.Hour,
		Lease:      time.Second,
		MediaTypes: []string{"application/json"},
	}
}

func leaseOp() *Operation {
	op := payOp()
	op.ID = "createProviderCharge"
	op.Mode = ModeLease
	op.Lease = 500 * time.Millisecond
	return op
}

// atomicHandler is generated code plus a business handler that writes one payment.
func (e *memEnv) atomicHandler(op *Operation) http.Handler {
	return AtomicHandler(e.rt, op, BindAtomic(decodePay, func(ctx context.Context, db *memstore.DB, req *payReq) (Response, error) {
		id := e.pay(db, req)
		return e.answer(ctx, req, id)
	}))
}

// leaseHandler charges the provider in the call phase (X-Hold waits after the charge; X-Fail
// "error" and "panic" fail the call phase), then writes one payment in the completion.
func (e *memEnv) leaseHandler(op *Operation) http.Handler {
	return LeaseHandler(e.rt, op, BindLease(decodePay, func(ctx context.Context, l *Lease, req *payReq) (CompleteFunc[*memstore.DB], error) {
		pk, err := l.ProviderKey(ctx, "charge")
		if err != nil {
			return nil, err
		}
		e.charge(pk)
		e.hold(req)
		switch req.Header.Get("X-Fail") {
		case "error":
			return nil, errors.New("provider said no")
		case "panic":
			panic("call phase panic")
		}
		return func(ctx context.Context, db *memstore.DB) (Response, error) {
			id := e.pay(db, req)
			r := *req
			r.Header = req.Header.Clone()
			r.Header.Del("X-Hold")
			return e.answer(ctx, &r, id)
		}, nil
	}))
}

func (e *memEnv) pay(db *memstore.DB, req *payReq) int64 {
	id := e.seq.Add(1)
	k := fmt.Sprintf("payments/%s/%d", req.Tenant, id)
	db.Put(k, strconv.FormatInt(req.Amount, 10))
	e.mu.Lock()
	e.written = append(e.written, k)
	e.mu.Unlock()
	return id
}

// payments counts the committed payments of a tenant.
func (e *memEnv) payments(tenant string) int {
	e.mu.Lock()
	keys := append([]string(nil), e.written...)
	e.mu.Unlock()
	n := 0
	for _, k := range keys {
		if _, ok := e.mem.Value(k); ok && strings.HasPrefix(k, "payments/"+tenant+"/") {
			n++
		}
	}
	return n
}

func (e *memEnv) charge(providerKey string) {
	e.mu.Lock()
	e.calls[providerKey] = true
	e.mu.Unlock()
}

// charges counts distinct provider charges (the provider deduplicates on its key).
func (e *memEnv) charges() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.calls)
}

// gate lets a test hold a handler at a known point: entered is closed when the handler gets
// there, release lets it go on.
type gate struct {
	entered, release chan struct{}
	once             sync.Once
}

func (e *memEnv) gate(name string) *gate {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.gates[name]
	if g == nil {
		g = &gate{entered: make(chan struct{}), release: make(chan struct{})}
		e.gates[name] = g
	}
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// wait waits until a handler entered the gate.
func (g *gate) wait(t testing.TB) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no handler entered the gate")
	}
}

func (e *memEnv) hold(req *payReq) {
	if name := req.Header.Get("X-Hold"); name != "" {
		g := e.gate(name)
		close(g.entered)
		<-g.release
	}
}

func (e *memEnv) answer(ctx context.Context, req *payReq, id int64) (Response, error) {
	e.hold(req)
	switch f := req.Header.Get("X-Fail"); f {
	case "":
	case "panic":
		panic("test panic")
	case "error":
		return Response{}, errors.New("test error")
	default:
		status, _ := strconv.Atoi(f)
		return Response{Status: status, Body: []byte(`{"failed":true}`)}, nil
	}
	return businessResponse(id, req.Amount, req.Header.Get("X-Big")), nil
}

// businessResponse is the handler's success: 201 with headers that must and must not replay.
func businessResponse(id, amount int64, big string) Response {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Location", fmt.Sprintf("/v1/payments/%d", id))
	h.Set("Set-Cookie", "session=secret")
	h.Set("X-Internal", "not replayed")
	h.Set("Date", "Mon, 30 Nov 2026 10:00:00 GMT")
	body := fmt.Appendf(nil, `{"id":%d,"amount":%d}`, id, amount)
	if n, err := strconv.Atoi(big); err == nil && n > 0 {
		body = []byte(strings.Repeat("x", n))
	}
	return Response{Status: http.StatusCreated, Header: h, Body: body}
}

const (
	key1    = "k-test-0001-aaaaaaaaaaaa"
	body100 = `{"amount":100}`
)

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

func serveReq(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// problemDoc is the default problem+json body.
type problemDoc struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Status  int    `json:"status"`
	Detail  string `json:"detail"`
	Pointer string `json:"pointer"`
}

// problemType returns the problem name of a problem+json response ("" when it is not one).
func problemType(t testing.TB, w *httptest.ResponseRecorder) string {
	t.Helper()
	return problemOf(t, w).name
}

type problemSeen struct {
	name string
	doc  problemDoc
}

func problemOf(t testing.TB, w *httptest.ResponseRecorder) problemSeen {
	t.Helper()
	if w.Header().Get("Content-Type") != "application/problem+json" {
		return problemSeen{}
	}
	var p problemDoc
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body.String(), err)
	}
	if p.Status != w.Code {
		t.Errorf("problem status %d, response status %d", p.Status, w.Code)
	}
	return problemSeen{name: strings.TrimPrefix(p.Type, DefaultProblemBase), doc: p}
}

// recordingObserver counts outcomes and claims.
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

func (o *recordingObserver) claimCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.claims
}

func (o *recordingObserver) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.outcomes)
}

// logBuffer collects log output safely across goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// record returns the live record of key for tenant, as the store has it.
func (e *memEnv) record(tenant, key string) (store.Record, bool) {
	e.t.Helper()
	rec, found, err := e.mem.Get(context.Background(), store.ID{Scope: tenant, Key: key})
	if err != nil {
		e.t.Fatal(err)
	}
	return rec, found
}

// eventually waits until cond holds (polling), or fails the test after 10 seconds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))
