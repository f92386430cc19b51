package baseline

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Strategy serves createPayment (POST /v1/payments) through the conformance service's generated
// code on a runtime built with the given claim strategy, with a handler that makes the same
// business insert as Plain. The harness mounts one per strategy (under a path prefix) so that
// the claim strategies are compared on identical handler code in the same run.
func Strategy(pool *pgxpool.Pool, s pgstore.ClaimStrategy) (http.Handler, error) {
	return WithStore(pool, pgstore.Options{Claim: s})
}

// WithStore is Strategy with every store option (the partitioned layout's A/B variant).
func WithStore(pool *pgxpool.Pool, opts pgstore.Options) (http.Handler, error) {
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, opts), Scope: func(r *http.Request) (string, error) {
		t, ok := tenant(r)
		if !ok {
			return "", fmt.Errorf("no bearer tenant")
		}
		return t, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	mux := http.NewServeMux()
	err = api.Register(mux, rt, api.Handlers{
		CreatePayment: func(ctx context.Context, tx pgstore.DBTX, _ api.CreatePaymentParams, b api.CreatePaymentBody) (runtime.Response, error) {
			t := ctx.Value(tenantKey{}).(string)
			p := payment{ID: newID(), Amount: b.Amount, Currency: b.Currency, To: b.To, Status: "succeeded"}
			if _, err := tx.Exec(ctx, insertPayment, p.ID, t, p.Amount, p.Currency, p.To, b.Description); err != nil {
				return runtime.Response{}, fmt.Errorf("insert payment: %w", err)
			}
			return runtime.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: created(p)}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	// The generated handler signature carries no tenant; the business function needs it for its
	// row, as the conformance service's does, so it travels in the context.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, _ := tenant(r)
		mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, t)))
	}), nil
}

type tenantKey struct{}
