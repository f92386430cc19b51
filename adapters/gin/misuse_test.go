package idemgin_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	idemgin "github.com/idemgen/idemgen/adapters/gin"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// TestNetHTTPMiddlewareInGinIsRefused: runtime.Middleware on gin without the adapter cannot
// keep the contract. Through the usual shim (the wrapped handler calls c.Next()) the handlers
// write to gin's own writer, so the middleware recorded nothing and stored an empty 200 while
// the client got the handler's answer, and every retry ran the handler again; around the whole
// Engine it would claim requests gin redirects or does not route. Each way is refused: 500
// `internal` before the handler runs, nothing stored, and a log line naming the adapter; the
// same key then runs through the adapter as a new request.
func TestNetHTTPMiddlewareInGinIsRefused(t *testing.T) {
	e := newEnv(t)
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(e.pool, pgstore.Options{}), Scope: conformance.TenantOf, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := runtime.Middleware[pgstore.DBTX](rt, api.Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// shim is how a gin service mounts a net/http middleware without an adapter; wrap is
	// what sits between the shim and idemgen's middleware (otelhttp, a logging middleware).
	shimUnder := func(wrap func(http.Handler) http.Handler) gin.HandlerFunc {
		return func(c *gin.Context) {
			wrap(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c.Request = r
				c.Next()
			}))).ServeHTTP(c.Writer, c.Request)
			c.Abort()
		}
	}
	shim := shimUnder(func(h http.Handler) http.Handler { return h })
	handler := func(c *gin.Context) {
		e.calls.Add(1)
		c.JSON(http.StatusCreated, gin.H{"id": "pay_" + uuid.NewString()})
	}
	shimmed := gin.New()
	shimmed.POST("/v1/payments", shim, handler)
	traced := gin.New()
	traced.POST("/v1/payments", shimUnder(otelhttp.NewMiddleware("payments")), handler)
	logged := gin.New()
	logged.POST("/v1/payments", shimUnder(logging), handler)
	whole := gin.New()
	whole.POST("/v1/payments", handler)
	adapter := gin.New()
	adapter.Use(auth)
	adapter.POST("/v1/payments", e.idem(idemgin.Options{}), e.createPayment)

	body := `{"amount": 90, "currency": "EUR", "to": "acc_1"}`
	for _, tc := range []struct {
		name    string
		handler http.Handler
	}{
		{"a shim in the chain", shimmed},
		{"a shim under otelhttp", traced},
		{"a shim under a logging middleware", logged},
		{"otelhttp around a shim", otelhttp.NewHandler(shimmed, "payments")},
		{"around the whole Engine", mw(whole)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			t.Cleanup(srv.Close)
			key := "k-gin-misuse-" + uuid.NewString()[:8]
			before := e.records()
			got := send(t, srv, "POST", "/v1/payments", "t-gin-misuse", key, body)
			if got.status != http.StatusInternalServerError || got.problem() != "internal" {
				t.Errorf("%s: %s, want 500 internal", tc.name, got)
			}
			if again := send(t, srv, "POST", "/v1/payments", "t-gin-misuse", key, body); again.status == http.StatusOK || again.replayed() {
				t.Errorf("%s, retry: %s; an empty 200 or a replay means something was stored", tc.name, again)
			}
			if n := e.calls.Load(); n != 0 {
				t.Errorf("%s: the handler ran %d times, want 0", tc.name, n)
			}
			if !strings.Contains(e.logs.String(), "idemgin.Middleware") {
				t.Errorf("%s: the log does not name idemgin.Middleware:\n%s", tc.name, e.logs)
			}
			if n := e.records() - before; n != 0 {
				t.Errorf("%s: %d idempotency records, want none", tc.name, n)
			}
			asrv := httptest.NewServer(adapter)
			t.Cleanup(asrv.Close)
			if ok := send(t, asrv, "POST", "/v1/payments", "t-gin-misuse", key, body); ok.status != http.StatusCreated || ok.replayed() {
				t.Errorf("%s, then the adapter: %s, want 201", tc.name, ok)
			}
			e.calls.Store(0)
		})
	}
}

// logging is a logging middleware as services write their own: a status recorder embedding
// the writer it wraps, with no Unwrap method.
func logging(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		_ = fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, rec.status) // the log line
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(status int) {
	s.status = status
	s.ResponseWriter.WriteHeader(status)
}

// opaque is a wrapper that hides the writer it wraps from every look (no Unwrap, no field of
// the writer's type): only the behaviour shows the misuse.
type opaque struct {
	header      func() http.Header
	write       func([]byte) (int, error)
	writeHeader func(int)
}

