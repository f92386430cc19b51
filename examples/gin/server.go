package main

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"

	idemgin "github.com/idemgen/idemgen/adapters/gin"
	"github.com/idemgen/idemgen/examples/gin/idem"
	nulls "github.com/idemgen/idemgen/golden/nulls"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// NewServer returns the payments API on gin. records is the idempotency store (main's is
// pgstore.New over pool; the tests choose theirs), whose tables must exist, and so must the
// pool's business tables (conformance.Migrate).
func NewServer(pool *pgxpool.Pool, records store.Transactional[pgstore.DBTX], provider *conformance.Provider, log *slog.Logger) (*gin.Engine, error) {
	// idemgen: the runtime over the idempotency store, keyed by the tenant authenticate put in c.Keys,
	// behind the gin adapter over the generated operation table; the service's error middleware
	// renders c.Errors inside the guard, so what is stored is what the client gets.
	idempotent, err := idemgin.New[pgstore.DBTX](runtime.Config{Store: records, Scope: idemgin.ScopeKey("tenant"), Logger: log}, append(idem.Routes(), nulls.Routes()...), idemgin.Options{Errors: renderErrors})
	if err != nil {
		return nil, err
	}

	s := &Service{pool: pool, provider: provider}
	r := gin.New()
	// The service's error rendering and authentication, the cases' test knobs (X-Test-Delay,
	// X-Test-Fail), then idemgen's adapter (idemgen: one argument): it guards the routes of the
	// spec's marked operations and lets the others by.
	r.Use(renderErrors, authenticate, knobs, idempotent)

	r.POST("/v1/payments", s.CreatePayment)
	r.GET("/v1/payments/:id", s.GetPayment)
	r.POST("/v1/payments/:id/refunds", s.CreateRefund)
	r.POST("/v1/orders", s.CreateOrder)
	r.POST("/v1/transfers", s.CreateTransfer)
	r.POST("/v1/charges", s.CreateCharge)
	r.POST("/v1/provider-charges", s.CreateProviderCharge)
	// The tips API (testdata/specs/nulls.yaml, its operation table golden/nulls), behind the
	// same adapter: testdata/cases-nulls.
	r.POST("/v1/tips", s.CreateTip)
	r.PATCH("/v1/tips/:id", s.UpdateTip)
	r.GET("/v1/tips/:id", gin.WrapH(conformance.GetTip(pool)))
	r.GET("/_effects", gin.WrapH(conformance.Effects(pool, provider)))
	return r, nil
}

// authenticate is the service's authentication middleware: `Authorization: Bearer <tenant>`
// names the tenant, which it puts in c.Keys as "tenant". Requests without it go on: the
// handlers that need a tenant refuse them.
func authenticate(c *gin.Context) {
	if tenant, err := conformance.TenantOf(c.Request); err == nil {
		c.Set("tenant", tenant)
	}
	c.Next()
}

// knobs applies the cases' test knobs, a net/http middleware of the test fixture; a knob it
// refuses is answered there and the chain stops.
func knobs(c *gin.Context) {
	ran := false
	conformance.WithKnobs(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		ran = true
		c.Request = r
		c.Next()
	})).ServeHTTP(c.Writer, c.Request)
	if !ran {
		c.Abort()
	}
}

// apiError is the service's error: handlers record it with c.Error, renderErrors writes it.
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

// renderErrors is the service's error middleware: after the chain, the last of c.Errors
// becomes an RFC 9457 problem of the service's own (a binding error a 400, anything it does not
// know a 500), unless the handler already answered.
func renderErrors(c *gin.Context) {
	c.Next()
	last := c.Errors.Last()
	if last == nil || c.Writer.Written() {
		return
	}
	var f failure
	if errors.As(last.Err, &f) {
		conformance.WriteFailure(c.Writer, f.status)
		return
	}
	var ae *apiError
	switch {
	case errors.As(last.Err, &ae):
	case last.IsType(gin.ErrorTypeBind):
		ae = &apiError{http.StatusBadRequest, "bad-request", "Bad request", last.Error()}
	default:
		ae = &apiError{http.StatusInternalServerError, "internal", "Internal error", "the request failed"}
	}
	conformance.WriteProblem(c.Writer, ae.Status, ae.Name, ae.Title, ae.Detail)
}

// tenantOf is the tenant authenticate found; an error when there is none.
func tenantOf(c *gin.Context) (string, error) {
	tenant := c.GetString("tenant")
	if tenant == "" {
		return "", errUnauthenticated
	}
	return tenant, nil
}
