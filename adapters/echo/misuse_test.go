package idemecho_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	idemecho "github.com/idemgen/idemgen/adapters/echo"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// TestNetHTTPMiddlewareInEchoIsRefused: runtime.Middleware mounted the net/http way on echo
// cannot keep the contract (echo.WrapMiddleware renders a handler's error after the middleware
// finished, so the middleware would store an empty 200 and replay it; around the whole Echo it
// would claim requests echo does not route). Each way is refused: 500 `internal` before the
// handler runs, nothing stored, and a log line naming the adapter; the same key then runs
// through the adapter as a new request.
func TestNetHTTPMiddlewareInEchoIsRefused(t *testing.T) {
	e := newEnv(t)
	// The runtime's scope here is a plain ScopeFunc: the misuse does not depend on it.
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(e.pool, pgstore.Options{}), Scope: conformance.TenantOf, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := runtime.Middleware[pgstore.DBTX](rt, api.Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A bind error returned by the handler: through echo.WrapMiddleware it is rendered only
	// after the middleware has finished, which would have stored an empty 200.
	bindError := func(c echo.Context) error {
		e.calls.Add(1)
		return echo.NewHTTPError(http.StatusBadRequest, "the service's own bind error")
	}
	wrapped := echo.New()
	wrapped.POST("/v1/payments", bindError, echo.WrapMiddleware(mw))
	// The same with a wrapper between echo's writer and idemgen's middleware.
	traced := echo.New()
	traced.POST("/v1/payments", bindError, echo.WrapMiddleware(func(h http.Handler) http.Handler { return otelhttp.NewHandler(mw(h), "payments") }))
	logged := echo.New()
	logged.POST("/v1/payments", bindError, echo.WrapMiddleware(func(h http.Handler) http.Handler { return logging(mw(h)) }))
	whole := echo.New()
	whole.POST("/v1/payments", bindError)
	adapter := echo.New()
	adapter.Use(auth)
	adapter.POST("/v1/payments", e.createPayment, e.idem(idemecho.Options{}))

	body := `{"amount": 90, "currency": "EUR", "to": "acc_1"}`
	for _, tc := range []struct {
		name    string
		handler http.Handler
		adapter string
	}{
		{"echo.WrapMiddleware", wrapped, "idemecho.Middleware"},
		{"echo.WrapMiddleware under otelhttp", traced, "idemecho.Middleware"},
		{"echo.WrapMiddleware under a logging middleware", logged, "idemecho.Middleware"},
		{"otelhttp around echo.WrapMiddleware", otelhttp.NewHandler(wrapped, "payments"), "idemecho.Middleware"},
		{"around the whole Echo", mw(whole), "idemecho.Middleware"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			t.Cleanup(srv.Close)
			key := "k-echo-misuse-" + uuid.NewString()[:8]
			before := e.records()
			got := send(t, srv, "POST", "/v1/payments", "t-echo-misuse", key, body)
			if got.status != http.StatusInternalServerError || got.problem() != "internal" {
				t.Errorf("%s: %s, want 500 internal", tc.name, got)
			}
			if again := send(t, srv, "POST", "/v1/payments", "t-echo-misuse", key, body); again.status == http.StatusOK || again.replayed() {
				t.Errorf("%s, retry: %s; an empty 200 or a replay means something was stored", tc.name, again)
			}
			if n := e.calls.Load(); n != 0 {
				t.Errorf("%s: the handler ran %d times, want 0", tc.name, n)
			}
			if !strings.Contains(e.logs.String(), tc.adapter) {
				t.Errorf("%s: the log does not name %s:\n%s", tc.name, tc.adapter, e.logs)
			}
			if n := e.records() - before; n != 0 {
				t.Errorf("%s: %d idempotency records, want none", tc.name, n)
			}
			// The same key through the adapter is a new request.
			asrv := httptest.NewServer(adapter)
			t.Cleanup(asrv.Close)
			if ok := send(t, asrv, "POST", "/v1/payments", "t-echo-misuse", key, body); ok.status != http.StatusCreated || ok.replayed() {
				t.Errorf("%s, then the adapter: %s, want 201", tc.name, ok)
			}
			e.calls.Store(0)
		})
	}
}

