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

	"github.com/idemgen/idemgen/examples/oapi-codegen/api"
	"github.com/idemgen/idemgen/examples/oapi-codegen/db"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Service is the payments API's business code, an oapi-codegen strict server: typed requests
// in, typed responses out. The tenant comes from the context (conformance.Tenant, the service's
// authentication).
//
// The marked operations write through tx(ctx), the transaction idemgen's middleware holds for
// the request: their rows commit with the stored response, or not at all. Nothing else in them
// knows about idempotency.
type Service struct {
	pool     *pgxpool.Pool
	provider *conformance.Provider
}

var _ api.StrictServerInterface = (*Service)(nil)

// tx returns the transaction of the idempotency middleware (runtime.TxFrom). A marked
// operation served without the middleware has none: that is a wiring bug, and it fails loudly.
func tx(ctx context.Context) pgstore.DBTX {
	tx, ok := runtime.TxFrom[pgstore.DBTX](ctx)
	if !ok {
		panic("no idempotency transaction in the context: is runtime.Middleware in front of this operation?")
	}
	return tx
}

func (s *Service) CreatePayment(ctx context.Context, req api.CreatePaymentRequestObject) (api.CreatePaymentResponseObject, error) {
	b := req.Body
	if b.Amount > conformance.DeclineAbove {
		// A decline is a final answer: the middleware stores and replays it, so the retry of a
		// declined charge never reaches the card network again.
		return api.CreatePayment402ApplicationProblemPlusJSONResponse(problemBody(http.StatusPaymentRequired,
			"card-declined", "Payment declined", fmt.Sprintf("amounts above %d are declined", conformance.DeclineAbove))), nil
	}
	p := db.InsertPaymentParams{ID: "pay_" + uuid.NewString(), Tenant: conformance.Tenant(ctx), Amount: b.Amount,
		Currency: b.Currency, ToAccount: b.To, Description: b.Description}
	if err := db.New(tx(ctx)).InsertPayment(ctx, p); err != nil {
		return nil, fmt.Errorf("insert payment: %w", err)
	}
	location := "/v1/payments/" + p.ID
	return api.CreatePayment201JSONResponse{
		Body:    api.Payment{Id: &p.ID, Amount: &p.Amount, Currency: &p.Currency, To: &p.ToAccount, Status: ptr("succeeded")},
		Headers: api.CreatePayment201ResponseHeaders{Location: &location},
	}, nil
}

// GetPayment is not marked: it reads through the pool and the middleware lets it through.
func (s *Service) GetPayment(ctx context.Context, req api.GetPaymentRequestObject) (api.GetPaymentResponseObject, error) {
	tenant := conformance.Tenant(ctx)
	if tenant == "" {
		return problem{http.StatusUnauthorized, "unauthenticated", "Unauthenticated", "no Authorization: Bearer <tenant> header"}, nil
	}
	p, err := db.New(s.pool).GetPayment(ctx, tenant, req.PaymentId)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return problem{http.StatusNotFound, "payment-not-found", "Payment not found", "no payment " + strconv.Quote(req.PaymentId)}, nil
	case err != nil:
		return nil, fmt.Errorf("get payment: %w", err)
	}
	return api.GetPayment200JSONResponse{Id: &p.ID, Amount: &p.Amount, Currency: &p.Currency, To: &p.ToAccount, Status: ptr("succeeded")}, nil
}

func (s *Service) CreateRefund(ctx context.Context, req api.CreateRefundRequestObject) (api.CreateRefundResponseObject, error) {
	q, tenant := db.New(tx(ctx)), conformance.Tenant(ctx)
	exists, err := q.PaymentExists(ctx, tenant, req.PaymentId)
	if err != nil {
		return nil, fmt.Errorf("find payment: %w", err)
	}
	if !exists {
		// Not in the spec's responses, so a response type of the service's own: final, stored
		// and replayed like any 4xx.
		return problem{http.StatusNotFound, "payment-not-found", "Payment not found", "no payment " + strconv.Quote(req.PaymentId)}, nil
	}
	r := db.InsertRefundParams{ID: "re_" + uuid.NewString(), Tenant: tenant, PaymentID: req.PaymentId, Amount: req.Body.Amount, Reason: req.Body.Reason}
	if err := q.InsertRefund(ctx, r); err != nil {
		return nil, fmt.Errorf("insert refund: %w", err)
	}
	return api.CreateRefund201JSONResponse{Id: &r.ID, PaymentId: &r.PaymentID, Amount: &r.Amount}, nil
}

