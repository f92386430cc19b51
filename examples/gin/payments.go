package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	idemgin "github.com/idemgen/idemgen/adapters/gin"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Service holds the payments API's handlers: gin handlers that bind their own request structs,
// write through a database handle and answer with c.JSON, or record an *apiError with c.Error.
type Service struct {
	pool     *pgxpool.Pool
	provider *conformance.Provider
}

// db is the handle the marked operations write through: the transaction idemgen holds for the
// request, so their rows commit with the stored response or not at all. Served without the
// adapter, a marked operation has none, and that wiring bug fails loudly.
func db(c *gin.Context) (pgstore.DBTX, error) {
	tx, ok := idemgin.TxFrom[pgstore.DBTX](c) // idemgen: the transaction instead of the pool
	if !ok {
		return nil, errors.New("no idempotency transaction: is idemgin.Middleware in front of this route?")
	}
	return tx, nil
}

// work runs the handler's effect between the cases' test knobs (X-Test-Delay before it,
// X-Test-Fail after it: a panic, or an injected 500, 503 or 429 in place of its answer) and
// reports whether the handler may answer; when not, the error is recorded for renderErrors.
func work(c *gin.Context, effect func(ctx context.Context, tenant string) error) bool {
	ctx := c.Request.Context()
	tenant, err := tenantOf(c)
	if err == nil {
		err = conformance.BeforeWork(ctx)
	}
	if err == nil {
		err = effect(ctx, tenant)
	}
	if err == nil {
		if status := conformance.AfterWork(ctx); status != 0 {
			err = failure{status}
		}
	}
	if err != nil {
		_ = c.Error(err)
		c.Abort()
		return false
	}
	return true
}

// bind binds the body into v with b, recording a binding error (a 400) for renderErrors.
func bind(c *gin.Context, v any, b func(any) error) bool {
	if err := b(v); err != nil {
		_ = c.Error(err).SetType(gin.ErrorTypeBind)
		c.Abort()
		return false
	}
	return true
}

type paymentRequest struct {
	Amount          int64             `json:"amount" binding:"required,min=1"`
	Currency        string            `json:"currency" binding:"required,len=3"`
	To              string            `json:"to" binding:"required"`
	Description     *string           `json:"description"`
	Metadata        map[string]string `json:"metadata"`
	ClientTimestamp string            `json:"client_timestamp"`
}

type payment struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	To       string `json:"to"`
	Status   string `json:"status"`
}

// CreatePayment is POST /v1/payments. Amounts above conformance.DeclineAbove are declined with
// a final 402, which is stored and replayed like any answer.
func (s *Service) CreatePayment(c *gin.Context) {
	var req paymentRequest
	if !bind(c, &req, c.ShouldBindJSON) {
		return
	}
	p := payment{ID: "pay_" + uuid.NewString(), Amount: req.Amount, Currency: req.Currency, To: req.To, Status: "succeeded"}
	ok := work(c, func(ctx context.Context, tenant string) error {
		if req.Amount > conformance.DeclineAbove {
			return &apiError{http.StatusPaymentRequired, "card-declined", "Payment declined", fmt.Sprintf("amounts above %d are declined", conformance.DeclineAbove)}
		}
		tx, err := db(c)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO payments (id, tenant, amount, currency, to_account, description) VALUES ($1, $2, $3, $4, $5, $6)`,
			p.ID, tenant, p.Amount, p.Currency, p.To, req.Description)
		return err
	})
	if !ok {
		return
	}
	c.Header("Location", "/v1/payments/"+p.ID)
	c.JSON(http.StatusCreated, p)
}

// GetPayment is GET /v1/payments/:id, not marked: it reads through the pool.
func (s *Service) GetPayment(c *gin.Context) {
	tenant, err := tenantOf(c)
	if err != nil {
		_ = c.Error(err)
		return
	}
	p := payment{Status: "succeeded"}
	err = s.pool.QueryRow(c.Request.Context(), `SELECT id, amount, currency, to_account FROM payments WHERE tenant = $1 AND id = $2`,
		tenant, c.Param("id")).Scan(&p.ID, &p.Amount, &p.Currency, &p.To)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		_ = c.Error(&apiError{http.StatusNotFound, "payment-not-found", "Payment not found", "no payment " + strconv.Quote(c.Param("id"))})
	case err != nil:
		_ = c.Error(err)
	default:
		c.JSON(http.StatusOK, p)
	}
}

type refundRequest struct {
	Amount int64   `json:"amount" binding:"required,min=1"`
	Reason *string `json:"reason"`
}

// CreateRefund is POST /v1/payments/:id/refunds; a payment the tenant does not have is a final
// 404.
func (s *Service) CreateRefund(c *gin.Context) {
	var req refundRequest
	if !bind(c, &req, c.ShouldBindJSON) {
		return
	}
	id, paymentID := "re_"+uuid.NewString(), c.Param("id")
	ok := work(c, func(ctx context.Context, tenant string) error {
		tx, err := db(c)
		if err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payments WHERE tenant = $1 AND id = $2)`, tenant, paymentID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return &apiError{http.StatusNotFound, "payment-not-found", "Payment not found", "no payment " + strconv.Quote(paymentID)}
		}
		_, err = tx.Exec(ctx, `INSERT INTO refunds (id, tenant, payment_id, amount, reason) VALUES ($1, $2, $3, $4, $5)`, id, tenant, paymentID, req.Amount, req.Reason)
		return err
	})
	if ok {
		c.JSON(http.StatusCreated, gin.H{"id": id, "payment_id": paymentID, "amount": req.Amount})
	}
}

