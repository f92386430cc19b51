package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Service holds the payments API's Huma handlers: they take Huma's bound and validated input,
// write through a database handle and return Huma outputs, or errors in the API's error model
// (huma.ErrorModel, RFC 9457).
type Service struct {
	pool     *pgxpool.Pool
	provider *conformance.Provider
}

// Register registers the API's operations on api. The marked ones carry idemgen's x-idempotent
// in their Extensions, which Huma writes into the OpenAPI document idemgen generates from.
func Register(api huma.API, s *Service) {
	huma.Register(api, huma.Operation{
		OperationID: "createPayment", Method: http.MethodPost, Path: "/v1/payments", DefaultStatus: http.StatusCreated,
		Summary: "Create a payment", Errors: []int{http.StatusPaymentRequired},
		Extensions: map[string]any{"x-idempotent": map[string]any{"fingerprint": map[string]any{"exclude": []string{"/client_timestamp"}}}},
	}, s.CreatePayment)
	huma.Register(api, huma.Operation{
		OperationID: "getPayment", Method: http.MethodGet, Path: "/v1/payments/{payment_id}", Summary: "Get a payment",
	}, s.GetPayment)
	huma.Register(api, huma.Operation{
		OperationID: "createRefund", Method: http.MethodPost, Path: "/v1/payments/{payment_id}/refunds", DefaultStatus: http.StatusCreated,
		Summary: "Refund a payment", Errors: []int{http.StatusNotFound},
		Extensions: map[string]any{"x-idempotent": true},
	}, s.CreateRefund)
	huma.Register(api, huma.Operation{
		OperationID: "createOrder", Method: http.MethodPost, Path: "/v1/orders", DefaultStatus: http.StatusCreated, Summary: "Create an order",
		Extensions: map[string]any{"x-idempotent": map[string]any{"fingerprint": map[string]any{"exclude": []string{"/metadata/trace_id"}}}},
	}, s.CreateOrder)
	huma.Register(api, huma.Operation{
		OperationID: "createTransfer", Method: http.MethodPost, Path: "/v1/transfers", DefaultStatus: http.StatusCreated, Summary: "Create a transfer",
		Extensions: map[string]any{"x-idempotent": map[string]any{"key": map[string]any{"body": "/idempotency_key", "minLength": 8}}},
	}, s.CreateTransfer)
	// Huma binds no form bodies: the charge takes the raw body and parses it as Stripe's API
	// does, and declares its form (Huma would write the raw body as a binary string).
	charge := &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{}}
	huma.Register(api, huma.Operation{
		OperationID: "createCharge", Method: http.MethodPost, Path: "/v1/charges", DefaultStatus: http.StatusCreated, Summary: "Create a charge",
		RequestBody: charge, Extensions: map[string]any{"x-idempotent": true},
	}, s.CreateCharge)
	charge.Content["application/x-www-form-urlencoded"] = chargeForm()
	huma.Register(api, huma.Operation{
		OperationID: "createProviderCharge", Method: http.MethodPost, Path: "/v1/provider-charges", DefaultStatus: http.StatusCreated,
		Summary: "Charge through the payment provider", Description: "Calls an external payment provider, so it runs in lease mode: the work happens outside the database.",
		Extensions: map[string]any{"x-idempotent": map[string]any{"mode": "lease", "lease": "1s"}},
	}, s.CreateProviderCharge)
}

// problem is an error of the API's own, in Huma's error model with a type of the service's.
func problem(status int, name, title, detail string) *huma.ErrorModel {
	return &huma.ErrorModel{Type: conformance.ProblemBase + name, Title: title, Status: status, Detail: detail}
}

var errUnauthenticated = problem(http.StatusUnauthorized, "unauthenticated", "Unauthenticated", "no Authorization: Bearer <tenant> header")

// tenantOf is the tenant the service's authentication put in the context.
func tenantOf(ctx context.Context) (string, error) {
	if t, _ := ctx.Value(tenantKey{}).(string); t != "" {
		return t, nil
	}
	return "", errUnauthenticated
}

