package main

import (
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/ogen/api"
	"github.com/idemgen/idemgen/examples/ogen/idem"
	nulls "github.com/idemgen/idemgen/golden/nulls"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// NewHandler returns the payments API: the ogen server wrapped in idemgen's middleware (it
// serves the operations the spec marks with x-idempotent and lets the others through), plus GET
// /_effects for the cases. records is the idempotency store (main's is pgstore.New over pool;
// the tests choose theirs), whose tables must exist, and so must the pool's business tables
// (conformance.Migrate).
func NewHandler(pool *pgxpool.Pool, records store.Transactional[pgstore.DBTX], provider *conformance.Provider, log *slog.Logger) (http.Handler, error) {
	srv, err := api.NewServer(&Service{pool: pool, provider: provider}, api.WithMiddleware(testKnobs), api.WithErrorHandler(writeError))
	if err != nil {
		return nil, err
	}

	// idemgen: the runtime over the idempotency store, and its middleware over the generated operation
	// table (package idem, `idemgen generate --target middleware`). ogen's router does not set
	// Request.Pattern, and its middlewares cannot replay stored bytes, so the middleware wraps
	// the whole server and asks ogen's router which operation a request is for.
	rt, err := runtime.New(runtime.Config{Store: records, Scope: conformance.TenantOf, Logger: log})
	if err != nil {
		return nil, err
	}
	idempotency, err := runtime.Middleware[pgstore.DBTX](rt, idem.Routes(), runtime.MiddlewareOptions{
		Match: func(r *http.Request) (string, bool) {
			route, ok := srv.FindPath(r.Method, r.URL)
			return route.OperationID(), ok
		},
	})
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.Handle("/", idempotency(srv))
	// The tips API (testdata/specs/nulls.yaml, operation table golden/nulls), which ogen's
	// server does not serve: encoding/json handlers on the ServeMux behind a middleware of their
	// own (it finds the operation by the ServeMux's pattern): testdata/cases-nulls.
	tips, err := runtime.Middleware[pgstore.DBTX](rt, nulls.Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		return nil, err
	}
	createTip, updateTip := conformance.TipsHTTP()
	mux.Handle("POST /v1/tips", tips(createTip))
	mux.Handle("PATCH /v1/tips/{tip_id}", tips(updateTip))
	mux.Handle("GET /v1/tips/{tip_id}", conformance.GetTip(pool))
	mux.Handle("GET /_effects", conformance.Effects(pool, provider))
	return conformance.WithKnobs(mux), nil
}