type orderRequest struct {
	Payer struct {
		Name    string `json:"name" binding:"required"`
		Country string `json:"country"`
	} `json:"payer"`
	Lines []struct {
		SKU       string  `json:"sku" binding:"required"`
		Qty       int     `json:"qty"`
		UnitPrice float64 `json:"unit_price"`
	} `json:"lines" binding:"required,dive"`
	Metadata map[string]string `json:"metadata"`
}

// CreateOrder is POST /v1/orders.
func (s *Service) CreateOrder(c *gin.Context) {
	var req orderRequest
	if !bind(c, &req, c.ShouldBindJSON) {
		return
	}
	id := "ord_" + uuid.NewString()
	ok := work(c, func(ctx context.Context, tenant string) error {
		tx, err := db(c)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO orders (id, tenant, payer_name, lines) VALUES ($1, $2, $3, $4)`, id, tenant, req.Payer.Name, len(req.Lines))
		return err
	})
	if ok {
		c.JSON(http.StatusCreated, gin.H{"id": id})
	}
}

type transferRequest struct {
	IdempotencyKey string `json:"idempotency_key"` // read by idemgen; the service ignores it
	Amount         int64  `json:"amount" binding:"required"`
	Destination    string `json:"destination" binding:"required"`
}

// CreateTransfer is POST /v1/transfers, whose idempotency key travels in the body.
func (s *Service) CreateTransfer(c *gin.Context) {
	var req transferRequest
	if !bind(c, &req, c.ShouldBindJSON) {
		return
	}
	id := "tr_" + uuid.NewString()
	ok := work(c, func(ctx context.Context, tenant string) error {
		tx, err := db(c)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO transfers (id, tenant, amount, destination) VALUES ($1, $2, $3, $4)`, id, tenant, req.Amount, req.Destination)
		return err
	})
	if ok {
		c.JSON(http.StatusCreated, gin.H{"id": id})
	}
}

type chargeRequest struct {
	Amount      int64   `form:"amount" binding:"required"`
	Currency    string  `form:"currency" binding:"required"`
	Description *string `form:"description"`
}

// CreateCharge is POST /v1/charges, a form body as Stripe's API takes it: the flat fields bound
// with c.ShouldBind, the bracketed ones (metadata[k], items[0][price], shipping[address][city])
// read from c.Request.PostForm; metadata= and shipping= mean "unset".
func (s *Service) CreateCharge(c *gin.Context) {
	var req chargeRequest
	if !bind(c, &req, c.ShouldBind) {
		return
	}
	form := c.Request.PostForm
	metadata, items, shipping := bracketed(form, "metadata"), bracketed(form, "items"), bracketed(form, "shipping")
	id := "ch_" + uuid.NewString()
	ok := work(c, func(ctx context.Context, tenant string) error {
		tx, err := db(c)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO charges (id, tenant, amount, currency, description, metadata, items, shipping) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			id, tenant, req.Amount, req.Currency, req.Description, metadata, items, shipping)
		return err
	})
	if ok {
		c.JSON(http.StatusCreated, gin.H{"id": id})
	}
}

// bracketed returns the form's fields under name ("name[...]"), as a JSON object from the rest
// of each field's name to its value, "" for name= (unset), or nil when the form has neither.
func bracketed(form map[string][]string, name string) []byte {
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

// CreateProviderCharge is POST /v1/provider-charges, in lease mode: it charges an external
// provider, so no transaction is held while it works. Its claim (idemgin.LeaseFrom) gives the
// provider a key derived from the request's idempotency key, the same on every attempt, and its
// row is written in the transaction that completes the record (idemgin.OnComplete).
func (s *Service) CreateProviderCharge(c *gin.Context) {
	var req struct {
		Amount int64 `json:"amount" binding:"required"`
	}
	if !bind(c, &req, c.ShouldBindJSON) {
		return
	}
	lease := idemgin.LeaseFrom(c) // idemgen: the claim, for the provider's key
	if lease == nil {
		_ = c.Error(errors.New("no idempotency lease: is idemgin.Middleware in front of this route?"))
		return
	}
	var out gin.H
	ok := work(c, func(ctx context.Context, tenant string) error {
		pk, err := lease.ProviderKey(ctx, "charge")
		if err != nil {
			return err
		}
		ref, err := s.provider.Charge(ctx, tenant, pk, req.Amount)
		if err != nil {
			return err
		}
		id := "pc_" + lease.DeriveID("provider-charge")
		out = gin.H{"id": id, "provider_reference": ref}
		idemgin.OnComplete(c, func(ctx context.Context, tx pgstore.DBTX) error { // idemgen: the row commits with the record
			_, err := tx.Exec(ctx, `INSERT INTO provider_charges (id, tenant, amount, provider_reference) VALUES ($1, $2, $3, $4)`, id, tenant, req.Amount, ref)
			return err
		})
		return nil
	})
	if ok {
		c.JSON(http.StatusCreated, out)
	}
}