// db is the handle the marked operations write through: the transaction idemgen holds for the
// request, so their rows commit with the stored response or not at all.
func db(ctx context.Context) (pgstore.DBTX, error) {
	tx, ok := runtime.TxFrom[pgstore.DBTX](ctx) // idemgen: the transaction instead of the pool
	if !ok {
		return nil, errors.New("no idempotency transaction: is idemhuma's middleware in front of this operation?")
	}
	return tx, nil
}

// work runs the handler's effect between the cases' test knobs: X-Test-Delay before it,
// X-Test-Fail after it (a panic, or an injected 500, 503 or 429 in place of its answer).
func work(ctx context.Context, effect func(ctx context.Context, tenant string) error) error {
	tenant, err := tenantOf(ctx)
	if err != nil {
		return err
	}
	if err := conformance.BeforeWork(ctx); err != nil {
		return err
	}
	if err := effect(ctx, tenant); err != nil {
		return err
	}
	if status := conformance.AfterWork(ctx); status != 0 {
		err := problem(status, "test-failure", "Injected failure", "X-Test-Fail: "+strconv.Itoa(status)+" after the handler did its work")
		if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
			return huma.ErrorWithHeaders(err, http.Header{"Retry-After": {"1"}})
		}
		return err
	}
	return nil
}

type PaymentRequest struct {
	_               struct{}          `additionalProperties:"true"`
	Amount          int64             `json:"amount" minimum:"1" doc:"minor units"`
	Currency        string            `json:"currency" minLength:"3" maxLength:"3"`
	To              string            `json:"to"`
	Description     *string           `json:"description,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	ClientTimestamp string            `json:"client_timestamp,omitempty" format:"date-time"`
}

type Payment struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	To       string `json:"to"`
	Status   string `json:"status"`
}

type PaymentOutput struct {
	Location string `header:"Location"`
	Body     Payment
}

// CreatePayment is POST /v1/payments. Amounts above conformance.DeclineAbove are declined with
// a final 402, which is stored and replayed like any answer.
func (s *Service) CreatePayment(ctx context.Context, in *struct{ Body PaymentRequest }) (*PaymentOutput, error) {
	p := Payment{ID: "pay_" + uuid.NewString(), Amount: in.Body.Amount, Currency: in.Body.Currency, To: in.Body.To, Status: "succeeded"}
	err := work(ctx, func(ctx context.Context, tenant string) error {
		if p.Amount > conformance.DeclineAbove {
			return problem(http.StatusPaymentRequired, "card-declined", "Payment declined", fmt.Sprintf("amounts above %d are declined", conformance.DeclineAbove))
		}
		tx, err := db(ctx)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO payments (id, tenant, amount, currency, to_account, description) VALUES ($1, $2, $3, $4, $5, $6)`,
			p.ID, tenant, p.Amount, p.Currency, p.To, in.Body.Description)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &PaymentOutput{Location: "/v1/payments/" + p.ID, Body: p}, nil
}

type PaymentPath struct {
	PaymentID string `path:"payment_id"`
}

// GetPayment is GET /v1/payments/{payment_id}, not marked: it reads through the pool.
func (s *Service) GetPayment(ctx context.Context, in *PaymentPath) (*struct{ Body Payment }, error) {
	tenant, err := tenantOf(ctx)
	if err != nil {
		return nil, err
	}
	out := &struct{ Body Payment }{Body: Payment{Status: "succeeded"}}
	p := &out.Body
	err = s.pool.QueryRow(ctx, `SELECT id, amount, currency, to_account FROM payments WHERE tenant = $1 AND id = $2`,
		tenant, in.PaymentID).Scan(&p.ID, &p.Amount, &p.Currency, &p.To)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, problem(http.StatusNotFound, "payment-not-found", "Payment not found", "no payment "+strconv.Quote(in.PaymentID))
	}
	return out, err
}

type RefundRequest struct {
	_      struct{} `additionalProperties:"true"`
	Amount int64    `json:"amount" minimum:"1"`
	Reason *string  `json:"reason,omitempty"`
}

type Refund struct {
	ID        string `json:"id"`
	PaymentID string `json:"payment_id"`
	Amount    int64  `json:"amount"`
}

