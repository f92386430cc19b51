package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	api "github.com/idemgen/idemgen/golden/conformance"
	nulls "github.com/idemgen/idemgen/golden/nulls"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// Tables is the service's handle on its business tables (Migrate) outside any transaction: the
// unmarked GET /v1/payments/{payment_id} and GET /_effects read through it, with PostgreSQL's
// SQL. It must reach the database the store's transactions write the business rows to. A
// *pgxpool.Pool is one, and so is any pgstore.DBTX.
type Tables interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Config configures NewHandler. Store and Tables are required; the other fields take the
// defaults stated on them.
type Config struct {
	// Store keeps the idempotency records and runs the marked operations' transactions, whose
	// business writes go through its pgstore.DBTX: pgstore.New, or runtime/redisstore's Cache
	// or Pair in front of it. The service keeps no record anywhere else.
	Store store.Transactional[pgstore.DBTX]
	// Tables reads the business tables outside a transaction.
	Tables Tables
	// Provider is the fake payment provider; default NewProvider().
	Provider *Provider
	// Logger receives the runtime's logs; default slog.Default().
	Logger *slog.Logger
	// StoreTimeout is the runtime's Config.StoreTimeout; zero: the runtime's default.
	StoreTimeout time.Duration
}

// NewHandler returns the conformance service on c.Store and c.Tables, whose tables must exist
// (the store's own, e.g. pgstore.Migrate, and Migrate's). The tenant is the bearer token of
// `Authorization: Bearer <tenant>`; a request without one is refused with 401
// `unauthenticated` before any key lookup. It returns an error when Store or Tables is nil or
// the runtime refuses the configuration.
func NewHandler(c Config) (http.Handler, error) {
	switch {
	case c.Store == nil:
		return nil, errors.New("conformance: Config.Store is nil")
	case c.Tables == nil:
		return nil, errors.New("conformance: Config.Tables is nil")
	}
	if c.Provider == nil {
		c.Provider = NewProvider()
	}
	rt, err := runtime.New(runtime.Config{Store: c.Store, Scope: tenantOf, Logger: c.Logger, StoreTimeout: c.StoreTimeout})
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	s := &service{tables: c.Tables, provider: c.Provider}
	mux := http.NewServeMux()
	if err := api.Register(mux, rt, s.handlers()); err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	// The tips API beside it (testdata/specs/nulls.yaml), for testdata/cases-nulls.
	if err := nulls.Register(mux, rt, TipHandlers()); err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	mux.Handle("GET /v1/tips/{tip_id}", GetTip(c.Tables))
	mux.HandleFunc("GET /v1/payments/{payment_id}", s.getPayment)
	mux.HandleFunc("GET /_effects", s.effects)
	return withKnobs(mux), nil
}
