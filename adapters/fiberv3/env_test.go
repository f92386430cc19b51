package idemfiber_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	idemfiber "github.com/idemgen/idemgen/adapters/fiberv3"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// env is a database with the conformance tables, a runtime over it whose scope comes from the
// fiber context (what the service's auth middleware set), and a counter of the handler's runs.
type env struct {
	t     *testing.T
	pool  *pgxpool.Pool
	rt    *runtime.Runtime
	logs  *syncBuffer
	log   *slog.Logger
	calls atomic.Int64
}

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
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: idemfiber.ScopeKey("tenant"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, pool: pool, rt: rt, logs: logs, log: log}
}

// idem is the adapter over the conformance spec's operation table.
func (e *env) idem(opts idemfiber.Options) fiber.Handler {
	e.t.Helper()
	m, err := idemfiber.Middleware[pgstore.DBTX](e.rt, api.Routes(), opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// newApp is a fiber app whose ErrorHandler renders the service's own problem documents.
func newApp() *fiber.App {
	return fiber.New(fiber.Config{ErrorHandler: func(c fiber.Ctx, err error) error {
		code := http.StatusInternalServerError
		var fe *fiber.Error
		if errors.As(err, &fe) {
			code = fe.Code
		}
		c.Set("Content-Type", "application/problem+json")
		return c.Status(code).JSON(map[string]any{"type": "https://example.com/problems/service-error", "status": code, "detail": err.Error()})
	}})
}

// serve runs app on a fasthttp listener of its own (no net/http in between) and returns its
// base URL.
func serve(t *testing.T, app *fiber.App) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln, fiber.ListenConfig{DisableStartupMessage: true}) }()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		_ = app.ShutdownWithTimeout(time.Second) // keep-alive connections would hold Shutdown
	})
	return "http://" + ln.Addr().String()
}

// auth is the service's own authentication middleware: the bearer token names the tenant.
func auth(c fiber.Ctx) error {
	if t, ok := strings.CutPrefix(c.Get("Authorization"), "Bearer "); ok {
		c.Locals("tenant", t)
	}
	return c.Next()
}

type paymentRequest struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	To       string `json:"to"`
}

// createPayment is POST /v1/payments as a fiber service writes it: c.BodyParser, its own
// errors, the transaction from the adapter, c.JSON. X-Answer: "decline" returns a 402
// fiber.Error (rendered by the ErrorHandler and stored), "error" a plain error (500, released).
func (e *env) createPayment(c fiber.Ctx) error {
	e.calls.Add(1)
	var req paymentRequest
	if err := c.Bind().Body(&req); err != nil {
		return fiber.NewError(http.StatusBadRequest, err.Error())
	}
	tx, ok := idemfiber.TxFrom[pgstore.DBTX](c)
	if !ok {
		return fiber.NewError(http.StatusInternalServerError, "no idempotency transaction")
	}
	switch c.Get("X-Answer") {
	case "decline":
		return fiber.NewError(http.StatusPaymentRequired, "declined")
	case "error":
		return errors.New("the business code failed")
	}
	id := "pay_" + uuid.NewString()
	if _, err := tx.Exec(c.Context(), `INSERT INTO payments (id, tenant, amount, currency, to_account) VALUES ($1, $2, $3, $4, $5)`,
		id, c.Locals("tenant"), req.Amount, req.Currency, req.To); err != nil {
		return err
	}
	c.Set("Location", "/v1/payments/"+id)
	return c.Status(http.StatusCreated).JSON(map[string]any{"id": id, "amount": req.Amount, "path": c.Route().Path})
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