func (s *Service) CreateOrder(ctx context.Context, req api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
	id := "ord_" + uuid.NewString()
	if err := db.New(tx(ctx)).InsertOrder(ctx, id, conformance.Tenant(ctx), req.Body.Payer.Name, int32(len(req.Body.Lines))); err != nil {
		return nil, fmt.Errorf("insert order: %w", err)
	}
	return api.CreateOrder201JSONResponse{Id: &id}, nil
}

func (s *Service) CreateTransfer(ctx context.Context, req api.CreateTransferRequestObject) (api.CreateTransferResponseObject, error) {
	id := "tr_" + uuid.NewString()
	if err := db.New(tx(ctx)).InsertTransfer(ctx, id, conformance.Tenant(ctx), req.Body.Amount, req.Body.Destination); err != nil {
		return nil, fmt.Errorf("insert transfer: %w", err)
	}
	return api.CreateTransfer201JSONResponse{Id: &id}, nil
}

// CreateCharge takes a form body (application/x-www-form-urlencoded), as Stripe's API does.
func (s *Service) CreateCharge(ctx context.Context, req api.CreateChargeRequestObject) (api.CreateChargeResponseObject, error) {
	id := "ch_" + uuid.NewString()
	if err := db.New(tx(ctx)).InsertCharge(ctx, id, conformance.Tenant(ctx), int64(req.Body.Amount), req.Body.Currency, req.Body.Description); err != nil {
		return nil, fmt.Errorf("insert charge: %w", err)
	}
	return api.CreateCharge201JSONResponse{Id: &id}, nil
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
func (s *Service) CreateProviderCharge(ctx context.Context, req api.CreateProviderChargeRequestObject) (api.CreateProviderChargeResponseObject, error) {
	lease, tenant := runtime.LeaseFrom(ctx), conformance.Tenant(ctx)
	pk, err := lease.ProviderKey(ctx, "charge")
	if err != nil {
		return nil, err
	}
	ref, err := s.provider.Charge(ctx, tenant, pk, req.Body.Amount)
	if err != nil {
		return nil, err
	}
	id := "pc_" + lease.DeriveID("provider-charge")
	if err := db.New(s.pool).InsertProviderCharge(ctx, id, tenant, req.Body.Amount, ref); err != nil {
		return nil, fmt.Errorf("insert provider charge: %w", err)
	}
	return api.CreateProviderCharge201JSONResponse{Id: &id, ProviderReference: &ref}, nil
}

func ptr[T any](v T) *T { return &v }

func problemBody(status int, name, title, detail string) api.Problem {
	return api.Problem{Type: ptr(conformance.ProblemBase + name), Title: &title, Status: &status, Detail: &detail}
}

// problem is an answer the spec does not declare (401, 404, an injected failure): it is a
// response object of every operation, written as RFC 9457 problem+json.
type problem struct {
	status              int
	name, title, detail string
}

func (p problem) write(w http.ResponseWriter) error {
	if p.status == http.StatusServiceUnavailable || p.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	conformance.WriteProblem(w, p.status, p.name, p.title, p.detail)
	return nil
}

func (p problem) VisitCreatePaymentResponse(w http.ResponseWriter) error        { return p.write(w) }
func (p problem) VisitGetPaymentResponse(w http.ResponseWriter) error           { return p.write(w) }
func (p problem) VisitCreateRefundResponse(w http.ResponseWriter) error         { return p.write(w) }
func (p problem) VisitCreateOrderResponse(w http.ResponseWriter) error          { return p.write(w) }
func (p problem) VisitCreateTransferResponse(w http.ResponseWriter) error       { return p.write(w) }
func (p problem) VisitCreateChargeResponse(w http.ResponseWriter) error         { return p.write(w) }
func (p problem) VisitCreateProviderChargeResponse(w http.ResponseWriter) error { return p.write(w) }

// testKnobs is a strict middleware that applies the cases' test knobs around every operation
// (testdata/cases/README.md): X-Test-Delay before the handler, X-Test-Fail after it has done its
// work (a panic, or a 500, 503 or 429 problem in place of its response).
func testKnobs(next api.StrictHandlerFunc, _ string) api.StrictHandlerFunc {
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, req any) (any, error) {
		if err := conformance.BeforeWork(ctx); err != nil {
			return nil, err
		}
		resp, err := next(ctx, w, r, req)
		if err != nil {
			return nil, err
		}
		if status := conformance.AfterWork(ctx); status != 0 {
			return problem{status, "test-failure", "Injected failure", "X-Test-Fail after the handler did its work"}, nil
		}
		return resp, nil
	}
}
