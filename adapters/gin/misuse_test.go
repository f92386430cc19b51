package idemgin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

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
	// shim is how a gin service mounts a net/http middleware without an adapter.
	shim := func(c *gin.Context) {
		mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.Request = r
			c.Next()
		})).ServeHTTP(c.Writer, c.Request)
		c.Abort()
	}
	handler := func(c *gin.Context) {
		e.calls.Add(1)
		c.JSON(http.StatusCreated, gin.H{"id": "pay_" + uuid.NewString()})
	}
	shimmed := gin.New()
	shimmed.POST("/v1/payments", shim, handler)
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
