// Package chiexample serves idemgen's generated handlers on a chi v5 router, as a team that
// routes with chi mounts them among its own routes: all of them through the generated Register
// (chi's Handle takes the same "POST /v1/payments" patterns as http.ServeMux), or one at a time
// through the exported New<Op>Handler constructors, in sub-routers and with chi's own path
// patterns. The generated package is the conformance service's (golden/conformance), and so
// are the business functions (internal/testkit/conformance); middleware_test.go shows
// runtime.Middleware on chi in front of handlers of the team's own.
package chiexample

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	api "github.com/idemgen/idemgen/golden/conformance"
	nulls "github.com/idemgen/idemgen/golden/nulls"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
)

// NewRouter returns the conformance API on a chi router: createRefund mounted by hand in a
// sub-router of /v1/payments/{payment_id}, next to the unmarked GET, and the other marked
// operations through Register; beside it the tips API (golden/nulls), for testdata/cases-nulls. c is what conformance.NewHandler takes, with the same defaults:
// the idempotency store c.Store, whose tables must exist, and the business tables
// (conformance.Migrate) that c.Tables reads.
func NewRouter(c conformance.Config) (http.Handler, error) {
	if c.Store == nil || c.Tables == nil {
		return nil, errors.New("chiexample: Config.Store and Config.Tables are required")
	}
	if c.Provider == nil {
		c.Provider = conformance.NewProvider()
	}
	rt, err := runtime.New(runtime.Config{Store: c.Store, Scope: conformance.TenantOf, Logger: c.Logger, StoreTimeout: c.StoreTimeout})
	if err != nil {
		return nil, err
	}
	h := conformance.Handlers(c.Provider)

	r := chi.NewRouter()
	r.Use(conformance.WithKnobs)
	r.Route("/v1/payments/{payment_id}", func(r chi.Router) {
		r.Get("/", conformance.GetPayment(c.Tables, c.Provider))
		// One operation by hand: its constructor is an http.Handler like any other. The
		// runtime finds payment_id by the operation's path template, whatever the router.
		r.Method(http.MethodPost, "/refunds", api.CreateRefundHandler(rt, h.CreateRefund))
	})
	h.CreateRefund = nil // mounted above; Register skips a nil field
	if err := api.Register(r, rt, h); err != nil {
		return nil, err
	}
	// The tips API (testdata/specs/nulls.yaml), generated handlers too: null is not absent on chi.
	if err := nulls.Register(r, rt, conformance.TipHandlers()); err != nil {
		return nil, err
	}
	r.Method(http.MethodGet, "/v1/tips/{tip_id}", conformance.GetTip(c.Tables))
	r.Get("/_effects", conformance.Effects(c.Tables, c.Provider))
	return r, nil
}