// CreateRefund is POST /v1/payments/{payment_id}/refunds; a payment the tenant does not have
// is a final 404.
func (s *Service) CreateRefund(ctx context.Context, in *struct {
	PaymentPath
	Body RefundRequest
}) (*struct{ Body Refund }, error) {
	r := Refund{ID: "re_" + uuid.NewString(), PaymentID: in.PaymentID, Amount: in.Body.Amount}
	err := work(ctx, func(ctx context.Context, tenant string) error {
		tx, err := db(ctx)
		if err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payments WHERE tenant = $1 AND id = $2)`, tenant, r.PaymentID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return problem(http.StatusNotFound, "payment-not-found", "Payment not found", "no payment "+strconv.Quote(r.PaymentID))
		}
		_, err = tx.Exec(ctx, `INSERT INTO refunds (id, tenant, payment_id, amount, reason) VALUES ($1, $2, $3, $4, $5)`, r.ID, tenant, r.PaymentID, r.Amount, in.Body.Reason)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &struct{ Body Refund }{r}, nil
}

type Created struct {
	Body struct {
		ID string `json:"id"`
	}
}

func created(id string) *Created {
	out := &Created{}
	out.Body.ID = id
	return out
}

type OrderRequest struct {
	_     struct{} `additionalProperties:"true"`
	Payer struct {
		_       struct{} `additionalProperties:"true"`
		Name    string   `json:"name"`
		Country string   `json:"country,omitempty"`
	} `json:"payer"`
	Lines []struct {
		_         struct{} `additionalProperties:"true"`
		SKU       string   `json:"sku"`
		Qty       int      `json:"qty"`
		UnitPrice float64  `json:"unit_price,omitempty"`
	} `json:"lines"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// CreateOrder is POST /v1/orders.
func (s *Service) CreateOrder(ctx context.Context, in *struct{ Body OrderRequest }) (*Created, error) {
	id := "ord_" + uuid.NewString()
	err := work(ctx, func(ctx context.Context, tenant string) error {
		tx, err := db(ctx)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO orders (id, tenant, payer_name, lines) VALUES ($1, $2, $3, $4)`, id, tenant, in.Body.Payer.Name, len(in.Body.Lines))
		return err
	})
	if err != nil {
		return nil, err
	}
	return created(id), nil
}

type TransferRequest struct {
	_              struct{} `additionalProperties:"true"`
	IdempotencyKey string   `json:"idempotency_key" doc:"read by idemgen; the service ignores it"`
	Amount         int64    `json:"amount"`
	Destination    string   `json:"destination"`
}

// CreateTransfer is POST /v1/transfers, whose idempotency key travels in the body.
func (s *Service) CreateTransfer(ctx context.Context, in *struct{ Body TransferRequest }) (*Created, error) {
	id := "tr_" + uuid.NewString()
	err := work(ctx, func(ctx context.Context, tenant string) error {
		tx, err := db(ctx)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO transfers (id, tenant, amount, destination) VALUES ($1, $2, $3, $4)`, id, tenant, in.Body.Amount, in.Body.Destination)
		return err
	})
	if err != nil {
		return nil, err
	}
	return created(id), nil
}

// chargeForm is the form createCharge declares: Stripe's bracketed fields (deepObject).
func chargeForm() *huma.MediaType {
	str := &huma.Schema{Type: huma.TypeString}
	unset := &huma.Schema{Type: huma.TypeString, Enum: []any{""}}
	deep := &huma.Encoding{Style: "deepObject", Explode: new(true)}
	return &huma.MediaType{
		Schema: &huma.Schema{
			Type: huma.TypeObject, Required: []string{"amount", "currency"},
			Properties: map[string]*huma.Schema{
				"amount":      {Type: huma.TypeInteger},
				"currency":    str,
				"description": str,
				"metadata": {Description: "a map sent as metadata[key]=value, or metadata= to unset it",
					AnyOf: []*huma.Schema{{Type: huma.TypeObject, AdditionalProperties: str}, unset}},
				"items": {Type: huma.TypeArray, Items: &huma.Schema{Type: huma.TypeObject, Required: []string{"price"},
					Properties: map[string]*huma.Schema{"price": str, "quantity": {Type: huma.TypeInteger, Minimum: new(1.0)}}}},
				"shipping": {AnyOf: []*huma.Schema{{Type: huma.TypeObject, Required: []string{"name"}, AdditionalProperties: false,
					Properties: map[string]*huma.Schema{"name": str, "address": {Type: huma.TypeObject,
						Properties: map[string]*huma.Schema{"city": str, "line1": str}}}}, unset}},
			},
		},
		Encoding: map[string]*huma.Encoding{"metadata": deep, "items": deep, "shipping": deep},
	}
}

// CreateCharge is POST /v1/charges, a form body as Stripe's API takes it, parsed with
// net/url: the flat fields, and the bracketed ones (metadata[k], items[0][price],
// shipping[address][city]); metadata= and shipping= mean "unset".
func (s *Service) CreateCharge(ctx context.Context, in *struct {
	RawBody []byte `contentType:"application/x-www-form-urlencoded"`
}) (*Created, error) {
	form, err := url.ParseQuery(string(in.RawBody))
	if err != nil {
		return nil, problem(http.StatusBadRequest, "bad-request", "Bad request", err.Error())
	}
	amount, err := strconv.ParseInt(form.Get("amount"), 10, 64)
	if err != nil {
		return nil, problem(http.StatusBadRequest, "bad-request", "Bad request", "amount: "+err.Error())
	}
	var description *string
	if form.Has("description") {
		description = new(form.Get("description"))
	}
	metadata, items, shipping := bracketed(form, "metadata"), bracketed(form, "items"), bracketed(form, "shipping")
	id := "ch_" + uuid.NewString()
	err = work(ctx, func(ctx context.Context, tenant string) error {
		tx, err := db(ctx)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO charges (id, tenant, amount, currency, description, metadata, items, shipping) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			id, tenant, amount, form.Get("currency"), description, metadata, items, shipping)
		return err
	})
	if err != nil {
		return nil, err
	}
	return created(id), nil
}

