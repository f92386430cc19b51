package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	idemfiber "github.com/idemgen/idemgen/adapters/fiber"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Service holds the payments API's handlers: fiber handlers that bind their own request
// structs, write through a database handle and answer with c.JSON or an *apiError.
type Service struct {
	pool     *pgxpool.Pool
	provider *conformance.Provider
}

// db is the handle the marked operations write through: the transaction idemgen holds for the
// request, so their rows commit with the stored response or not at all. Served without the
// adapter, a marked operation has none, and that wiring bug fails loudly.
func db(c *fiber.Ctx) (pgstore.DBTX, error) {
	tx, ok := idemfiber.TxFrom[pgstore.DBTX](c) // idemgen: the transaction instead of the pool
	if !ok {
		return nil, errors.New("no idempotency transaction: is idemfiber.Middleware in front of this route?")
	}
	return tx, nil
}

// work runs the handler's effect between the cases' test knobs: X-Test-Delay before it,
// X-Test-Fail after it (a panic, or an injected 500, 503 or 429 in place of its answer).
func work(c *fiber.Ctx, effect func(ctx context.Context, tenant string) error) error {
	ctx := c.UserContext()
	tenant, err := tenantOf(c)
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
		return failure{status}
	}
	return nil
}

// bindJSON is the service's JSON binder: c.BodyParser, a parse error a 400.
func bindJSON(c *fiber.Ctx, v any) error {
	if err := c.BodyParser(v); err != nil {
		return invalid("%v", err)
	}
	return nil
}

type paymentRequest struct {
	Amount          int64             `json:"amount"`
	Currency        string            `json:"currency"`
	To              string            `json:"to"`
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
func (s *Service) CreatePayment(c *fiber.Ctx) error {
	var req paymentRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.Amount < 1 || len(req.Currency) != 3 || req.To == "" {
		return invalid("a payment needs an amount of at least 1, a three-letter currency and a destination")
	}
	p := payment{ID: "pay_" + uuid.NewString(), Amount: req.Amount, Currency: req.Currency, To: req.To, Status: "succeeded"}
	err := work(c, func(ctx context.Context, tenant string) error {
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
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderLocation, "/v1/payments/"+p.ID)
	return c.Status(http.StatusCreated).JSON(p)
}

// GetPayment is GET /v1/payments/:id, not marked: it reads through the pool.
func (s *Service) GetPayment(c *fiber.Ctx) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	id := c.Params("id")
	p := payment{Status: "succeeded"}
	err = s.pool.QueryRow(c.UserContext(), `SELECT id, amount, currency, to_account FROM payments WHERE tenant = $1 AND id = $2`,
		tenant, id).Scan(&p.ID, &p.Amount, &p.Currency, &p.To)
	if errors.Is(err, pgx.ErrNoRows) {
		return &apiError{http.StatusNotFound, "payment-not-found", "Payment not found", "no payment " + strconv.Quote(id)}
	}
	if err != nil {
		return err
	}
	return c.JSON(p)
}

// CreateRefund is POST /v1/payments/:id/refunds; a payment the tenant does not have is a final
// 404.
func (s *Service) CreateRefund(c *fiber.Ctx) error {
	var req struct {
		Amount int64   `json:"amount"`
		Reason *string `json:"reason"`
	}
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	id, paymentID := "re_"+uuid.NewString(), c.Params("id")
	err := work(c, func(ctx context.Context, tenant string) error {
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
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{"id": id, "payment_id": paymentID, "amount": req.Amount})
}

// CreateOrder is POST /v1/orders.
func (s *Service) CreateOrder(c *fiber.Ctx) error {
	var req struct {
		Payer struct {
			Name    string `json:"name"`
			Country string `json:"country"`
		} `json:"payer"`
		Lines []struct {
			SKU       string  `json:"sku"`
			Qty       int     `json:"qty"`
			UnitPrice float64 `json:"unit_price"`
		} `json:"lines"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	id := "ord_" + uuid.NewString()
	err := work(c, func(ctx context.Context, tenant string) error {
		tx, err := db(c)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO orders (id, tenant, payer_name, lines) VALUES ($1, $2, $3, $4)`, id, tenant, req.Payer.Name, len(req.Lines))
		return err
	})
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{"id": id})
}

// CreateTransfer is POST /v1/transfers, whose idempotency key travels in the body.
func (s *Service) CreateTransfer(c *fiber.Ctx) error {
	var req struct {
		IdempotencyKey string `json:"idempotency_key"` // read by idemgen; the service ignores it
		Amount         int64  `json:"amount"`
		Destination    string `json:"destination"`
	}
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	id := "tr_" + uuid.NewString()
	err := work(c, func(ctx context.Context, tenant string) error {
		tx, err := db(c)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO transfers (id, tenant, amount, destination) VALUES ($1, $2, $3, $4)`, id, tenant, req.Amount, req.Destination)
		return err
	})
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{"id": id})
}

// CreateCharge is POST /v1/charges, a form body as Stripe's API takes it, read from fasthttp's
// parsed form (c.Request().PostArgs()): the flat fields, and the bracketed ones (metadata[k],
// items[0][price], shipping[address][city]); metadata= and shipping= mean "unset".
func (s *Service) CreateCharge(c *fiber.Ctx) error {
	form := map[string][]string{}
	c.Request().PostArgs().VisitAll(func(k, v []byte) {
		form[string(k)] = append(form[string(k)], string(v))
	})
	amount, err := strconv.ParseInt(first(form, "amount"), 10, 64)
	if err != nil {
		return invalid("amount: %v", err)
	}
	currency := first(form, "currency")
	var description *string
	if v, ok := form["description"]; ok && len(v) > 0 {
		description = &v[0]
	}
	metadata, items, shipping := bracketed(form, "metadata"), bracketed(form, "items"), bracketed(form, "shipping")
	id := "ch_" + uuid.NewString()
	err = work(c, func(ctx context.Context, tenant string) error {
		tx, err := db(c)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO charges (id, tenant, amount, currency, description, metadata, items, shipping) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			id, tenant, amount, currency, description, metadata, items, shipping)
		return err
	})
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{"id": id})
}

func first(form map[string][]string, name string) string {
	if v := form[name]; len(v) > 0 {
		return v[0]
	}
	return ""
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
// provider, so no transaction is held while it works. Its claim (idemfiber.LeaseFrom) gives
// the provider a key derived from the request's idempotency key, the same on every attempt,
// and its row is written in the transaction that completes the record (idemfiber.OnComplete).
func (s *Service) CreateProviderCharge(c *fiber.Ctx) error {
	var req struct {
		Amount int64 `json:"amount"`
	}
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	lease := idemfiber.LeaseFrom(c) // idemgen: the claim, for the provider's key
	if lease == nil {
		return errors.New("no idempotency lease: is idemfiber.Middleware in front of this route?")
	}
	var out fiber.Map
	err := work(c, func(ctx context.Context, tenant string) error {
		pk, err := lease.ProviderKey(ctx, "charge")
		if err != nil {
			return err
		}
		ref, err := s.provider.Charge(ctx, tenant, pk, req.Amount)
		if err != nil {
			return err
		}
		id := "pc_" + lease.DeriveID("provider-charge")
		out = fiber.Map{"id": id, "provider_reference": ref}
		idemfiber.OnComplete(c, func(ctx context.Context, tx pgstore.DBTX) error { // idemgen: the row commits with the record
			_, err := tx.Exec(ctx, `INSERT INTO provider_charges (id, tenant, amount, provider_reference) VALUES ($1, $2, $3, $4)`, id, tenant, req.Amount, ref)
			return err
		})
		return nil
	})
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(out)
}
