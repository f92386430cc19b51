package idemgin_test

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
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	idemgin "github.com/idemgen/idemgen/adapters/gin"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// env is a database with the conformance tables, a runtime over it whose scope comes from the
// gin.Context (what the service's auth middleware set), and counters of the handlers of a
// gin service of the team's own.
type env struct {
	t     *testing.T
	pool  *pgxpool.Pool
	rt    *runtime.Runtime
	logs  *syncBuffer
	log   *slog.Logger // into logs and the test log
	calls atomic.Int64
	// entered and release hold a request carrying X-Hold inside the handler.
	entered, release chan struct{}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool := pgtest.NewPool(t, 16)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := conformance.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}), nil))
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: idemgin.Scope(tenantOf), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, pool: pool, rt: rt, logs: logs, log: log, entered: make(chan struct{}), release: make(chan struct{})}
}

// idem is the adapter over the conformance spec's operation table.
func (e *env) idem(opts idemgin.Options) gin.HandlerFunc {
	e.t.Helper()
	m, err := idemgin.Middleware[pgstore.DBTX](e.rt, api.Routes(), opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

var errNoTenant = errors.New("no tenant")

// tenantOf is the scope: what the service's auth middleware put in the gin.Context.
func tenantOf(c *gin.Context) (string, error) {
	t := c.GetString("tenant")
	if t == "" {
		return "", errNoTenant
	}
	return t, nil
}

// auth is the service's own authentication middleware: the bearer token names the tenant.
// Requests without one go on (some routes are public); the scope function refuses them on the
// marked operations.
func auth(c *gin.Context) {
	if t, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer "); ok {
		c.Set("tenant", t)
	}
	c.Next()
}

// errorsMiddleware is the service's own error middleware: after the chain it renders the last
// of c.Errors as the service's problem document.
func errorsMiddleware(c *gin.Context) {
	c.Next()
	if len(c.Errors) == 0 {
		return
	}
	status := http.StatusInternalServerError
	var ae *apiError
	if errors.As(c.Errors.Last().Err, &ae) {
		status = ae.status
	}
	c.Header("Content-Type", "application/problem+json")
	c.JSON(status, gin.H{"type": "https://payments.example/problems/" + http.StatusText(status), "detail": c.Errors.Last().Error()})
}

type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// paymentRequest is the service's own request struct, bound with c.ShouldBindJSON.
type paymentRequest struct {
	Amount   int64  `json:"amount" binding:"required"`
	Currency string `json:"currency" binding:"required"`
	To       string `json:"to" binding:"required"`
}

// createPayment is POST /v1/payments as a gin service writes it: c.ShouldBindJSON, its own
// checks and errors, the transaction from the adapter, c.JSON. X-Answer changes what it does,
// for the tests: "nothing" writes nothing, "error" records a 500 with c.Error, "notfound" a 404
// with c.Error, "abort" answers c.AbortWithStatusJSON(404), "status" sets 202 with c.Status
// and no body.
func (e *env) createPayment(c *gin.Context) {
	e.calls.Add(1)
	if c.GetHeader("X-Hold") != "" {
		e.entered <- struct{}{}
		<-e.release
	}
	var req paymentRequest
	if err := c.ShouldBindJSON(&req); err != nil {
		c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": err.Error()})
		return
	}
	tx, ok := idemgin.TxFrom[pgstore.DBTX](c)
	if !ok {
		c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "no idempotency transaction"})
		return
	}
	id := "pay_" + uuid.NewString()
	if _, err := tx.Exec(c.Request.Context(), `INSERT INTO payments (id, tenant, amount, currency, to_account) VALUES ($1, $2, $3, $4, $5)`,
		id, c.GetString("tenant"), req.Amount, req.Currency, req.To); err != nil {
		_ = c.Error(err)
		return
	}
	switch c.GetHeader("X-Answer") {
	case "nothing":
		return
	case "error":
		_ = c.Error(&apiError{http.StatusInternalServerError, "the business code failed"})
		return
	case "notfound":
		_ = c.Error(&apiError{http.StatusNotFound, "no such account"})
		return
	case "abort":
		c.AbortWithStatusJSON(http.StatusNotFound, gin.H{"error": "no such account"})
		return
	case "status":
		c.Status(http.StatusAccepted)
		return
	}
	c.Header("Location", "/v1/payments/"+id)
	c.JSON(http.StatusCreated, gin.H{"id": id, "amount": req.Amount, "path": c.FullPath()})
}

// createRefund is POST /v1/payments/:id/refunds: the path parameter through c.Param, under
// another name than the spec's {payment_id}.
func (e *env) createRefund(c *gin.Context) {
	e.calls.Add(1)
	var req struct {
		Amount int64 `json:"amount"`
	}
	if err := c.ShouldBindJSON(&req); err != nil {
		c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": err.Error()})
		return
	}
	tx, ok := idemgin.TxFrom[pgstore.DBTX](c)
	if !ok {
		c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "no idempotency transaction"})
		return
	}
	var exists bool
	if err := tx.QueryRow(c.Request.Context(), `SELECT EXISTS (SELECT 1 FROM payments WHERE id = $1)`, c.Param("id")).Scan(&exists); err != nil {
		_ = c.Error(err)
		return
	}
	if !exists {
		c.JSON(http.StatusNotFound, gin.H{"error": "no payment " + c.Param("id")})
		return
	}
	id := "re_" + uuid.NewString()
	if _, err := tx.Exec(c.Request.Context(), `INSERT INTO refunds (id, tenant, payment_id, amount) VALUES ($1, $2, $3, $4)`,
		id, c.GetString("tenant"), c.Param("id"), req.Amount); err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"id": id, "payment_id": c.Param("id"), "amount": req.Amount})
}

// getPayment is the unmarked GET: the adapter lets it through without a transaction.
func (e *env) getPayment(c *gin.Context) {
	if _, ok := idemgin.TxFrom[pgstore.DBTX](c); ok {
		c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "an unmarked operation got a transaction"})
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": c.Param("id")})
}

// payment inserts a payment of tenant and returns its id.
func (e *env) payment(tenant string) string {
	e.t.Helper()
	id := "pay_" + uuid.NewString()
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO payments (id, tenant, amount, currency, to_account) VALUES ($1, $2, 100, 'EUR', 'acc_1')`, id, tenant); err != nil {
		e.t.Fatal(err)
	}
	return id
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

// send sends one request; header holds name, value pairs ("Authorization" defaults to the
// tenant's bearer token, "Content-Type" to JSON when there is a body).
func send(t *testing.T, srv *httptest.Server, method, path, tenant, key, body string, header ...string) *response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
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
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := &response{status: resp.StatusCode, header: resp.Header, body: string(b)}
	_ = json.Unmarshal(b, &out.json)
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

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}
