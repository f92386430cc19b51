package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/examples/acp/checkout"
	"github.com/idemgen/idemgen/examples/acp/delegate"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The business functions of the generated operations. Each writes through tx only: the runtime
// commits tx together with the stored answer, so a retry with the same key gets this very
// answer back instead of a second session, order or token, and a 5xx rolls every write back.
// None of them reads, checks, stores or echoes an idempotency key: that is generated code's.

// createSession is POST /checkout_sessions (agentic-checkout RFC section 4.1): 201 with the
// authoritative session.
func (m *merchant) createSession(ctx context.Context, tx pgstore.DBTX, _ checkout.CreateCheckoutSessionParams, body checkout.CreateCheckoutSessionBody) (runtime.Response, error) {
	c := callerFrom(ctx)
	s := &session{
		ID: newID("cs_"), Status: statusNotReady, Currency: body.Currency,
		FulfillmentOptions: []json.RawMessage{}, Messages: []json.RawMessage{}, Links: []json.RawMessage{},
		Capabilities: json.RawMessage(`{}`),
	}
	s.setItems(body.LineItems)
	s.patchBuyer(body.Buyer)
	s.patchFulfillment(body.FulfillmentDetails)
	s.CreatedAt = time.Now().UTC().Format(time.RFC3339)
	s.refresh()
	if err := m.insertSession(ctx, tx, c.tenant, s); err != nil {
		return runtime.Response{}, err
	}
	return c.answer(ctx, http.StatusCreated, s)
}

