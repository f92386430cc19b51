package idemfiber_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/google/uuid"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// TestHTTPMiddlewareIsRefused: fiber's documented way to run net/http middleware,
// adaptor.HTTPMiddleware, runs the fiber handler only after the middleware has returned, so
// idemgen's net/http middleware cannot guard it. Directly, under otelhttp and under a logging
// middleware, it is refused before anything runs: 20 parallel duplicates all get 500
// `internal`, the handler never runs, nothing is stored, and the log names adapters/fiber.
func TestHTTPMiddlewareIsRefused(t *testing.T) {
	e := newEnv(t)
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(e.pool, pgstore.Options{}), Scope: conformance.TenantOf, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := runtime.Middleware[pgstore.DBTX](rt, api.Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mw   func(http.Handler) http.Handler
	}{
		{"adaptor.HTTPMiddleware", mw},
		{"under otelhttp", func(h http.Handler) http.Handler { return otelhttp.NewHandler(mw(h), "payments") }},
		{"under a logging middleware", func(h http.Handler) http.Handler { return logging(mw(h)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := newApp()
			app.Use(auth)
			app.Post("/v1/payments", adaptor.HTTPMiddleware(tc.mw), e.createPayment)
			base := serve(t, app)
			e.calls.Store(0)
			before := e.records()
			for _, s := range parallel(t, 20, base, "/v1/payments", "t-fiber-misuse", "k-fiber-misuse-"+uuid.NewString()[:8], payment) {
				if s != "500 internal" {
					t.Errorf("a duplicate: %s, want 500 internal", s)
				}
			}
			if n := e.calls.Load(); n != 0 {
				t.Errorf("the handler ran %d times, want 0", n)
			}
			if n := e.records() - before; n != 0 {
				t.Errorf("%d idempotency records, want none", n)
			}
			if n := e.count("payments", "t-fiber-misuse"); n != 0 {
				t.Errorf("%d payments, want none", n)
			}
			if !strings.Contains(e.logs.String(), "adapters/fiber") {
				t.Errorf("the log does not name adapters/fiber:\n%s", e.logs)
			}
		})
	}
}

// logging is a logging middleware as services write their own: a status recorder embedding
// the writer it wraps, with no Unwrap method.
func logging(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		_ = fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, rec.status)
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

// TestFiberAppBehindTheMiddleware: a fiber app served behind idemgen's net/http middleware
// through fiber's adaptor.FiberApp runs its handlers on a fasthttp request of its own, whose
// context is not the request's: they can never take the transaction, and no router pattern
// names the operation. Directly, under otelhttp (outside and inside) and under a logging
// middleware, 20 parallel duplicates of a new key run the handler at most once (its success,
// which could not be stored with its writes, is answered 500 and the key released), and from
// then on every request is refused before anything runs; nothing is stored, and the log names
// the adapter to use.
func TestFiberAppBehindTheMiddleware(t *testing.T) {
	e := newEnv(t)
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(e.pool, pgstore.Options{}), Scope: conformance.TenantOf, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		wrap func(mw func(http.Handler) http.Handler, app http.Handler) http.Handler
	}{
		{"direct", func(mw func(http.Handler) http.Handler, app http.Handler) http.Handler { return mw(app) }},
		{"otelhttp outside", func(mw func(http.Handler) http.Handler, app http.Handler) http.Handler {
			return otelhttp.NewHandler(mw(app), "payments")
		}},
		{"otelhttp inside", func(mw func(http.Handler) http.Handler, app http.Handler) http.Handler {
			return mw(otelhttp.NewHandler(app, "payments"))
		}},
		{"under a logging middleware", func(mw func(http.Handler) http.Handler, app http.Handler) http.Handler { return logging(mw(app)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mw, err := runtime.Middleware[pgstore.DBTX](rt, api.Routes(), runtime.MiddlewareOptions{})
			if err != nil {
				t.Fatal(err)
			}
			app := newApp()
			app.Post("/v1/payments", e.poolPayment)
			srv := httptest.NewServer(tc.wrap(mw, adaptor.FiberApp(app)))
			t.Cleanup(srv.Close)
			tenant := "t-fiberapp-" + strings.ReplaceAll(tc.name, " ", "-")
			e.calls.Store(0)
			before := e.records()
			for _, s := range parallel(t, 20, srv.URL, "/v1/payments", tenant, "k-fiberapp-"+uuid.NewString()[:8], payment) {
				if s != "500 internal" && s != "409 in-flight" {
					t.Errorf("a duplicate: %s, want 500 internal or 409 in-flight", s)
				}
			}
			if n := e.calls.Load(); n > 1 {
				t.Errorf("the handler ran %d times, want at most 1", n)
			}
			ran := e.calls.Load()
			for _, s := range parallel(t, 20, srv.URL, "/v1/payments", tenant, "k-fiberapp-"+uuid.NewString()[:8], payment) {
				if s != "500 internal" {
					t.Errorf("after the misuse showed: %s, want 500 internal", s)
				}
			}
			if n := e.calls.Load(); n != ran {
				t.Errorf("the handler ran %d more times once the misuse had shown, want 0", n-ran)
			}
			if n := e.records() - before; n != 0 {
				t.Errorf("%d idempotency records, want none", n)
			}
			if n := e.count("payments", tenant); n > 1 {
				t.Errorf("%d payments, want at most 1", n)
			}
			if logs := e.logs.String(); !strings.Contains(logs, "adaptor.FiberApp") || !strings.Contains(logs, "adapters/fiber") {
				t.Errorf("the log does not say what happened and which adapter to use:\n%s", logs)
			}
		})
	}
}

// poolPayment is a fiber handler behind adaptor.FiberApp: c.UserContext() is not the request's,
// so it writes through the pool.
func (e *env) poolPayment(c *fiber.Ctx) error {
	e.calls.Add(1)
	tenant, _ := strings.CutPrefix(c.Get("Authorization"), "Bearer ")
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO payments (id, tenant, amount, currency, to_account) VALUES ($1, $2, 1, 'EUR', 'acc_1')`,
		"pay_"+uuid.NewString(), tenant); err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(map[string]string{"status": "created"})
}
