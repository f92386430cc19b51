package stacks

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/gin-gonic/gin"
	fiberv2 "github.com/gofiber/fiber/v2"
	adaptorv2 "github.com/gofiber/fiber/v2/middleware/adaptor"
	fiberv3 "github.com/gofiber/fiber/v3"
	adaptorv3 "github.com/gofiber/fiber/v3/middleware/adaptor"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	idemecho "github.com/idemgen/idemgen/adapters/echo"
	idemfiber "github.com/idemgen/idemgen/adapters/fiber"
	idemfiberv3 "github.com/idemgen/idemgen/adapters/fiberv3"
	idemgin "github.com/idemgen/idemgen/adapters/gin"
	idemhuma "github.com/idemgen/idemgen/adapters/huma"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

const payment = `{"amount": 90, "currency": "EUR", "to": "acc_1"}`

// outcome is what 20 parallel duplicates of a new key must come to through a way in.
type outcome int

const (
	// once: the handler runs once (201), the duplicates get 409 or the replay, one payment,
	// and a retry afterwards is the replay.
	once outcome = iota
	// refused: a setup idemgen cannot guard, refused loudly (500 problem internal): the
	// handler runs at most once (fiber's adaptor.FiberApp shows the misuse only by its first
	// success) and never again, nothing is stored.
	refused
)

// TestEveryWayIn is the done-when check of issue 36: 20 parallel duplicates of a new key
// through every documented way into net/http, echo, gin, fiber (v2, v3) and Huma, under
// otelhttp too, execute once; through the bridges idemgen cannot guard (echo.WrapMiddleware,
// a gin shim, fiber's adaptor.HTTPMiddleware and adaptor.FiberApp, v2 and v3) they are refused
// loudly, before running or, where only the first run shows the misuse, after at most one run;
// nothing panics.
func TestEveryWayIn(t *testing.T) {
	pool := pgtest.NewPool(t, 60)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := conformance.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: conformance.TenantOf, Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, pool: pool, rt: rt}
	otel := func(h http.Handler) http.Handler { return otelhttp.NewHandler(h, "payments") }
	plain := func(h http.Handler) http.Handler { return h }
	for _, tc := range []struct {
		name  string
		want  outcome
		serve func(calls *atomic.Int64) string // the base URL
	}{
		{"net/http Middleware around ServeMux", once, func(c *atomic.Int64) string { return s.netHTTP(c, plain, plain) }},
		{"net/http otelhttp around Middleware", once, func(c *atomic.Int64) string { return s.netHTTP(c, otel, plain) }},
		{"net/http Middleware around otelhttp", once, func(c *atomic.Int64) string { return s.netHTTP(c, plain, otel) }},
		{"echo adapter", once, func(c *atomic.Int64) string { return s.echo(c, plain, false) }},
		{"echo adapter under otelhttp", once, func(c *atomic.Int64) string { return s.echo(c, otel, false) }},
		{"echo WrapMiddleware", refused, func(c *atomic.Int64) string { return s.echo(c, plain, true) }},
		{"echo WrapMiddleware under otelhttp", refused, func(c *atomic.Int64) string { return s.echo(c, otel, true) }},
		{"gin adapter", once, func(c *atomic.Int64) string { return s.gin(c, plain, false) }},
		{"gin adapter under otelhttp", once, func(c *atomic.Int64) string { return s.gin(c, otel, false) }},
		{"gin shim", refused, func(c *atomic.Int64) string { return s.gin(c, plain, true) }},
		{"gin shim under otelhttp", refused, func(c *atomic.Int64) string { return s.gin(c, otel, true) }},
		{"fiber v2 adapter on the route", once, func(c *atomic.Int64) string { return s.fiber2(c, "route") }},
		{"fiber v2 adapter on a group", once, func(c *atomic.Int64) string { return s.fiber2(c, "group") }},
		{"fiber v2 adapter with Use", once, func(c *atomic.Int64) string { return s.fiber2(c, "use") }},
		{"fiber v2 adaptor.HTTPMiddleware", refused, func(c *atomic.Int64) string { return s.fiber2(c, "http-middleware") }},
		{"fiber v2 adaptor.HTTPMiddleware under otelhttp", refused, func(c *atomic.Int64) string { return s.fiber2(c, "http-middleware-otel") }},
		{"fiber v2 adaptor.FiberApp behind Middleware", refused, func(c *atomic.Int64) string { return s.fiberApp2(c, plain) }},
		{"fiber v2 adaptor.FiberApp behind Middleware under otelhttp", refused, func(c *atomic.Int64) string { return s.fiberApp2(c, otel) }},
		{"fiber v3 adapter on the route", once, func(c *atomic.Int64) string { return s.fiber3(c, "route") }},
		{"fiber v3 adapter on a group", once, func(c *atomic.Int64) string { return s.fiber3(c, "group") }},
		{"fiber v3 adapter with Use", once, func(c *atomic.Int64) string { return s.fiber3(c, "use") }},
		{"fiber v3 adaptor.HTTPMiddleware", refused, func(c *atomic.Int64) string { return s.fiber3(c, "http-middleware") }},
		{"fiber v3 adaptor.HTTPMiddleware under otelhttp", refused, func(c *atomic.Int64) string { return s.fiber3(c, "http-middleware-otel") }},
		{"fiber v3 adaptor.FiberApp behind Middleware", refused, func(c *atomic.Int64) string { return s.fiberApp3(c, plain) }},
		{"fiber v3 adaptor.FiberApp behind Middleware under otelhttp", refused, func(c *atomic.Int64) string { return s.fiberApp3(c, otel) }},
		{"Huma API middleware", once, func(c *atomic.Int64) string { return s.huma(c, plain, false) }},
		{"Huma operation middleware", once, func(c *atomic.Int64) string { return s.huma(c, plain, true) }},
		{"Huma API middleware under otelhttp", once, func(c *atomic.Int64) string { return s.huma(c, otel, false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := &atomic.Int64{}
			base := tc.serve(calls)
			tenant := "t-" + uuid.NewString()[:12]
			records := s.records()
			statuses := parallel(t, base, tenant, "k-stacks-"+uuid.NewString()[:12])
			payments := s.payments(tenant)
			switch tc.want {
			case once:
				for _, st := range statuses {
					if st != 201 && st != 409 {
						t.Errorf("a duplicate: %d, want 201 or 409", st)
					}
				}
				if calls.Load() != 1 || payments != 1 {
					t.Errorf("20 parallel duplicates ran the handler %d times and made %d payments, want 1 and 1", calls.Load(), payments)
				}
			case refused:
				for _, st := range statuses {
					if st != 500 && st != 409 {
						t.Errorf("a duplicate: %d, want 500 (refused) or 409", st)
					}
				}
				ran := calls.Load()
				if ran > 1 || payments > 1 {
					t.Errorf("20 parallel duplicates ran the handler %d times and made %d payments, want at most 1", ran, payments)
				}
				for _, st := range parallel(t, base, tenant, "k-stacks-"+uuid.NewString()[:12]) {
					if st != 500 {
						t.Errorf("once refused, a duplicate: %d, want 500", st)
					}
				}
				if calls.Load() != ran {
					t.Errorf("once refused, the handler ran %d more times", calls.Load()-ran)
				}
				if n := s.records() - records; n != 0 {
					t.Errorf("%d records stored for a setup that cannot be guarded", n)
				}
			}
		})
	}
}

