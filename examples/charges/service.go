package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/charges/api"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// schemaSQL is the service's own table: the charges it answered, written in the transaction that
// completes the idempotency record.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS charges (
	id         text        PRIMARY KEY,   -- the provider's charge id
	account    text        NOT NULL,
	amount     bigint      NOT NULL,
	currency   text        NOT NULL,
	status     text        NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);`

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := pgstore.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrate idempotency store: %w", err)
	}
	if _, err := pool.Exec(ctx, schemaSQL); err != nil {
		return fmt.Errorf("migrate charges: %w", err)
	}
	return nil
}

// service holds the handlers.
type service struct {
	pool     *pgxpool.Pool
	store    *pgstore.Store
	provider *providerClient
	// afterCall, when set, runs after the provider answered and before the completion: the
	// fault test holds requests there to kill the process in the call phase.
	afterCall func(ctx context.Context, r *http.Request)
}

// accountScope is the idempotency scope: the merchant account of the X-Account header.
func accountScope(r *http.Request) (string, error) {
	a := strings.TrimSpace(r.Header.Get("X-Account"))
	if a == "" {
		return "", errors.New("missing X-Account header")
	}
	return a, nil
}

// newServer wires the generated createCharge and the plain getCharge into one handler, and
// returns the runtime (serve shuts it down with the server). The store is s.store, or one on
// s.pool.
func newServer(s *service) (http.Handler, *runtime.Runtime, error) {
	st := s.store
	if st == nil {
		st = pgstore.New(s.pool, pgstore.Options{})
	}
	rt, err := runtime.New(runtime.Config{Store: st, Scope: accountScope})
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	if err := api.Register(mux, rt, api.Handlers{CreateCharge: s.createCharge}); err != nil {
		return nil, nil, err
	}
	mux.HandleFunc("GET /charges/{chargeId}", s.getCharge)
	return s.withRequest(mux), rt, nil
}

type requestKey struct{}

// withRequest puts the request in its context, for afterCall.
func (s *service) withRequest(next http.Handler) http.Handler {
	if s.afterCall == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestKey{}, r)))
	})
}

// createCharge charges the card in its call phase, under the provider key the lease derives
// and records (lease.ProviderCall, with the amount, so that reconciliation compares it), then
// stores the charge in the completion's transaction and answers 201, or 402 for a decline.
func (s *service) createCharge(ctx context.Context, lease *runtime.Lease, p api.CreateChargeParams, body api.CreateChargeBody) (runtime.CompleteFunc[pgstore.DBTX], error) {
	currency := strings.ToUpper(body.Currency)
	key, err := lease.ProviderCall(ctx, runtime.Call{Label: "charge", Amount: body.Amount, Currency: currency})
	if err != nil {
		return nil, err // not recorded: the provider is not called
	}
	ch, err := s.provider.charge(ctx, key, body.Amount, currency, body.Source)
	status := http.StatusCreated
	switch {
	case errors.Is(err, errDeclined):
		status = http.StatusPaymentRequired // final: stored and replayed
	case err != nil:
		return nil, err // the key is released: a retry calls again, under the same key
	}
	if s.afterCall != nil {
		if r, ok := ctx.Value(requestKey{}).(*http.Request); ok {
			s.afterCall(ctx, r)
		}
	}
	return func(ctx context.Context, db pgstore.DBTX) (runtime.Response, error) {
		_, err := db.Exec(ctx, `INSERT INTO charges (id, account, amount, currency, status) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (id) DO NOTHING`, ch.ID, p.XAccount, ch.Amount, strings.ToUpper(ch.Currency), ch.Status)
		if err != nil {
			return runtime.Response{}, err
		}
		return chargeResponse(status, ch), nil
	}, nil
}

// chargeResponse is the API's Charge.
func chargeResponse(status int, ch providerCharge) runtime.Response {
	b, _ := json.Marshal(map[string]any{"id": ch.ID, "amount": ch.Amount, "currency": strings.ToUpper(ch.Currency), "status": ch.Status})
	return runtime.Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: b}
}

// getCharge reads a charge of the account.
func (s *service) getCharge(w http.ResponseWriter, r *http.Request) {
	account, err := accountScope(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var ch providerCharge
	err = s.pool.QueryRow(r.Context(), `SELECT id, amount, currency, status FROM charges WHERE id = $1 AND account = $2`,
		r.PathValue("chargeId"), account).Scan(&ch.ID, &ch.Amount, &ch.Currency, &ch.Status)
	if errors.Is(err, pgx.ErrNoRows) {
		http.Error(w, "no such charge", http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, "store unavailable", http.StatusServiceUnavailable)
		return
	}
	resp := chargeResponse(http.StatusOK, ch)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(resp.Body)
}
