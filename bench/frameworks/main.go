// Command frameworks is the benchmark server of the framework adapters: benchserver's variants
// (bench/internal/benchsrv), among them the net/http middleware at /mw/v1/payments, and the
// same operation through the echo and gin adapters, on the same pool, the same runtime
// configuration (baseline.MiddlewareRuntime) and the same business code
// (baseline.CreatePayment):
//
//	/echo/v1/payments    POST: idemecho.Middleware on the route, an echo handler that binds the
//	                     body with c.Bind, takes its transaction with idemecho.TxFrom and answers
//	                     with c.JSONBlob
//	/gin/v1/payments     POST: idemgin.Middleware on the route, a gin handler that binds with
//	                     c.ShouldBindJSON, idemgin.TxFrom, c.Data
//	/huma/v1/payments    POST: idemhuma.Middleware for a Huma API on Go's ServeMux (humago), a
//	                     Huma handler whose input Huma binds and validates, runtime.TxFrom,
//	                     the body as raw bytes
//	/_bench/frameworks   GET: 200, so benchdrive runs the adapters' variants against this server
//
// and, on fasthttp with a listener of its own (-fiber-addr; benchdrive -fiber-url), a fiber app:
//
//	/v1/payments         POST: idemfiber.Middleware on the route, a fiber handler that binds
//	                     with c.BodyParser, idemfiber.TxFrom, c.Send
//
// It is a module of its own so that idemgen's module does not depend on echo, gin, fiber or Huma.
// bench/frameworks/run.sh builds it and drives it with benchdrive (make bench-frameworks).
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	idemecho "github.com/idemgen/idemgen/adapters/echo"
	idemfiber "github.com/idemgen/idemgen/adapters/fiber"
	idemgin "github.com/idemgen/idemgen/adapters/gin"
	idemhuma "github.com/idemgen/idemgen/adapters/huma"
	"github.com/idemgen/idemgen/bench/internal/baseline"
	"github.com/idemgen/idemgen/bench/internal/benchsrv"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	conns := flag.Int("conns", 64, "database pool size")
	fiberAddr := flag.String("fiber-addr", "", "listen address of the fiber app (fasthttp); empty: no fiber app")
	flag.Parse()
	mount := func(mux *http.ServeMux, pool *pgxpool.Pool) error {
		if *fiberAddr != "" {
			app, err := fiberServer(pool)
			if err != nil {
				return err
			}
			go func() { log.Fatalf("frameworks: fiber: %v", app.Listen(*fiberAddr)) }()
		}
		return mountNetHTTP(mux, pool)
	}
	if err := benchsrv.Run(benchsrv.Options{Addr: *addr, Conns: int32(*conns), Mount: mount}); err != nil {
		log.Fatalf("frameworks: %v", err)
	}
}

// mountNetHTTP adds the net/http adapters' variants and the probe that announces them.
func mountNetHTTP(mux *http.ServeMux, pool *pgxpool.Pool) error {
	e, err := echoServer(pool)
	if err != nil {
		return err
	}
	g, err := ginServer(pool)
	if err != nil {
		return err
	}
	mux.Handle("/echo/", http.StripPrefix("/echo", e))
	h, err := humaServer(pool)
	if err != nil {
		return err
	}
	mux.Handle("/gin/", http.StripPrefix("/gin", g))
	mux.Handle("/huma/", http.StripPrefix("/huma", h))
	mux.HandleFunc("GET /_bench/frameworks", func(http.ResponseWriter, *http.Request) {})
	return nil
}

