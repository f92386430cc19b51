package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// declineAbove is the largest amount (minor units) createPayment accepts; above it the payment
// is declined with a final 402 (testdata/cases/README.md).
const declineAbove = 1000000

// problemBase prefixes the type URI of the service's own problems (the runtime's problems
// have their own).
const problemBase = "https://idemgen.dev/conformance/problems/"

// service is the business logic, written against plain inputs so that it reads like any
// handler code: each marked operation does its work through the transaction it is given, and
// the unmarked reads go through tables.
type service struct {
	tables   Tables
	provider *Provider
}

type paymentInput struct {
	Amount       int64
	Currency, To string
	Description  *string
}

// payment is the Payment schema of conformance.yaml.
type payment struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	To       string `json:"to"`
	Status   string `json:"status"`
}

func (s *service) createPayment(ctx context.Context, tx pgstore.DBTX, in paymentInput) (runtime.Response, error) {
	k := knobsFrom(ctx)
	if err := k.sleep(ctx); err != nil {
		return runtime.Response{}, err
	}
	if in.Amount > declineAbove {
		// A decline is a final answer: the runtime stores and replays it, so the retry of a
		// declined charge never reaches the card network again.
		return k.after(problem(http.StatusPaymentRequired, "card-declined", "Payment declined",
			fmt.Sprintf("amounts above %d are declined", declineAbove)))
	}
	p := payment{ID: "pay_" + uuid.NewString(), Amount: in.Amount, Currency: in.Currency, To: in.To, Status: "succeeded"}
	if _, err := tx.Exec(ctx,
		`INSERT INTO payments (id, tenant, amount, currency, to_account, description) VALUES ($1, $2, $3, $4, $5, $6)`,
		p.ID, k.tenant, p.Amount, p.Currency, p.To, in.Description); err != nil {
		return runtime.Response{}, fmt.Errorf("insert payment: %w", err)
	}
	resp := jsonResponse(http.StatusCreated, p)
	resp.Header.Set("Location", "/v1/payments/"+p.ID)
	return k.after(resp)
}

// getPayment serves GET /v1/payments/{payment_id}, an operation that is not marked: it never
// touches the idempotency store, whatever headers the request carries.
func (s *service) getPayment(w http.ResponseWriter, r *http.Request) {
	tenant, err := tenantOf(r)
	if err != nil {
		writeProblem(w, http.StatusUnauthorized, "unauthenticated", "Unauthenticated", err.Error())
		return
	}
	var p payment
	err = s.tables.QueryRow(r.Context(),
		`SELECT id, amount, currency, to_account FROM payments WHERE tenant = $1 AND id = $2`,
		tenant, r.PathValue("payment_id")).Scan(&p.ID, &p.Amount, &p.Currency, &p.To)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		writeProblem(w, http.StatusNotFound, "payment-not-found", "Payment not found", "no payment "+strconv.Quote(r.PathValue("payment_id")))
		return
	case err != nil:
		writeProblem(w, http.StatusInternalServerError, "internal", "Internal error", "the payment could not be read")
		return
	}
	p.Status = "succeeded"
	writeResponse(w, jsonResponse(http.StatusOK, p))
}

type refundInput struct {
	PaymentID string
	Amount    int64
	Reason    *string
}

func (s *service) createRefund(ctx context.Context, tx pgstore.DBTX, in refundInput) (runtime.Response, error) {
	k := knobsFrom(ctx)
	if err := k.sleep(ctx); err != nil {
		return runtime.Response{}, err
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payments WHERE tenant = $1 AND id = $2)`,
		k.tenant, in.PaymentID).Scan(&exists); err != nil {
		return runtime.Response{}, fmt.Errorf("find payment: %w", err)
	}
	if !exists {
		return k.after(problem(http.StatusNotFound, "payment-not-found", "Payment not found",
			"no payment "+strconv.Quote(in.PaymentID)))
	}
	id := "re_" + uuid.NewString()
	if _, err := tx.Exec(ctx, `INSERT INTO refunds (id, tenant, payment_id, amount, reason) VALUES ($1, $2, $3, $4, $5)`,
		id, k.tenant, in.PaymentID, in.Amount, in.Reason); err != nil {
		return runtime.Response{}, fmt.Errorf("insert refund: %w", err)
	}
	return k.after(jsonResponse(http.StatusCreated, map[string]any{"id": id, "payment_id": in.PaymentID, "amount": in.Amount}))
}

type orderInput struct {
	PayerName string
	Lines     int
}

func (s *service) createOrder(ctx context.Context, tx pgstore.DBTX, in orderInput) (runtime.Response, error) {
	k := knobsFrom(ctx)
	if err := k.sleep(ctx); err != nil {
		return runtime.Response{}, err
	}
	id := "ord_" + uuid.NewString()
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id, tenant, payer_name, lines) VALUES ($1, $2, $3, $4)`,
		id, k.tenant, in.PayerName, in.Lines); err != nil {
		return runtime.Response{}, fmt.Errorf("insert order: %w", err)
	}
	return k.after(jsonResponse(http.StatusCreated, map[string]string{"id": id}))
}

type transferInput struct {
	Amount      int64
	Destination string
}

func (s *service) createTransfer(ctx context.Context, tx pgstore.DBTX, in transferInput) (runtime.Response, error) {
	k := knobsFrom(ctx)
	if err := k.sleep(ctx); err != nil {
		return runtime.Response{}, err
	}
	id := "tr_" + uuid.NewString()
	if _, err := tx.Exec(ctx, `INSERT INTO transfers (id, tenant, amount, destination) VALUES ($1, $2, $3, $4)`,
		id, k.tenant, in.Amount, in.Destination); err != nil {
		return runtime.Response{}, fmt.Errorf("insert transfer: %w", err)
	}
	return k.after(jsonResponse(http.StatusCreated, map[string]string{"id": id}))
}

