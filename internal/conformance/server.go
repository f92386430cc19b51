package conformance

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// NewHandler returns the conformance service over pool (whose idempotency store and business
// tables must exist: pgstore.Migrate and Migrate) and provider; the runtime logs to log (nil:
// slog.Default()). The tenant is the bearer token of `Authorization: Bearer <tenant>`; a
// request without one is refused with 401 `unauthenticated` before any key lookup.
func NewHandler(pool *pgxpool.Pool, provider *Provider, log *slog.Logger) (http.Handler, error) {
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: tenantOf, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	s := &service{pool: pool, provider: provider}
	mux := http.NewServeMux()
	if err := api.Register(mux, rt, s.handlers()); err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	mux.HandleFunc("GET /v1/payments/{payment_id}", s.getPayment)
	mux.HandleFunc("GET /_effects", s.effects)
	return withKnobs(mux), nil
}
