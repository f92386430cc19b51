package main

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/jackc/pgx/v5/pgxpool"

	idemhuma "github.com/idemgen/idemgen/adapters/huma"
	"github.com/idemgen/idemgen/examples/huma/idem"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// newAPI returns the payments API on Huma over mux (Go's http.ServeMux): the service's
// authentication, then mw (idemgen's middleware; none when the spec is exported), then the
// operations.
func newAPI(mux *http.ServeMux, s *Service, mw ...func(huma.Context, func(huma.Context))) huma.API { // idemgen: the mw parameter
	api := humago.New(mux, huma.DefaultConfig("Conformance payments API", "1.0.0"))
	api.UseMiddleware(append([]func(huma.Context, func(huma.Context)){authenticate(api)}, mw...)...) // idemgen: mw after the authentication
	Register(api, s)
	return api
}

// NewServer returns the payments API on Huma. records is the idempotency store (main's is
// pgstore.New over pool; the tests choose theirs), whose tables must exist, and so must the
// pool's business tables (conformance.Migrate).
func NewServer(pool *pgxpool.Pool, records store.Transactional[pgstore.DBTX], provider *conformance.Provider, log *slog.Logger) (http.Handler, error) {
	// idemgen: the runtime over the idempotency store, keyed by the tenant authenticate put in
	// the context, as a Huma middleware over the operation table generated from the exported
	// spec (package idem), after the authentication.
	idempotent := idemhuma.MustNew[pgstore.DBTX](runtime.Config{Store: records, Scope: idemhuma.ScopeValue(tenantKey{}), Logger: log}, idem.Routes(), idemhuma.Options{Logger: log})
	mux := http.NewServeMux()
	newAPI(mux, &Service{pool: pool, provider: provider}, idempotent) // idemgen: one argument
	// The tips API (testdata/specs/nulls.yaml), a Huma API of its own: testdata/cases-nulls.
	tips, err := tipsMiddleware(runtime.Config{Store: records, Scope: idemhuma.ScopeValue(tenantKey{}), Logger: log})
	if err != nil {
		return nil, err
	}
	newTipsAPI(mux, tips)
	mux.Handle("GET /v1/tips/{tip_id}", conformance.GetTip(pool))
	mux.Handle("GET /_effects", conformance.Effects(pool, provider))
	// The cases' test knobs (X-Test-Delay, X-Test-Fail): a net/http middleware of the test
	// fixture, which puts them in the request's context.
	return conformance.WithKnobs(mux), nil
}

type tenantKey struct{}

// authenticate is the service's authentication, a Huma middleware: `Authorization: Bearer
// <tenant>` names the tenant, which it puts in the context; a request without it is refused
// with the API's own 401.
func authenticate(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		scheme, token, ok := strings.Cut(strings.TrimSpace(ctx.Header("Authorization")), " ")
		if token = strings.TrimSpace(token); !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			ctx.SetHeader("Content-Type", "application/problem+json")
			ctx.SetStatus(http.StatusUnauthorized)
			_ = api.Marshal(ctx.BodyWriter(), "application/problem+json", errUnauthenticated)
			return
		}
		next(huma.WithValue(ctx, tenantKey{}, token))
	}
}
