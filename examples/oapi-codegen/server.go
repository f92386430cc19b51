package main

import (
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/oapi-codegen/api"
	"github.com/idemgen/idemgen/examples/oapi-codegen/idem"
	nulls "github.com/idemgen/idemgen/golden/nulls"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// NewHandler returns the payments API: the oapi-codegen strict server on a ServeMux, with
// idemgen's middleware in front of every operation (it serves the ones the spec marks with
// x-idempotent and lets the others through), plus GET /_effects for the cases. records is the
// idempotency store (main's is pgstore.New over pool; the tests choose theirs), whose tables
// must exist, and so must the pool's business tables (conformance.Migrate).
func NewHandler(pool *pgxpool.Pool, records store.Transactional[pgstore.DBTX], provider *conformance.Provider, log *slog.Logger) (http.Handler, error) {
	return newHandler(pool, records, provider, log, false)
}

// newHandler is NewHandler with the middleware around the whole ServeMux when wholeMux is set
// (docs/integrate.md, for a spec that declares the key header as a parameter): in front of the
// router, it matches method and path as ServeMux does.
func newHandler(pool *pgxpool.Pool, records store.Transactional[pgstore.DBTX], provider *conformance.Provider, log *slog.Logger, wholeMux bool) (http.Handler, error) {
	strict := api.NewStrictHandler(&Service{pool: pool, provider: provider}, []api.StrictMiddlewareFunc{testKnobs})

	// idemgen: the runtime over the idempotency store, and its middleware over the generated operation
	// table (package idem, `idemgen generate --target middleware`).
	rt, err := runtime.New(runtime.Config{Store: records, Scope: conformance.TenantOf, Logger: log})
	if err != nil {
		return nil, err
	}
	// The tips API (testdata/specs/nulls.yaml, operation table golden/nulls) is served beside
	// the strict server by encoding/json handlers, behind the same middleware:
	// testdata/cases-nulls.
	idempotency, err := runtime.Middleware[pgstore.DBTX](rt, append(idem.Routes(), nulls.Routes()...), runtime.MiddlewareOptions{})
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	createTip, updateTip := conformance.TipsHTTP()
	mux.Handle("GET /v1/tips/{tip_id}", conformance.GetTip(pool))
	if wholeMux {
		api.HandlerWithOptions(strict, api.StdHTTPServerOptions{BaseRouter: mux})
		mux.Handle("POST /v1/tips", createTip)
		mux.Handle("PATCH /v1/tips/{tip_id}", updateTip)
		mux.Handle("GET /_effects", conformance.Effects(pool, provider))
		return conformance.WithKnobs(idempotency(mux)), nil
	}
	mux.Handle("POST /v1/tips", idempotency(createTip))
	mux.Handle("PATCH /v1/tips/{tip_id}", idempotency(updateTip))
	// The std-http server's per-operation middlewares run after the ServeMux has routed the
	// request, so the middleware finds the operation by its pattern ("POST /v1/payments").
	api.HandlerWithOptions(strict, api.StdHTTPServerOptions{BaseRouter: mux, Middlewares: []api.MiddlewareFunc{idempotency}})
	mux.Handle("GET /_effects", conformance.Effects(pool, provider))
	return conformance.WithKnobs(mux), nil
}
