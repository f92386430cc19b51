package idemhuma_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	idemhuma "github.com/idemgen/idemgen/adapters/huma"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// env is a database with the conformance tables, a runtime over it whose scope is what the
// service's Huma authentication put in the context, and a counter of the handler's runs.
type env struct {
	t     *testing.T
	pool  *pgxpool.Pool
	rt    *runtime.Runtime
	logs  *syncBuffer
	log   *slog.Logger
	calls atomic.Int64
}

type tenantKey struct{}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool := pgtest.NewPool(t, 40)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := conformance.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}), nil))
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: idemhuma.ScopeValue(tenantKey{}), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, pool: pool, rt: rt, logs: logs, log: log}
}

// idem is the middleware over the conformance spec's operation table.
func (e *env) idem() func(huma.Context, func(huma.Context)) {
	e.t.Helper()
	m, err := idemhuma.Middleware[pgstore.DBTX](e.rt, api.Routes(), idemhuma.Options{Logger: e.log})
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// authenticate is the service's authentication, a Huma middleware: the bearer token names the
// tenant; without one, Huma's own 401.
func authenticate(a huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		t, ok := strings.CutPrefix(ctx.Header("Authorization"), "Bearer ")
		if !ok || t == "" {
			_ = huma.WriteErr(a, ctx, http.StatusUnauthorized, "no bearer token")
			return
		}
		next(huma.WithValue(ctx, tenantKey{}, t))
	}
}

type paymentInput struct {
	Answer string `header:"X-Answer"`
	Body   struct {
		Amount   int64  `json:"amount" minimum:"1"`
		Currency string `json:"currency" minLength:"3" maxLength:"3"`
		To       string `json:"to"`
	}
}

type paymentOutput struct {
	Location string `header:"Location"`
	Body     struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
}

// createPayment is POST /v1/payments as a Huma service writes it: Huma's binding, the
// transaction from the context, Huma's errors. X-Answer: "decline" returns a 402 (Huma's error
// model, stored), "error" a plain error (Huma's 500, released).
func (e *env) createPayment(ctx context.Context, in *paymentInput) (*paymentOutput, error) {
	e.calls.Add(1)
	tx, ok := runtime.TxFrom[pgstore.DBTX](ctx)
	if !ok {
		return nil, huma.Error500InternalServerError("no idempotency transaction")
	}
	switch in.Answer {
	case "decline":
		return nil, huma.NewError(http.StatusPaymentRequired, "declined")
	case "error":
		return nil, errors.New("the business code failed")
	}
	out := &paymentOutput{}
	out.Body.ID, out.Body.Amount = "pay_"+uuid.NewString(), in.Body.Amount
	if _, err := tx.Exec(ctx, `INSERT INTO payments (id, tenant, amount, currency, to_account) VALUES ($1, $2, $3, $4, $5)`,
		out.Body.ID, ctx.Value(tenantKey{}), in.Body.Amount, in.Body.Currency, in.Body.To); err != nil {
		return nil, err
	}
	out.Location = "/v1/payments/" + out.Body.ID
	return out, nil
}

// createPaymentOp is the operation createPayment, marked in Huma's code, with middlewares.
func createPaymentOp(mw ...func(huma.Context, func(huma.Context))) huma.Operation {
	return huma.Operation{OperationID: "createPayment", Method: http.MethodPost, Path: "/v1/payments", DefaultStatus: http.StatusCreated,
		Extensions: map[string]any{idemhuma.Extension: true}, Middlewares: mw}
}

// count returns the rows of table for tenant.
func (e *env) count(table, tenant string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE tenant = $1`, tenant).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// records returns the idempotency records of the database.
func (e *env) records() int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_records`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// newAPI is a Huma API on Go's ServeMux.
func newAPI() (*http.ServeMux, huma.API) {
	mux := http.NewServeMux()
	return mux, humago.New(mux, huma.DefaultConfig("payments", "1.0.0"))
}

func serve(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

type response struct {
	status int
	header http.Header
	body   string
	json   map[string]any
}

func (r *response) String() string { return fmt.Sprintf("%d %v %s", r.status, r.header, r.body) }

func (r *response) problem() string {
	t, _ := r.json["type"].(string)
	return t[strings.LastIndexByte(t, '/')+1:]
}

func (r *response) replayed() bool { return r.header.Get(runtime.HeaderReplayed) == "true" }

// send sends one request to base; header holds name, value pairs.
func send(t *testing.T, base, method, path, tenant, key, body string, header ...string) *response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		req.Header.Set("Authorization", "Bearer "+tenant)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := &response{status: resp.StatusCode, header: resp.Header, body: string(b)}
	_ = json.Unmarshal(b, &out.json)
	return out
}

// parallel sends n copies of one request at once and returns their statuses with problems.
func parallel(t *testing.T, n int, base, path, tenant, key, body string) []string {
	var wg sync.WaitGroup
	out := make([]string, n)
	for i := range n {
		wg.Go(func() {
			got := send(t, base, "POST", path, tenant, key, body)
			out[i] = fmt.Sprintf("%d %s", got.status, got.problem())
		})
	}
	wg.Wait()
	return out
}

// syncBuffer is a log destination the tests read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
