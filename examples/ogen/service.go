package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ogen-go/ogen/middleware"
	"github.com/ogen-go/ogen/ogenerrors"

	"github.com/idemgen/idemgen/examples/ogen/api"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Service is the payments API's business code, ogen's api.Handler: typed requests in, typed
// responses out; answers the spec does not declare (401, 404) are errors that writeError turns
// into problems. The tenant comes from the context (conformance.Tenant, the service's
// authentication).
//
// The marked operations write through tx(ctx), the transaction idemgen's middleware holds for
// the request: their rows commit with the stored response, or not at all.
type Service struct {
	pool     *pgxpool.Pool
	provider *conformance.Provider
}

var _ api.Handler = (*Service)(nil)

// tx returns the transaction of the idempotency middleware (runtime.TxFrom). A marked
// operation served without the middleware has none: that is a wiring bug, and it fails loudly.
func tx(ctx context.Context) pgstore.DBTX {
	tx, ok := runtime.TxFrom[pgstore.DBTX](ctx)
	if !ok {
		panic("no idempotency transaction in the context: is runtime.Middleware in front of this operation?")
	}
	return tx
}

func (s *Service) CreatePayment(ctx context.Context, req *api.PaymentRequest) (api.CreatePaymentRes, error) {
	if req.Amount > conformance.DeclineAbove {
		// A decline is a final answer: the middleware stores and replays it.
		return &api.Problem{
			Type: api.NewOptString(conformance.ProblemBase + "card-declined"), Title: api.NewOptString("Payment declined"),
			Status: api.NewOptInt(http.StatusPaymentRequired), Detail: api.NewOptString(fmt.Sprintf("amounts above %d are declined", conformance.DeclineAbove)),
		}, nil
	}
	id := "pay_" + uuid.NewString()
	var description *string
	if d, ok := req.Description.Get(); ok {
		description = &d
	}
	if _, err := tx(ctx).Exec(ctx, `INSERT INTO payments (id, tenant, amount, currency, to_account, description) VALUES ($1, $2, $3, $4, $5, $6)`,
		id, conformance.Tenant(ctx), req.Amount, req.Currency, req.To, description); err != nil {
		return nil, fmt.Errorf("insert payment: %w", err)
	}
	return &api.PaymentHeaders{
		Location: api.NewOptString("/v1/payments/" + id),
		Response: api.Payment{ID: api.NewOptString(id), Amount: api.NewOptInt64(req.Amount), Currency: api.NewOptString(req.Currency),
			To: api.NewOptString(req.To), Status: api.NewOptString("succeeded")},
	}, nil
}

// GetPayment is not marked: it reads through the pool and the middleware lets it through.
func (s *Service) GetPayment(ctx context.Context, params api.GetPaymentParams) (*api.Payment, error) {
	tenant := conformance.Tenant(ctx)
	if tenant == "" {
		return nil, &problem{http.StatusUnauthorized, "unauthenticated", "Unauthenticated", "no Authorization: Bearer <tenant> header"}
	}
	var p api.Payment
	var id, currency, to string
	var amount int64
	err := s.pool.QueryRow(ctx, `SELECT id, amount, currency, to_account FROM payments WHERE tenant = $1 AND id = $2`,
		tenant, params.PaymentID).Scan(&id, &amount, &currency, &to)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, &problem{http.StatusNotFound, "payment-not-found", "Payment not found", "no payment " + strconv.Quote(params.PaymentID)}
	case err != nil:
		return nil, fmt.Errorf("get payment: %w", err)
	}
	p.ID, p.Amount, p.Currency, p.To, p.Status = api.NewOptString(id), api.NewOptInt64(amount), api.NewOptString(currency), api.NewOptString(to), api.NewOptString("succeeded")
	return &p, nil
}

