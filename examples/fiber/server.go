package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/jackc/pgx/v5/pgxpool"

	idemfiber "github.com/idemgen/idemgen/adapters/fiber"
	"github.com/idemgen/idemgen/examples/fiber/idem"
	nulls "github.com/idemgen/idemgen/golden/nulls"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// NewServer returns the payments API on fiber. records is the idempotency store (main's is
// pgstore.New over pool; the tests choose theirs), whose tables must exist, and so must the
// pool's business tables (conformance.Migrate).
func NewServer(pool *pgxpool.Pool, records store.Transactional[pgstore.DBTX], provider *conformance.Provider, log *slog.Logger) (*fiber.App, error) {
	// idemgen: the runtime over the idempotency store, keyed by the tenant authenticate put in
	// c.Locals, behind the fiber adapter over the generated operation table.
	idempotent, err := idemfiber.New[pgstore.DBTX](runtime.Config{Store: records, Scope: idemfiber.ScopeKey("tenant"), Logger: log}, append(idem.Routes(), nulls.Routes()...), idemfiber.Options{})
	if err != nil {
		return nil, err
	}

	s := &Service{pool: pool, provider: provider}
	app := fiber.New(fiber.Config{ErrorHandler: renderError, DisableStartupMessage: true})
	// The service's authentication, the cases' test knobs (X-Test-Delay, X-Test-Fail), then
	// idemgen's adapter (idemgen: one argument): it guards the routes of the spec's marked
	// operations and lets the others by.
	app.Use(authenticate, knobs, idempotent)

	app.Post("/v1/payments", s.CreatePayment)
	app.Get("/v1/payments/:id", s.GetPayment)
	app.Post("/v1/payments/:id/refunds", s.CreateRefund)
	app.Post("/v1/orders", s.CreateOrder)
	app.Post("/v1/transfers", s.CreateTransfer)
	app.Post("/v1/charges", s.CreateCharge)
	app.Post("/v1/provider-charges", s.CreateProviderCharge)
	// The tips API (testdata/specs/nulls.yaml, its operation table golden/nulls), behind the
	// same adapter: testdata/cases-nulls.
	app.Post("/v1/tips", s.CreateTip)
	app.Patch("/v1/tips/:id", s.UpdateTip)
	app.Get("/v1/tips/:id", adaptor.HTTPHandler(conformance.GetTip(pool)))
	app.Get("/_effects", adaptor.HTTPHandler(conformance.Effects(pool, provider)))
	return app, nil
}

// authenticate is the service's authentication middleware: `Authorization: Bearer <tenant>`
// names the tenant, which it puts in c.Locals as "tenant". Requests without it go on: the
// handlers that need a tenant refuse them.
func authenticate(c *fiber.Ctx) error {
	scheme, token, ok := strings.Cut(strings.TrimSpace(c.Get(fiber.HeaderAuthorization)), " ")
	if token = strings.TrimSpace(token); ok && strings.EqualFold(scheme, "Bearer") && token != "" {
		c.Locals("tenant", strings.Clone(token)) // fiber's strings are only valid until its buffers are reused
	}
	return c.Next()
}

// knobs applies the cases' test knobs (a net/http middleware of the test fixture, which puts
// them in the request's context): they go on in c.UserContext(); a knob it refuses is answered
// there and the chain stops.
func knobs(c *fiber.Ctx) error {
	r, err := adaptor.ConvertRequest(c, false)
	if err != nil {
		return err
	}
	rec := httptest.NewRecorder()
	ran := false
	conformance.WithKnobs(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		ran = true
		c.SetUserContext(r.Context())
	})).ServeHTTP(rec, r.WithContext(c.UserContext()))
	if !ran {
		c.Set(fiber.HeaderContentType, rec.Header().Get("Content-Type"))
		return c.Status(rec.Code).Send(rec.Body.Bytes())
	}
	return c.Next()
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

// invalid is a request the service's own rules refuse (400).
func invalid(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "bad-request", "Bad request", fmt.Sprintf(format, args...)}
}

// failure is an injected failure (X-Test-Fail) after the work was done.
type failure struct{ status int }

func (f failure) Error() string { return http.StatusText(f.status) }

// renderError is the service's ErrorHandler: every error becomes an RFC 9457 problem of the
// service's own, fiber's errors (a body it cannot parse, an unknown route) included.
func renderError(c *fiber.Ctx, err error) error {
	var f failure
	if errors.As(err, &f) {
		if f.status == http.StatusServiceUnavailable || f.status == http.StatusTooManyRequests {
			c.Set(fiber.HeaderRetryAfter, "1")
		}
		return problem(c, &apiError{f.status, "test-failure", "Injected failure", "X-Test-Fail: " + strconv.Itoa(f.status) + " after the handler did its work"})
	}
	var ae *apiError
	var fe *fiber.Error
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &fe):
		title := http.StatusText(fe.Code)
		ae = &apiError{fe.Code, strings.ReplaceAll(strings.ToLower(title), " ", "-"), title, fe.Message}
	default:
		ae = &apiError{http.StatusInternalServerError, "internal", "Internal error", "the request failed"}
	}
	return problem(c, ae)
}

func problem(c *fiber.Ctx, ae *apiError) error {
	body, err := json.Marshal(map[string]any{"type": conformance.ProblemBase + ae.Name, "title": ae.Title, "status": ae.Status, "detail": ae.Detail})
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "application/problem+json")
	return c.Status(ae.Status).Send(body)
}

// tenantOf is the tenant authenticate found; an error when there is none.
func tenantOf(c *fiber.Ctx) (string, error) {
	tenant, _ := c.Locals("tenant").(string)
	if tenant == "" {
		return "", errUnauthenticated
	}
	return tenant, nil
}