type chargeInput struct {
	Amount      int64
	Currency    string
	Description *string
	// Metadata, Items and Shipping are the bracketed form fields (metadata[k], items[0][price],
	// shipping[address][city]) as JSON documents: nil when absent, "" when sent empty to unset.
	Metadata, Items, Shipping []byte
}

// unsettableJSON is the JSON of a form field declared anyOf [X, enum [""]]: nil when absent,
// the string "" when unset, else X's.
func unsettableJSON[T any](u *canonical.Unsettable[T]) ([]byte, error) {
	switch {
	case u == nil:
		return nil, nil
	case u.Unset:
		return []byte(`""`), nil
	}
	return json.Marshal(u.Value)
}

func (s *service) createCharge(ctx context.Context, tx pgstore.DBTX, in chargeInput) (runtime.Response, error) {
	k := knobsFrom(ctx)
	if err := k.sleep(ctx); err != nil {
		return runtime.Response{}, err
	}
	id := "ch_" + uuid.NewString()
	if _, err := tx.Exec(ctx, `INSERT INTO charges (id, tenant, amount, currency, description, metadata, items, shipping) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		id, k.tenant, in.Amount, in.Currency, in.Description, jsonb(in.Metadata), jsonb(in.Items), jsonb(in.Shipping)); err != nil {
		return runtime.Response{}, fmt.Errorf("insert charge: %w", err)
	}
	return k.after(jsonResponse(http.StatusCreated, map[string]string{"id": id}))
}

// jsonb passes a JSON document to a jsonb column as text, NULL when there is none.
func jsonb(doc []byte) *string {
	if doc == nil {
		return nil
	}
	s := string(doc)
	return &s
}

// createProviderCharge is the lease-mode handler: it charges through the provider under the
// key the runtime derives from (scope, idempotency key), outside any transaction, and records
// the charge in the completion phase, which commits with the idempotency record.
func (s *service) createProviderCharge(ctx context.Context, lease *runtime.Lease, amount int64) (runtime.CompleteFunc[pgstore.DBTX], error) {
	k := knobsFrom(ctx)
	if err := k.sleep(ctx); err != nil {
		return nil, err
	}
	pk, err := lease.ProviderKey(ctx, "charge")
	if err != nil {
		return nil, err
	}
	ref, err := s.provider.Charge(ctx, k.tenant, pk, amount)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgstore.DBTX) (runtime.Response, error) {
		id := "pc_" + uuid.NewString()
		if _, err := tx.Exec(ctx, `INSERT INTO provider_charges (id, tenant, amount, provider_reference) VALUES ($1, $2, $3, $4)`,
			id, k.tenant, amount, ref); err != nil {
			return runtime.Response{}, fmt.Errorf("insert provider charge: %w", err)
		}
		// X-Test-Fail applies here, after the provider call and the write: the failure rolls
		// the write back, while the provider has already charged.
		return k.after(jsonResponse(http.StatusCreated, map[string]string{"id": id, "provider_reference": ref}))
	}, nil
}

// effects serves GET /_effects: the tenant's row count in every business table, and the
// provider's real charges, as one JSON object.
func (s *service) effects(w http.ResponseWriter, r *http.Request) {
	tenant, err := tenantOf(r)
	if err != nil {
		writeProblem(w, http.StatusUnauthorized, "unauthenticated", "Unauthenticated", err.Error())
		return
	}
	out := map[string]int64{}
	for _, table := range effectTables {
		var n int64
		// table comes from effectTables, never from the request.
		if err := s.tables.QueryRow(r.Context(), `SELECT count(*) FROM `+table+` WHERE tenant = $1`, tenant).Scan(&n); err != nil {
			writeProblem(w, http.StatusInternalServerError, "internal", "Internal error", "count "+table)
			return
		}
		out[table] = n
	}
	out["provider_calls"] = s.provider.Calls(tenant)
	writeResponse(w, jsonResponse(http.StatusOK, out))
}

// after applies X-Test-Fail once the handler's work is done: a 5xx or 429 answer (which the
// runtime does not store, so the transaction rolls back and the key is released), or a panic.
func (k knobs) after(resp runtime.Response) (runtime.Response, error) {
	switch k.fail {
	case "":
		return resp, nil
	case "panic":
		panic("conformance: X-Test-Fail: panic")
	}
	code, _ := strconv.Atoi(k.fail)
	p := problem(code, "test-failure", "Injected failure", "X-Test-Fail: "+k.fail+" after the handler did its work")
	if code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests {
		p.Header.Set("Retry-After", "1")
	}
	return p, nil
}

// problem builds an RFC 9457 problem response of the service's own.
func problem(status int, name, title, detail string) runtime.Response {
	body, _ := json.Marshal(map[string]any{"type": problemBase + name, "title": title, "status": status, "detail": detail})
	return runtime.Response{Status: status, Header: http.Header{"Content-Type": {"application/problem+json"}}, Body: body}
}

func jsonResponse(status int, v any) runtime.Response {
	body, err := json.Marshal(v)
	if err != nil {
		// Only the service's own plain structs and maps are marshalled here.
		panic(fmt.Sprintf("conformance: marshal response: %v", err))
	}
	return runtime.Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
}

func writeResponse(w http.ResponseWriter, resp runtime.Response) {
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.Status)
	w.Write(resp.Body)
}

func writeProblem(w http.ResponseWriter, status int, name, title, detail string) {
	writeResponse(w, problem(status, name, title, detail))
}