func (s *Service) CreateRefund(ctx context.Context, req *api.CreateRefundReq, params api.CreateRefundParams) (*api.CreateRefundCreated, error) {
	db, tenant := tx(ctx), conformance.Tenant(ctx)
	var exists bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payments WHERE tenant = $1 AND id = $2)`, tenant, params.PaymentID).Scan(&exists); err != nil {
		return nil, fmt.Errorf("find payment: %w", err)
	}
	if !exists {
		// Not in the spec's responses: an error that writeError answers. A 404 is final, so
		// the middleware stores and replays it like any 4xx.
		return nil, &problem{http.StatusNotFound, "payment-not-found", "Payment not found", "no payment " + strconv.Quote(params.PaymentID)}
	}
	id := "re_" + uuid.NewString()
	var reason *string
	if r, ok := req.Reason.Get(); ok {
		reason = &r
	}
	if _, err := db.Exec(ctx, `INSERT INTO refunds (id, tenant, payment_id, amount, reason) VALUES ($1, $2, $3, $4, $5)`,
		id, tenant, params.PaymentID, req.Amount, reason); err != nil {
		return nil, fmt.Errorf("insert refund: %w", err)
	}
	return &api.CreateRefundCreated{ID: api.NewOptString(id), PaymentID: api.NewOptString(params.PaymentID), Amount: api.NewOptInt64(req.Amount)}, nil
}

func (s *Service) CreateOrder(ctx context.Context, req *api.CreateOrderReq) (*api.CreateOrderCreated, error) {
	id := "ord_" + uuid.NewString()
	if _, err := tx(ctx).Exec(ctx, `INSERT INTO orders (id, tenant, payer_name, lines) VALUES ($1, $2, $3, $4)`,
		id, conformance.Tenant(ctx), req.Payer.Name, len(req.Lines)); err != nil {
		return nil, fmt.Errorf("insert order: %w", err)
	}
	return &api.CreateOrderCreated{ID: api.NewOptString(id)}, nil
}

func (s *Service) CreateTransfer(ctx context.Context, req *api.CreateTransferReq) (*api.CreateTransferCreated, error) {
	id := "tr_" + uuid.NewString()
	if _, err := tx(ctx).Exec(ctx, `INSERT INTO transfers (id, tenant, amount, destination) VALUES ($1, $2, $3, $4)`,
		id, conformance.Tenant(ctx), req.Amount, req.Destination); err != nil {
		return nil, fmt.Errorf("insert transfer: %w", err)
	}
	return &api.CreateTransferCreated{ID: api.NewOptString(id)}, nil
}

// CreateCharge takes a form body (application/x-www-form-urlencoded), as Stripe's API does.
func (s *Service) CreateCharge(ctx context.Context, req *api.CreateChargeReq) (*api.CreateChargeCreated, error) {
	id := "ch_" + uuid.NewString()
	var description *string
	if d, ok := req.Description.Get(); ok {
		description = &d
	}
	if _, err := tx(ctx).Exec(ctx, `INSERT INTO charges (id, tenant, amount, currency, description) VALUES ($1, $2, $3, $4, $5)`,
		id, conformance.Tenant(ctx), req.Amount, req.Currency, description); err != nil {
		return nil, fmt.Errorf("insert charge: %w", err)
	}
	return &api.CreateChargeCreated{ID: api.NewOptString(id)}, nil
}

// CreateProviderCharge runs in lease mode: it charges through an external provider, so no
// database transaction is held while it works. It takes its claim from the context
// (runtime.LeaseFrom) and gives the provider a key derived from the request's idempotency key,
// the same on every attempt, so that the provider charges once whatever happens here.
//
// Its row is written through the pool under an id derived from the key as well: the
// middleware's lease-mode handlers cannot write in the transaction that completes the record,
// so an attempt that fails after its write (its key is released) leaves the row, and the
// retry's insert of the same id changes nothing.
func (s *Service) CreateProviderCharge(ctx context.Context, req *api.CreateProviderChargeReq) (*api.CreateProviderChargeCreated, error) {
	lease, tenant := runtime.LeaseFrom(ctx), conformance.Tenant(ctx)
	pk, err := lease.ProviderKey(ctx, "charge")
	if err != nil {
		return nil, err
	}
	ref, err := s.provider.Charge(ctx, tenant, pk, req.Amount)
	if err != nil {
		return nil, err
	}
	id := "pc_" + lease.DeriveID("provider-charge")
	if _, err := s.pool.Exec(ctx, `INSERT INTO provider_charges (id, tenant, amount, provider_reference) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING`,
		id, tenant, req.Amount, ref); err != nil {
		return nil, fmt.Errorf("insert provider charge: %w", err)
	}
	return &api.CreateProviderChargeCreated{ID: api.NewOptString(id), ProviderReference: api.NewOptString(ref)}, nil
}

// problem is an answer the spec does not declare (401, 404, an injected failure), returned as
// an error and written by writeError as RFC 9457 problem+json.
type problem struct {
	status              int
	name, title, detail string
}

func (p *problem) Error() string { return fmt.Sprintf("%d %s: %s", p.status, p.name, p.detail) }

// writeError is the server's ogen error handler: the service's problems as problem+json, a
// handler's failure as a 500 problem, and ogen's own errors (a request it cannot decode) as
// ogen writes them.
func writeError(ctx context.Context, w http.ResponseWriter, r *http.Request, err error) {
	var p *problem
	var decode *ogenerrors.DecodeRequestError
	var params *ogenerrors.DecodeParamsError
	switch {
	case errors.As(err, &p):
		if p.status == http.StatusServiceUnavailable || p.status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		conformance.WriteProblem(w, p.status, p.name, p.title, p.detail)
	case errors.As(err, &decode), errors.As(err, &params):
		ogenerrors.DefaultErrorHandler(ctx, w, r, err)
	default:
		conformance.WriteProblem(w, http.StatusInternalServerError, "internal", "Internal error", "the request failed")
	}
}

// testKnobs is an ogen middleware that applies the cases' test knobs around every operation
// (testdata/cases/README.md): X-Test-Delay before the handler, X-Test-Fail after it has done its
// work (a panic, or a 500, 503 or 429 problem in place of its response).
func testKnobs(req middleware.Request, next middleware.Next) (middleware.Response, error) {
	if err := conformance.BeforeWork(req.Context); err != nil {
		return middleware.Response{}, err
	}
	resp, err := next(req)
	if err != nil {
		return resp, err
	}
	if status := conformance.AfterWork(req.Context); status != 0 {
		return middleware.Response{}, &problem{status, "test-failure", "Injected failure", "X-Test-Fail after the handler did its work"}
	}
	return resp, nil
}