func (o opaque) Header() http.Header         { return o.header() }
func (o opaque) Write(b []byte) (int, error) { return o.write(b) }
func (o opaque) WriteHeader(status int)      { o.writeHeader(status) }

func hide(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(opaque{w.Header, w.Write, w.WriteHeader}, r)
	})
}

// TestShimBehindAnOpaqueWriterIsRefusedOnceSeen: with the writer out of sight, the middleware
// sees the shim by what it does: the handler answered the client on its own writer, not on the
// one it was handed. That request's transaction is rolled back, its key released and nothing
// stored or appended to the answer; the log names the adapter; every later request through
// the mounting is refused before the handler runs, and 20 parallel duplicates then run nothing.
func TestShimBehindAnOpaqueWriterIsRefusedOnceSeen(t *testing.T) {
	e := newEnv(t)
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(e.pool, pgstore.Options{}), Scope: conformance.TenantOf, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := runtime.Middleware[pgstore.DBTX](rt, api.Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := gin.New()
	r.POST("/v1/payments", func(c *gin.Context) {
		hide(mw(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			c.Request = req
			c.Next()
		}))).ServeHTTP(c.Writer, c.Request)
		c.Abort()
	}, func(c *gin.Context) {
		e.calls.Add(1)
		tx, ok := idemgin.TxFrom[pgstore.DBTX](c)
		if !ok {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		if _, err := tx.Exec(c.Request.Context(), `INSERT INTO payments (id, tenant, amount, currency, to_account) VALUES ($1, 't-opaque', 1, 'EUR', 'acc')`, "pay_"+uuid.NewString()); err != nil {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		c.JSON(http.StatusCreated, gin.H{"ok": true})
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	body := `{"amount": 90, "currency": "EUR", "to": "acc_1"}`
	first := send(t, srv, "POST", "/v1/payments", "t-opaque", "k-gin-opaque-00000001", body)
	if strings.Contains(first.body, "problem") {
		t.Errorf("first: %s; the runtime's problem was appended to the handler's answer", first)
	}
	if !strings.Contains(e.logs.String(), "idemgin.Middleware") || !strings.Contains(e.logs.String(), "outside the guard") {
		t.Errorf("the log does not name the misuse and idemgin.Middleware:\n%s", e.logs)
	}
	var wg sync.WaitGroup
	statuses := make(chan string, 20)
	for range 20 {
		wg.Go(func() {
			got := send(t, srv, "POST", "/v1/payments", "t-opaque", "k-gin-opaque-00000002", body)
			statuses <- fmt.Sprintf("%d %s", got.status, got.problem())
		})
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != "500 internal" {
			t.Errorf("a duplicate after the misuse was seen: %s, want 500 internal", s)
		}
	}
	if n := e.calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1 (the request that showed the misuse)", n)
	}
	if n := e.count("payments", "t-opaque"); n != 0 {
		t.Errorf("%d payments kept, want 0 (rolled back)", n)
	}
	if n := e.records(); n != 0 {
		t.Errorf("%d idempotency records, want none", n)
	}
}

// TestAdapterUnderWrappersRunsOnce: the adapter under otelhttp and under a logging middleware
// around the whole engine: 20 parallel duplicates of a new key make one payment, the others
// get 409 or the replay.
func TestAdapterUnderWrappersRunsOnce(t *testing.T) {
	e := newEnv(t)
	r := gin.New()
	r.Use(auth)
	r.POST("/v1/payments", e.idem(idemgin.Options{}), e.createPayment)
	for _, tc := range []struct {
		name    string
		handler http.Handler
	}{
		{"otelhttp", otelhttp.NewHandler(r, "payments")},
		{"logging", logging(r)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			t.Cleanup(srv.Close)
			tenant := "t-gin-wrapped-" + tc.name
			var wg sync.WaitGroup
			for range 20 {
				wg.Go(func() {
					got := send(t, srv, "POST", "/v1/payments", tenant, "k-gin-wrapped-00000001", `{"amount": 90, "currency": "EUR", "to": "acc_1"}`)
					if got.status != http.StatusCreated && got.status != http.StatusConflict {
						t.Errorf("a duplicate: %s, want 201 or 409", got)
					}
				})
			}
			wg.Wait()
			if n := e.count("payments", tenant); n != 1 {
				t.Errorf("%d payments for 20 parallel duplicates, want 1", n)
			}
		})
	}
}
