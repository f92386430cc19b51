package conformance

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// NewHandler returns the conformance service over pool (whose idempotency store and business
// tables must exist: pgstore.Migrate and Migrate) and provider; the runtime logs to log (nil:
// slog.Default()). The tenant is the bearer token of `Authorization: Bearer <tenant>`; a
// request without one is refused with 401 `unauthenticated` before any key lookup.
func NewHandler(pool *pgxpool.Pool, provider *Provider, log *slog.Logger) (http.Handler, error) {
	return NewHandlerWith(pool, Options{Provider: provider, Logger: log})
}

// Options configures NewHandlerWith. Zero values take the defaults stated on each field.
type Options struct {
	// Store keeps the idempotency records; default pgstore.New(pool, pgstore.Options{}). The
	// Redis variants (runtime/redisstore's Cache and Paired) run the same cases.
	Store store.Transactional[pgstore.DBTX]
	// Provider is the fake payment provider; default NewProvider().
	Provider *Provider
	// Logger receives the runtime's logs; default slog.Default().
	Logger *slog.Logger
	// StoreTimeout is the runtime's Config.StoreTimeout; default the runtime's.
	StoreTimeout time.Duration
}

// NewHandlerWith is NewHandler with the idempotency store and the runtime's settings chosen.
func NewHandlerWith(pool *pgxpool.Pool, o Options) (http.Handler, error) {
	if o.Store == nil {
		o.Store = pgstore.New(pool, pgstore.Options{})
	}
	if o.Provider == nil {
		o.Provider = NewProvider()
	}
	rt, err := runtime.New(runtime.Config{Store: o.Store, Scope: tenantOf, Logger: o.Logger, StoreTimeout: o.StoreTimeout})
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	s := &service{pool: pool, provider: o.Provider}
	mux := http.NewServeMux()
	if err := api.Register(mux, rt, s.handlers()); err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	mux.HandleFunc("GET /v1/payments/{payment_id}", s.getPayment)
	mux.HandleFunc("GET /_effects", s.effects)
	return withKnobs(mux), nil
}