func echoServer(pool *pgxpool.Pool) (http.Handler, error) {
	rt, err := baseline.MiddlewareRuntime(pool)
	if err != nil {
		return nil, err
	}
	idem, err := idemecho.Middleware[pgstore.DBTX](rt, api.Routes(), idemecho.Options{})
	if err != nil {
		return nil, err
	}
	e := echo.New()
	e.POST("/v1/payments", func(c echo.Context) error {
		t, _ := baseline.Tenant(c.Request())
		var req baseline.PaymentRequest
		if err := c.Bind(&req); err != nil {
			return err
		}
		tx, ok := idemecho.TxFrom[pgstore.DBTX](c)
		if !ok {
			return echo.NewHTTPError(http.StatusInternalServerError, "no idempotency transaction")
		}
		body, err := baseline.CreatePayment(c.Request().Context(), tx, t, req)
		if err != nil {
			return err
		}
		return c.JSONBlob(http.StatusCreated, body)
	}, idem)
	return e, nil
}

func ginServer(pool *pgxpool.Pool) (http.Handler, error) {
	rt, err := baseline.MiddlewareRuntime(pool)
	if err != nil {
		return nil, err
	}
	idem, err := idemgin.Middleware[pgstore.DBTX](rt, api.Routes(), idemgin.Options{})
	if err != nil {
		return nil, err
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/v1/payments", idem, func(c *gin.Context) {
		t, _ := baseline.Tenant(c.Request)
		var req baseline.PaymentRequest
		if err := c.ShouldBindJSON(&req); err != nil {
			c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			return
		}
		tx, ok := idemgin.TxFrom[pgstore.DBTX](c)
		if !ok {
			c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "no idempotency transaction"})
			return
		}
		body, err := baseline.CreatePayment(c.Request.Context(), tx, t, req)
		if err != nil {
			c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "store error"})
			return
		}
		c.Data(http.StatusCreated, "application/json", body)
	})
	return r, nil
}

func fiberServer(pool *pgxpool.Pool) (*fiber.App, error) {
	rt, err := baseline.MiddlewareRuntime(pool)
	if err != nil {
		return nil, err
	}
	idem, err := idemfiber.Middleware[pgstore.DBTX](rt, api.Routes(), idemfiber.Options{})
	if err != nil {
		return nil, err
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Post("/v1/payments", idem, func(c *fiber.Ctx) error {
		var req baseline.PaymentRequest
		if err := c.BodyParser(&req); err != nil {
			return fiber.NewError(http.StatusBadRequest, err.Error())
		}
		tx, ok := idemfiber.TxFrom[pgstore.DBTX](c)
		if !ok {
			return fiber.NewError(http.StatusInternalServerError, "no idempotency transaction")
		}
		tenant, _ := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
		body, err := baseline.CreatePayment(c.UserContext(), tx, strings.Clone(tenant), req)
		if err != nil {
			return err
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Status(http.StatusCreated).Send(body)
	})
	return app, nil
}

func humaServer(pool *pgxpool.Pool) (http.Handler, error) {
	rt, err := baseline.MiddlewareRuntime(pool)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	a := humago.New(mux, huma.DefaultConfig("bench", "1.0.0"))
	idem, err := idemhuma.Middleware[pgstore.DBTX](rt, api.Routes(), idemhuma.Options{})
	if err != nil {
		return nil, err
	}
	a.UseMiddleware(idem)
	type output struct {
		ContentType string `header:"Content-Type"`
		Body        []byte
	}
	huma.Register(a, huma.Operation{OperationID: "createPayment", Method: http.MethodPost, Path: "/v1/payments", DefaultStatus: http.StatusCreated,
		Extensions: map[string]any{idemhuma.Extension: true}},
		func(ctx context.Context, in *struct {
			Authorization string `header:"Authorization"`
			Body          baseline.PaymentRequest
		}) (*output, error) {
			tx, ok := runtime.TxFrom[pgstore.DBTX](ctx)
			if !ok {
				return nil, huma.Error500InternalServerError("no idempotency transaction")
			}
			body, err := baseline.CreatePayment(ctx, tx, strings.TrimPrefix(in.Authorization, "Bearer "), in.Body)
			if err != nil {
				return nil, err
			}
			return &output{ContentType: "application/json", Body: body}, nil
		})
	return mux, nil
}