// updateSession is POST /checkout_sessions/{id} (section 4.2): the body is read as ACP reads
// it (section 6.2): an absent member leaves the field, null clears it, a value sets it.
func (m *merchant) updateSession(ctx context.Context, tx pgstore.DBTX, p checkout.UpdateCheckoutSessionParams, body checkout.UpdateCheckoutSessionBody) (runtime.Response, error) {
	c := callerFrom(ctx)
	s, err := m.lockSession(ctx, tx, c.tenant, p.CheckoutSessionID)
	if err != nil || s == nil {
		return notFound(p.CheckoutSessionID, err)
	}
	if s.Status == statusCompleted || s.Status == statusCanceled {
		return acpError(http.StatusConflict, "invalid_request", "session_closed", "the checkout session is "+s.Status, "")
	}
	if body.LineItems != nil {
		if body.LineItems.Null {
			return acpError(http.StatusBadRequest, "invalid_request", "invalid", "a session needs line items", "$.line_items")
		}
		s.setItems(body.LineItems.Value)
	}
	s.patchBuyer(body.Buyer)
	s.patchFulfillment(body.FulfillmentDetails)
	s.refresh()
	if err := m.saveSession(ctx, tx, s); err != nil {
		return runtime.Response{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO session_updates (tenant, session_id, patch) VALUES ($1, $2, $3)`,
		c.tenant, s.ID, updateRecord(body)); err != nil {
		return runtime.Response{}, fmt.Errorf("record update: %w", err)
	}
	return c.answer(ctx, http.StatusOK, s)
}

// completeSession is POST /checkout_sessions/{id}/complete (section 4.4): it MUST create an
// order, once.
func (m *merchant) completeSession(ctx context.Context, tx pgstore.DBTX, p checkout.CompleteCheckoutSessionParams, body checkout.CompleteCheckoutSessionBody) (runtime.Response, error) {
	c := callerFrom(ctx)
	s, err := m.lockSession(ctx, tx, c.tenant, p.CheckoutSessionID)
	if err != nil || s == nil {
		return notFound(p.CheckoutSessionID, err)
	}
	if s.Status == statusCompleted || s.Status == statusCanceled {
		return acpError(http.StatusConflict, "invalid_request", "session_closed", "the checkout session is "+s.Status, "")
	}
	s.patchBuyer(body.Buyer)
	s.refresh()
	s.Status = statusCompleted
	s.Order = &order{ID: newID("ord_"), CheckoutSessionID: s.ID, PermalinkURL: "https://merchant.example.com/orders/" + s.ID}
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id, tenant, session_id, total) VALUES ($1, $2, $3, $4)`,
		s.Order.ID, c.tenant, s.ID, s.total()); err != nil {
		return runtime.Response{}, fmt.Errorf("insert order: %w", err)
	}
	if err := m.saveSession(ctx, tx, s); err != nil {
		return runtime.Response{}, err
	}
	return c.answer(ctx, http.StatusOK, s)
}

// cancelSession is POST /checkout_sessions/{id}/cancel (section 4.5): 200 when canceled, 405
// when the session is already completed or canceled.
func (m *merchant) cancelSession(ctx context.Context, tx pgstore.DBTX, p checkout.CancelCheckoutSessionParams, body checkout.CancelCheckoutSessionBody) (runtime.Response, error) {
	c := callerFrom(ctx)
	s, err := m.lockSession(ctx, tx, c.tenant, p.CheckoutSessionID)
	if err != nil || s == nil {
		return notFound(p.CheckoutSessionID, err)
	}
	if s.Status == statusCompleted || s.Status == statusCanceled {
		return acpError(http.StatusMethodNotAllowed, "invalid_request", "session_closed", "the checkout session is "+s.Status, "")
	}
	var reason *string
	if body.IntentTrace != nil && !body.IntentTrace.Null {
		r := string(body.IntentTrace.Value.ReasonCode)
		reason = &r
	}
	s.Status = statusCanceled
	if _, err := tx.Exec(ctx, `INSERT INTO cancellations (tenant, session_id, reason) VALUES ($1, $2, $3)`, c.tenant, s.ID, reason); err != nil {
		return runtime.Response{}, fmt.Errorf("insert cancellation: %w", err)
	}
	if err := m.saveSession(ctx, tx, s); err != nil {
		return runtime.Response{}, err
	}
	return c.answer(ctx, http.StatusOK, s)
}

// delegatePayment is POST /agentic_commerce/delegate_payment (delegate-payment RFC): it
// tokenizes the card for use within the allowance and answers 201 with the vault token. Its
// metadata names the idempotency key the token was made under (the RFC's example response
// does), which the handler reads from the runtime rather than from the header.
func (m *merchant) delegatePayment(ctx context.Context, tx pgstore.DBTX, _ delegate.DelegatePaymentParams, body delegate.DelegatePaymentBody) (runtime.Response, error) {
	c := callerFrom(ctx)
	key, _ := runtime.IdempotencyKey(ctx)
	last4 := ""
	if n := body.PaymentMethod.Number; len(n) >= 4 {
		last4 = n[len(n)-4:]
	}
	tok := delegated{ID: newID("vt_"), Created: time.Now().UTC().Format(time.RFC3339), Metadata: map[string]string{}}
	for k, v := range body.Metadata {
		if !v.Null {
			tok.Metadata[k] = v.Value
		}
	}
	tok.Metadata["merchant_id"] = body.Allowance.MerchantID
	tok.Metadata["idempotency_key"] = key
	if _, err := tx.Exec(ctx, `INSERT INTO delegated_payments (id, tenant, idempotency_key, max_amount, currency, session_ref, last4)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, tok.ID, c.tenant, key, body.Allowance.MaxAmount, body.Allowance.Currency,
		body.Allowance.CheckoutSessionID, last4); err != nil {
		return runtime.Response{}, fmt.Errorf("insert delegated payment: %w", err)
	}
	return c.answer(ctx, http.StatusCreated, tok)
}

// getSession is GET /checkout_sessions/{id} (section 4.3): the latest authoritative state, or
// 404. It is safe, so it has no key and no idempotency wrapper.
func (m *merchant) getSession(w http.ResponseWriter, r *http.Request) {
	c := callerFrom(r.Context())
	if c.tenant == "" {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "send Authorization: Bearer <token>")
		return
	}
	var doc []byte
	err := m.pool.QueryRow(r.Context(), `SELECT doc FROM checkout_sessions WHERE tenant = $1 AND id = $2`,
		c.tenant, r.PathValue("checkout_session_id")).Scan(&doc)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		writeError(w, http.StatusNotFound, "not_found", "no such checkout session")
	case err != nil:
		writeError(w, http.StatusInternalServerError, "processing_error", "the session could not be read")
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}
}

// insertSession writes a new session.
func (m *merchant) insertSession(ctx context.Context, tx pgstore.DBTX, tenant string, s *session) error {
	doc, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode session: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO checkout_sessions (id, tenant, status, doc) VALUES ($1, $2, $3, $4)`, s.ID, tenant, s.Status, doc); err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// lockSession reads the caller's session for update; nil without error when there is none.
func (m *merchant) lockSession(ctx context.Context, tx pgstore.DBTX, tenant, id string) (*session, error) {
	var doc []byte
	err := tx.QueryRow(ctx, `SELECT doc FROM checkout_sessions WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	var s session
	if err := json.Unmarshal(doc, &s); err != nil {
		return nil, fmt.Errorf("decode session %s: %w", id, err)
	}
	return &s, nil
}

// saveSession writes a changed session back.
func (m *merchant) saveSession(ctx context.Context, tx pgstore.DBTX, s *session) error {
	s.UpdatedAt = time.Now().UTC().Format(time.RFC3339)
	doc, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode session: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE checkout_sessions SET status = $2, doc = $3, updated_at = now() WHERE id = $1`, s.ID, s.Status, doc); err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	return nil
}

// notFound is the answer to a session id the caller has none of (a final 404, stored like any
// 4xx), or err.
func notFound(id string, err error) (runtime.Response, error) {
	if err != nil {
		return runtime.Response{}, err
	}
	return acpError(http.StatusNotFound, "invalid_request", "not_found", "no checkout session "+id, "")
}

// updateRecord is the update as the handler applied it, for session_updates: which members it
// set, cleared or left.
func updateRecord(body checkout.UpdateCheckoutSessionBody) []byte {
	state := func(present, null bool) string {
		switch {
		case !present:
			return "left"
		case null:
			return "cleared"
		}
		return "set"
	}
	rec := map[string]string{
		"buyer":               state(body.Buyer != nil, body.Buyer != nil && body.Buyer.Null),
		"line_items":          state(body.LineItems != nil, body.LineItems != nil && body.LineItems.Null),
		"fulfillment_details": state(body.FulfillmentDetails != nil, body.FulfillmentDetails != nil && body.FulfillmentDetails.Null),
	}
	b, _ := json.Marshal(rec)
	return b
}

// acpError is the merchant's own refusal in ACP's flat error object (agentic-checkout RFC
// section 3.1); param is an RFC 9535 JSONPath or "".
func acpError(status int, typ, code, message, param string) (runtime.Response, error) {
	return runtime.JSON(status, errorObject{Type: typ, Code: code, Message: message, Param: param})
}

// writeError writes ACP's flat error object outside the generated operations.
func writeError(w http.ResponseWriter, status int, code, message string) {
	typ := "invalid_request"
	if status >= 500 {
		typ = "processing_error"
	}
	b, _ := json.Marshal(errorObject{Type: typ, Code: code, Message: message})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

type errorObject struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
}

// delegated is the delegate-payment answer: the vault token.
type delegated struct {
	ID       string            `json:"id"`
	Created  string            `json:"created"`
	Metadata map[string]string `json:"metadata"`
}

// newID returns prefix and 20 random letters and digits.
func newID(prefix string) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b)
}