type stack struct {
	t    *testing.T
	pool *pgxpool.Pool
	rt   *runtime.Runtime
}

// middleware is a fresh runtime.Middleware: what it learns about misuse is its own.
func (s *stack) middleware() func(http.Handler) http.Handler {
	mw, err := runtime.Middleware[pgstore.DBTX](s.rt, api.Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return mw
}

// pay is every stack's business code: one payment through db for the request's tenant.
func (s *stack) pay(ctx context.Context, db pgstore.DBTX, authorization string) (string, error) {
	tenant, _ := strings.CutPrefix(authorization, "Bearer ")
	id := "pay_" + uuid.NewString()
	_, err := db.Exec(ctx, `INSERT INTO payments (id, tenant, amount, currency, to_account) VALUES ($1, $2, 90, 'EUR', 'acc_1')`, id, tenant)
	return `{"id":"` + id + `"}`, err
}

var errNoTx = errors.New("no idempotency transaction")

func (s *stack) serve(h http.Handler) string {
	srv := httptest.NewServer(h)
	s.t.Cleanup(srv.Close)
	return srv.URL
}

func (s *stack) netHTTP(calls *atomic.Int64, outer, inner func(http.Handler) http.Handler) string {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/payments", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		tx, ok := runtime.TxFrom[pgstore.DBTX](r.Context())
		if !ok {
			http.Error(w, errNoTx.Error(), http.StatusInternalServerError)
			return
		}
		body, err := s.pay(r.Context(), tx, r.Header.Get("Authorization"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	})
	return s.serve(outer(s.middleware()(inner(mux))))
}

func (s *stack) echo(calls *atomic.Int64, outer func(http.Handler) http.Handler, bridge bool) string {
	e := echo.New()
	handler := func(c echo.Context) error {
		calls.Add(1)
		tx, ok := idemecho.TxFrom[pgstore.DBTX](c)
		if !ok {
			return errNoTx
		}
		body, err := s.pay(c.Request().Context(), tx, c.Request().Header.Get("Authorization"))
		if err != nil {
			return err
		}
		return c.JSONBlob(http.StatusCreated, []byte(body))
	}
	if bridge {
		mw := s.middleware()
		e.POST("/v1/payments", handler, echo.WrapMiddleware(func(h http.Handler) http.Handler { return outer(mw(h)) }))
		return s.serve(e)
	}
	idem, err := idemecho.Middleware[pgstore.DBTX](s.rt, api.Routes(), idemecho.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	e.POST("/v1/payments", handler, idem)
	return s.serve(outer(e))
}

func (s *stack) gin(calls *atomic.Int64, outer func(http.Handler) http.Handler, shim bool) string {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	handler := func(c *gin.Context) {
		calls.Add(1)
		tx, ok := idemgin.TxFrom[pgstore.DBTX](c)
		if !ok {
			c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": errNoTx.Error()})
			return
		}
		body, err := s.pay(c.Request.Context(), tx, c.GetHeader("Authorization"))
		if err != nil {
			c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			return
		}
		c.Data(http.StatusCreated, "application/json", []byte(body))
	}
	if shim {
		mw := s.middleware()
		r.POST("/v1/payments", func(c *gin.Context) {
			outer(mw(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				c.Request = req
				c.Next()
			}))).ServeHTTP(c.Writer, c.Request)
			c.Abort()
		}, handler)
		return s.serve(r)
	}
	idem, err := idemgin.Middleware[pgstore.DBTX](s.rt, api.Routes(), idemgin.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	r.POST("/v1/payments", idem, handler)
	return s.serve(outer(r))
}

// listen serves a fiber app (any version) on its own fasthttp listener.
func (s *stack) listen(serve func(net.Listener) error, shutdown func() error) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatal(err)
	}
	go func() { _ = serve(ln) }()
	s.t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		_ = shutdown()
	})
	return "http://" + ln.Addr().String()
}

