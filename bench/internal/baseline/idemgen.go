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
	// The load makes one tenant's keys at rates far above the default records cap.
	opts.Limits.Records = -1
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
			body, err := createPayment(ctx, tx, ctx.Value(tenantKey{}).(string), paymentRequest{Amount: b.Amount, Currency: b.Currency, To: b.To, Description: b.Description})
			if err != nil {
				return runtime.Response{}, err
			}
			return runtime.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, nil
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

// createPayment is the business code Strategy and Middleware share: the same ID, INSERT and
// response body as Plain's.
func createPayment(ctx context.Context, tx pgstore.DBTX, tenant string, req paymentRequest) ([]byte, error) {
	p := payment{ID: newID(), Amount: req.Amount, Currency: req.Currency, To: req.To, Status: "succeeded"}
	if _, err := tx.Exec(ctx, insertPayment, p.ID, tenant, p.Amount, p.Currency, p.To, req.Description); err != nil {
		return nil, fmt.Errorf("insert payment: %w", err)
	}
	return created(p), nil
}

// Middleware serves createPayment (POST /v1/payments) through runtime.Middleware in front of a
// net/http handler of the kind an existing server has: it reads and decodes its own body
// (readPayment, as Plain does), takes its transaction from the context and writes its own
// response, with the business code of Strategy's generated-handler function (createPayment).
// The runtime is Strategy's with ClaimWithStatement, so the harness compares the middleware
// path with the generated handler path on the same business code in the same run. The
// middleware sits on the route, where http.ServeMux has set Request.Pattern, as in
// examples/oapi-codegen.
func Middleware(pool *pgxpool.Pool) (http.Handler, error) {
	return MiddlewareWith(pool, pgstore.ClaimWithStatement{})
}

// MiddlewareWith is Middleware on a runtime whose store claims with claim (an A/B variant:
// ClaimWithStatement{LockAtRead: true}, whose read holds the claim the Middleware confirms).
func MiddlewareWith(pool *pgxpool.Pool, claim pgstore.ClaimStrategy) (http.Handler, error) {
	rt, err := middlewareRuntime(pool, claim)
	if err != nil {
		return nil, err
	}
	idempotency, err := runtime.Middleware[pgstore.DBTX](rt, api.Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", idempotency(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, _ := tenant(r)
		_, req, ok := readPayment(w, r)
		if !ok {
			return
		}
		tx, ok := runtime.TxFrom[pgstore.DBTX](r.Context())
		if !ok {
			http.Error(w, "no idempotency transaction", http.StatusInternalServerError)
			return
		}
		body, err := createPayment(r.Context(), tx, t, req)
		if err != nil {
			http.Error(w, "store error", http.StatusInternalServerError)
			return
		}
		write(w, http.StatusCreated, body)
	})))
	return mux, nil
}

// MiddlewareRuntime is the runtime of Middleware: ClaimWithStatement, the bearer tenant as the
// scope. The framework adapters' variants (bench/frameworks) each run on one configured alike.
func MiddlewareRuntime(pool *pgxpool.Pool) (*runtime.Runtime, error) {
	return middlewareRuntime(pool, pgstore.ClaimWithStatement{})
}

func middlewareRuntime(pool *pgxpool.Pool, claim pgstore.ClaimStrategy) (*runtime.Runtime, error) {
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{Claim: claim, Limits: pgstore.Limits{Records: -1}}), Scope: func(r *http.Request) (string, error) {
		t, ok := tenant(r)
		if !ok {
			return "", fmt.Errorf("no bearer tenant")
		}
		return t, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	return rt, nil
}

// PaymentRequest is the body Middleware's handler decodes; the framework adapters' handlers
// bind it.
type PaymentRequest = paymentRequest

// CreatePayment is Middleware's business code, for the framework adapters' handlers: the
// payment's INSERT through tx and the 201 response body.
func CreatePayment(ctx context.Context, tx pgstore.DBTX, tenant string, req PaymentRequest) ([]byte, error) {
	return createPayment(ctx, tx, tenant, req)
}

// Tenant returns the bearer tenant of r.
func Tenant(r *http.Request) (string, bool) { return tenant(r) }