// bracketed returns the form's fields under name ("name[...]"), as a JSON object from the rest
// of each field's name to its value, "" for name= (unset), or nil when the form has neither.
func bracketed(form url.Values, name string) []byte {
	if v, ok := form[name]; ok && len(v) > 0 && v[0] == "" {
		return []byte(`""`)
	}
	fields := map[string]string{}
	for k, v := range form {
		if rest, ok := strings.CutPrefix(k, name+"["); ok && len(v) > 0 {
			fields["["+rest] = v[0]
		}
	}
	if len(fields) == 0 {
		return nil
	}
	b, _ := json.Marshal(fields) // encoding/json sorts map keys
	return b
}

type ProviderChargeRequest struct {
	_      struct{} `additionalProperties:"true"`
	Amount int64    `json:"amount"`
}

type ProviderCharge struct {
	Body struct {
		ID                string `json:"id"`
		ProviderReference string `json:"provider_reference"`
	}
}

// CreateProviderCharge is POST /v1/provider-charges, in lease mode: it charges an external
// provider, so no transaction is held while it works. Its claim (runtime.LeaseFrom) gives the
// provider a key derived from the request's idempotency key, the same on every attempt, and its
// row is written in the transaction that completes the record (runtime.OnComplete).
func (s *Service) CreateProviderCharge(ctx context.Context, in *struct{ Body ProviderChargeRequest }) (*ProviderCharge, error) {
	lease := runtime.LeaseFrom(ctx) // idemgen: the claim, for the provider's key
	if lease == nil {
		return nil, errors.New("no idempotency lease: is idemhuma's middleware in front of this operation?")
	}
	out := &ProviderCharge{}
	err := work(ctx, func(ctx context.Context, tenant string) error {
		pk, err := lease.ProviderKey(ctx, "charge")
		if err != nil {
			return err
		}
		ref, err := s.provider.Charge(ctx, tenant, pk, in.Body.Amount)
		if err != nil {
			return err
		}
		out.Body.ID, out.Body.ProviderReference = "pc_"+lease.DeriveID("provider-charge"), ref
		runtime.OnComplete(ctx, func(ctx context.Context, tx pgstore.DBTX) error { // idemgen: the row commits with the record
			_, err := tx.Exec(ctx, `INSERT INTO provider_charges (id, tenant, amount, provider_reference) VALUES ($1, $2, $3, $4)`, out.Body.ID, tenant, in.Body.Amount, ref)
			return err
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