func (s *stack) fiber2Handler(calls *atomic.Int64) fiberv2.Handler {
	return func(c *fiberv2.Ctx) error {
		calls.Add(1)
		tx, ok := idemfiber.TxFrom[pgstore.DBTX](c)
		if !ok {
			return errNoTx
		}
		body, err := s.pay(c.UserContext(), tx, c.Get("Authorization"))
		if err != nil {
			return err
		}
		c.Set("Content-Type", "application/json")
		return c.Status(http.StatusCreated).SendString(body)
	}
}

func (s *stack) fiber2(calls *atomic.Int64, how string) string {
	app := fiberv2.New(fiberv2.Config{DisableStartupMessage: true})
	h := s.fiber2Handler(calls)
	idem, err := idemfiber.Middleware[pgstore.DBTX](s.rt, api.Routes(), idemfiber.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	switch how {
	case "route":
		app.Post("/v1/payments", idem, h)
	case "group":
		app.Group("/v1", idem).Post("/payments", h)
	case "use":
		app.Use(idem)
		app.Post("/v1/payments", h)
	case "http-middleware":
		app.Post("/v1/payments", adaptorv2.HTTPMiddleware(s.middleware()), h)
	case "http-middleware-otel":
		mw := s.middleware()
		app.Post("/v1/payments", adaptorv2.HTTPMiddleware(func(h http.Handler) http.Handler { return otelhttp.NewHandler(mw(h), "payments") }), h)
	}
	return s.listen(app.Listener, func() error { return app.ShutdownWithTimeout(time.Second) })
}

// fiberApp2 serves a fiber app behind the net/http Middleware (adaptor.FiberApp): its handler
// cannot reach the transaction, so it writes through the pool.
func (s *stack) fiberApp2(calls *atomic.Int64, outer func(http.Handler) http.Handler) string {
	app := fiberv2.New(fiberv2.Config{DisableStartupMessage: true})
	app.Post("/v1/payments", func(c *fiberv2.Ctx) error {
		calls.Add(1)
		body, err := s.pay(context.Background(), s.pool, c.Get("Authorization"))
		if err != nil {
			return err
		}
		return c.Status(http.StatusCreated).SendString(body)
	})
	return s.serve(outer(s.middleware()(adaptorv2.FiberApp(app))))
}

func (s *stack) fiber3Handler(calls *atomic.Int64) fiberv3.Handler {
	return func(c fiberv3.Ctx) error {
		calls.Add(1)
		tx, ok := idemfiberv3.TxFrom[pgstore.DBTX](c)
		if !ok {
			return errNoTx
		}
		body, err := s.pay(c.Context(), tx, c.Get("Authorization"))
		if err != nil {
			return err
		}
		c.Set("Content-Type", "application/json")
		return c.Status(http.StatusCreated).SendString(body)
	}
}

func (s *stack) fiber3(calls *atomic.Int64, how string) string {
	app := fiberv3.New()
	h := s.fiber3Handler(calls)
	idem, err := idemfiberv3.Middleware[pgstore.DBTX](s.rt, api.Routes(), idemfiberv3.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	switch how {
	case "route":
		app.Post("/v1/payments", idem, h)
	case "group":
		app.Group("/v1", idem).Post("/payments", h)
	case "use":
		app.Use(idem)
		app.Post("/v1/payments", h)
	case "http-middleware":
		app.Post("/v1/payments", adaptorv3.HTTPMiddleware(s.middleware()), h)
	case "http-middleware-otel":
		mw := s.middleware()
		app.Post("/v1/payments", adaptorv3.HTTPMiddleware(func(h http.Handler) http.Handler { return otelhttp.NewHandler(mw(h), "payments") }), h)
	}
	return s.listen(func(ln net.Listener) error {
		return app.Listener(ln, fiberv3.ListenConfig{DisableStartupMessage: true})
	},
		func() error { return app.ShutdownWithTimeout(time.Second) })
}

func (s *stack) fiberApp3(calls *atomic.Int64, outer func(http.Handler) http.Handler) string {
	app := fiberv3.New()
	app.Post("/v1/payments", func(c fiberv3.Ctx) error {
		calls.Add(1)
		body, err := s.pay(context.Background(), s.pool, c.Get("Authorization"))
		if err != nil {
			return err
		}
		return c.Status(http.StatusCreated).SendString(body)
	})
	return s.serve(outer(s.middleware()(adaptorv3.FiberApp(app))))
}

func (s *stack) huma(calls *atomic.Int64, outer func(http.Handler) http.Handler, perOperation bool) string {
	mux := http.NewServeMux()
	a := humago.New(mux, huma.DefaultConfig("payments", "1.0.0"))
	idem, err := idemhuma.Middleware[pgstore.DBTX](s.rt, api.Routes(), idemhuma.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	op := huma.Operation{OperationID: "createPayment", Method: http.MethodPost, Path: "/v1/payments", DefaultStatus: http.StatusCreated,
		Extensions: map[string]any{idemhuma.Extension: true}}
	if perOperation {
		op.Middlewares = huma.Middlewares{idem}
	} else {
		a.UseMiddleware(idem)
	}
	type output struct {
		ContentType string `header:"Content-Type"`
		Body        []byte
	}
	huma.Register(a, op, func(ctx context.Context, in *struct {
		Authorization string `header:"Authorization"`
		Body          struct {
			Amount   int64  `json:"amount"`
			Currency string `json:"currency"`
			To       string `json:"to"`
		}
	}) (*output, error) {
		calls.Add(1)
		tx, ok := runtime.TxFrom[pgstore.DBTX](ctx)
		if !ok {
			return nil, errNoTx
		}
		body, err := s.pay(ctx, tx, in.Authorization)
		if err != nil {
			return nil, err
		}
		return &output{ContentType: "application/json", Body: []byte(body)}, nil
	})
	return s.serve(outer(mux))
}

func (s *stack) payments(tenant string) int {
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM payments WHERE tenant = $1`, tenant).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// records counts the stored idempotency records.
func (s *stack) records() int {
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_records`).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// parallel sends 20 copies of one request at once and returns their statuses.
func parallel(t *testing.T, base, tenant, key string) []int {
	var wg sync.WaitGroup
	out := make([]int, 20)
	for i := range out {
		wg.Go(func() {
			req, err := http.NewRequest("POST", base+"/v1/payments", strings.NewReader(payment))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+tenant)
			req.Header.Set("Idempotency-Key", key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			out[i] = resp.StatusCode
		})
	}
	wg.Wait()
	return out
}

// logger sends the runtime's logs to the test log (shown with -v or on failure).
func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
