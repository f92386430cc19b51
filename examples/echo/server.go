package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	idemecho "github.com/idemgen/idemgen/adapters/echo"
	"github.com/idemgen/idemgen/examples/echo/idem"
	nulls "github.com/idemgen/idemgen/golden/nulls"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// NewServer returns the payments API on echo. records is the idempotency store (main's is
// pgstore.New over pool; the tests choose theirs), whose tables must exist, and so must the
// pool's business tables (conformance.Migrate).
func NewServer(pool *pgxpool.Pool, records store.Transactional[pgstore.DBTX], provider *conformance.Provider, log *slog.Logger) (*echo.Echo, error) {
	// idemgen: the runtime over the idempotency store, keyed by the tenant authenticate put in the
	// echo.Context, behind the echo adapter over the generated operation table.
	idempotent, err := idemecho.New[pgstore.DBTX](runtime.Config{Store: records, Scope: idemecho.ScopeKey("tenant"), Logger: log}, append(idem.Routes(), nulls.Routes()...), idemecho.Options{})
	if err != nil {
		return nil, err
	}

	s := &Service{pool: pool, provider: provider}
	e := echo.New()
	e.HTTPErrorHandler = renderError
	// The cases' test knobs (X-Test-Delay, X-Test-Fail; a net/http middleware of the test
	// fixture), the service's own authentication, then idemgen's adapter (idemgen: one
	// argument): it guards the routes of the spec's marked operations and lets the others by.
	e.Use(echo.WrapMiddleware(conformance.WithKnobs), authenticate, idempotent)

	e.POST("/v1/payments", s.CreatePayment)
	e.GET("/v1/payments/:id", s.GetPayment)
	e.POST("/v1/payments/:id/refunds", s.CreateRefund)
	e.POST("/v1/orders", s.CreateOrder)
	e.POST("/v1/transfers", s.CreateTransfer)
	e.POST("/v1/charges", s.CreateCharge)
	e.POST("/v1/provider-charges", s.CreateProviderCharge)
	// The tips API (testdata/specs/nulls.yaml, its operation table golden/nulls), behind the
	// same adapter: testdata/cases-nulls.
	e.POST("/v1/tips", s.CreateTip)
	e.PATCH("/v1/tips/:id", s.UpdateTip)
	e.GET("/v1/tips/:id", echo.WrapHandler(conformance.GetTip(pool)))
	e.GET("/_effects", echo.WrapHandler(conformance.Effects(pool, provider)))
	return e, nil
}

// authenticate is the service's authentication middleware: `Authorization: Bearer <tenant>`
// names the tenant, which it puts in the context as "tenant". Requests without it go on: the
// handlers that need a tenant refuse them.
func authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if tenant, err := conformance.TenantOf(c.Request()); err == nil {
			c.Set("tenant", tenant)
		}
		return next(c)
	}
}

// tenantOf is the tenant authenticate found; an error when there is none.
func tenantOf(c echo.Context) (string, error) {
	tenant, _ := c.Get("tenant").(string)
	if tenant == "" {
		return "", errUnauthenticated
	}
	return tenant, nil
}

// apiError is the service's error: handlers return it, renderError writes it.
type apiError struct {
	Status int
	Name   string // the problem type's last segment
	Title  string
	Detail string
}

func (e *apiError) Error() string { return e.Title + ": " + e.Detail }

var errUnauthenticated = &apiError{http.StatusUnauthorized, "unauthenticated", "Unauthenticated", "no Authorization: Bearer <tenant> header"}

// failure is an injected failure (X-Test-Fail) after the work was done.
type failure struct{ status int }

func (f failure) Error() string { return http.StatusText(f.status) }

// renderError is the service's HTTPErrorHandler: every error becomes an RFC 9457 problem of
// the service's own, echo's HTTPErrors (a bind error, an unknown route) included.
func renderError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if f, ok := err.(failure); ok {
		conformance.WriteFailure(c.Response(), f.status)
		return
	}
	ae, ok := err.(*apiError)
	if !ok {
		ae = &apiError{http.StatusInternalServerError, "internal", "Internal error", "the request failed"}
		if he, isHTTP := err.(*echo.HTTPError); isHTTP {
			title := http.StatusText(he.Code)
			ae = &apiError{he.Code, strings.ReplaceAll(strings.ToLower(title), " ", "-"), title, fmt.Sprint(he.Message)}
		}
	}
	conformance.WriteProblem(c.Response(), ae.Status, ae.Name, ae.Title, ae.Detail)
}