// TestLeaseMode: a lease-mode operation through the adapter gets its claim from the
// echo.Context (LeaseFrom), calls the provider once per key under a derived provider key, and
// writes its row in the transaction that completes the record (OnComplete).
func TestLeaseMode(t *testing.T) {
	e := newEnv(t)
	provider := conformance.NewProvider()
	es := echo.New()
	es.Use(auth)
	es.POST("/v1/provider-charges", func(c echo.Context) error {
		e.calls.Add(1)
		var req struct {
			Amount int64 `json:"amount"`
		}
		if err := c.Bind(&req); err != nil {
			return err
		}
		lease := idemecho.LeaseFrom(c)
		if lease == nil {
			return echo.NewHTTPError(http.StatusInternalServerError, "no lease")
		}
		tenant := c.Get("tenant").(string)
		pk, err := lease.ProviderKey(c.Request().Context(), "charge")
		if err != nil {
			return err
		}
		ref, err := provider.Charge(c.Request().Context(), tenant, pk, req.Amount)
		if err != nil {
			return err
		}
		id := "pc_" + lease.DeriveID("provider-charge")
		if !idemecho.OnComplete(c, func(ctx context.Context, db pgstore.DBTX) error {
			_, err := db.Exec(ctx, `INSERT INTO provider_charges (id, tenant, amount, provider_reference) VALUES ($1, $2, $3, $4)`, id, tenant, req.Amount, ref)
			return err
		}) {
			return echo.NewHTTPError(http.StatusInternalServerError, "not a lease-mode request")
		}
		return c.JSON(http.StatusCreated, map[string]string{"id": id, "provider_reference": ref})
	}, e.idem(idemecho.Options{}))
	srv := httptest.NewServer(es)
	t.Cleanup(srv.Close)
	const tenant = "t-echo-lease"
	first := send(t, srv, "POST", "/v1/provider-charges", tenant, "k-echo-lease-0000001", `{"amount": 700}`)
	again := send(t, srv, "POST", "/v1/provider-charges", tenant, "k-echo-lease-0000001", `{"amount": 700}`)
	if first.status != http.StatusCreated || again.body != first.body || !again.replayed() {
		t.Fatalf("first %s, retry %s: want 201 and its replay", first, again)
	}
	if calls := provider.Calls(tenant); calls != 1 || e.count("provider_charges", tenant) != 1 || e.calls.Load() != 1 {
		t.Errorf("provider calls %d, rows %d, handler runs %d: want 1, 1, 1", calls, e.count("provider_charges", tenant), e.calls.Load())
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

// opaque hides the writer it wraps from every look (no Unwrap, no field of the writer's type):
// only the behaviour shows the misuse.
type opaque struct {
	header      func() http.Header
	write       func([]byte) (int, error)
	writeHeader func(int)
}

func (o opaque) Header() http.Header         { return o.header() }
func (o opaque) Write(b []byte) (int, error) { return o.write(b) }
func (o opaque) WriteHeader(status int)      { o.writeHeader(status) }

// TestWrapMiddlewareBehindAnOpaqueWriterIsRefusedOnceSeen: with echo's writer out of sight,
// echo.WrapMiddleware shows itself when echo renders a handler's error into the writer the
// middleware handed on after the middleware has returned. That request got the runtime's 500
// (the service's 400 could not be stored); the log names the adapter; every later request is
// refused before the handler runs, and 20 parallel duplicates then run nothing.
func TestWrapMiddlewareBehindAnOpaqueWriterIsRefusedOnceSeen(t *testing.T) {
	e := newEnv(t)
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(e.pool, pgstore.Options{}), Scope: conformance.TenantOf, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := runtime.Middleware[pgstore.DBTX](rt, api.Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hidden := func(h http.Handler) http.Handler {
		inner := mw(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(opaque{w.Header, w.Write, w.WriteHeader}, r)
		})
	}
	es := echo.New()
	es.POST("/v1/payments", func(c echo.Context) error {
		e.calls.Add(1)
		return echo.NewHTTPError(http.StatusBadRequest, "the service's own bind error")
	}, echo.WrapMiddleware(hidden))
	srv := httptest.NewServer(es)
	t.Cleanup(srv.Close)
	body := `{"amount": 90, "currency": "EUR", "to": "acc_1"}`
	if first := send(t, srv, "POST", "/v1/payments", "t-opaque", "k-echo-opaque-0000001", body); first.status != http.StatusInternalServerError {
		t.Errorf("first: %s, want 500", first)
	}
	if !strings.Contains(e.logs.String(), "idemecho.Middleware") || !strings.Contains(e.logs.String(), "after the idempotency middleware had returned") {
		t.Errorf("the log does not name the misuse and idemecho.Middleware:\n%s", e.logs)
	}
	var wg sync.WaitGroup
	statuses := make(chan string, 20)
	for range 20 {
		wg.Go(func() {
			got := send(t, srv, "POST", "/v1/payments", "t-opaque", "k-echo-opaque-0000002", body)
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
	if n := e.records(); n != 0 {
		t.Errorf("%d idempotency records, want none", n)
	}
}

// TestAdapterUnderWrappersRunsOnce: the adapter under otelhttp and under a logging middleware
// around the whole Echo: 20 parallel duplicates of a new key make one payment, the others get
// 409 or the replay.
func TestAdapterUnderWrappersRunsOnce(t *testing.T) {
	e := newEnv(t)
	es := echo.New()
	es.Use(auth)
	es.POST("/v1/payments", e.createPayment, e.idem(idemecho.Options{}))
	for _, tc := range []struct {
		name    string
		handler http.Handler
	}{
		{"otelhttp", otelhttp.NewHandler(es, "payments")},
		{"logging", logging(es)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			t.Cleanup(srv.Close)
			tenant := "t-echo-wrapped-" + tc.name
			var wg sync.WaitGroup
			for range 20 {
				wg.Go(func() {
					got := send(t, srv, "POST", "/v1/payments", tenant, "k-echo-wrapped-0000001", `{"amount": 90, "currency": "EUR", "to": "acc_1"}`)
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
