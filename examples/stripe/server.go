package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/stripe/api"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// schema holds the business tables: one per resource the example models closely, and objects
// for the other operations. Every row records the caller (tenant: the API key's owner; account:
// the Stripe-Account it acted on, "" for the platform) and params, the decoded request as the
// handler received it, as encoding/json writes it (a field that may be sent empty to clear it,
// a canonical.Unsettable, is {"Value": ..., "Unset": ...}).
const schema = `
CREATE TABLE IF NOT EXISTS customers (
	id text PRIMARY KEY, tenant text NOT NULL, account text NOT NULL,
	email text, name text, description text,
	params jsonb NOT NULL, created timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS payment_intents (
	id text PRIMARY KEY, tenant text NOT NULL, account text NOT NULL,
	amount bigint NOT NULL, currency text NOT NULL, customer text, description text,
	payment_method_types text[] NOT NULL,
	params jsonb NOT NULL, created timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS charges (
	id text PRIMARY KEY, tenant text NOT NULL, account text NOT NULL,
	amount bigint NOT NULL, currency text NOT NULL, customer text, source text, description text,
	params jsonb NOT NULL, created timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS refunds (
	id text PRIMARY KEY, tenant text NOT NULL, account text NOT NULL,
	payment_intent text, charge text, amount bigint NOT NULL, reason text,
	params jsonb NOT NULL, created timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS subscriptions (
	id text PRIMARY KEY, tenant text NOT NULL, account text NOT NULL,
	customer text NOT NULL,
	params jsonb NOT NULL, created timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS payouts (
	id text PRIMARY KEY, tenant text NOT NULL, account text NOT NULL,
	amount bigint NOT NULL, currency text NOT NULL,
	params jsonb NOT NULL, created timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS objects (
	id text PRIMARY KEY, tenant text NOT NULL, account text NOT NULL, object text NOT NULL,
	params jsonb NOT NULL, created timestamptz NOT NULL DEFAULT now());
`

// BusinessTables are the tables the handlers write, for counting effects.
var BusinessTables = []string{"customers", "payment_intents", "charges", "refunds", "subscriptions", "payouts", "objects"}

// Migrate creates the idempotency table and the business tables (both idempotent).
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := pgstore.Migrate(ctx, pool); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, schema)
	return err
}

// Options adjust the server for tests.
type Options struct {
	// Delay, when set, is called by every handler after its write and before it answers: a
	// positive duration makes the handler that slow (a slow downstream, a long transaction).
	Delay func(tenant, object string) time.Duration
	// Limits are the store's per-scope limits (a cap on new keys answers 429 rate_limit).
	Limits pgstore.Limits
}

type server struct {
	pool *pgxpool.Pool
	opts Options
}

// NewHandler returns the API: the 22 marked operations behind idemgen's generated handlers,
// behind an authentication layer that answers, as Stripe does, 401 to a request without a
// secret key. Unknown routes get Stripe's 404.
func NewHandler(pool *pgxpool.Pool, opts Options) (http.Handler, error) {
	rt, err := runtime.New(runtime.Config{
		Store: pgstore.New(pool, pgstore.Options{Limits: opts.Limits}),
		// The tenant is the owner of the secret key; the Stripe profile adds the Stripe-Account
		// header (a connected account) to the scope by itself.
		Scope: func(r *http.Request) (string, error) { return callerFrom(r.Context()).tenant, nil },
	})
	if err != nil {
		return nil, err
	}
	s := &server{pool: pool, opts: opts}
	mux := http.NewServeMux()
	err = api.Register(mux, rt, api.Handlers{
		PostCustomers:      s.createCustomer,
		PostPaymentIntents: s.createPaymentIntent,
		PostCharges:        s.createCharge,
		PostRefunds:        s.createRefund,
		PostSubscriptions:  s.createSubscription,
		PostPayouts:        s.createPayout,

		PostCheckoutSessions: object[api.PostCheckoutSessionsParams, api.PostCheckoutSessionsBody](s, "checkout.session", "cs_test"),
		PostCoupons:          object[api.PostCouponsParams, api.PostCouponsBody](s, "coupon", "co"),
		PostInvoiceitems:     object[api.PostInvoiceitemsParams, api.PostInvoiceitemsBody](s, "invoiceitem", "ii"),
		PostInvoices:         object[api.PostInvoicesParams, api.PostInvoicesBody](s, "invoice", "in"),
		PostPaymentLinks:     object[api.PostPaymentLinksParams, api.PostPaymentLinksBody](s, "payment_link", "plink"),
		PostPaymentMethods:   object[api.PostPaymentMethodsParams, api.PostPaymentMethodsBody](s, "payment_method", "pm"),
		PostPlans:            object[api.PostPlansParams, api.PostPlansBody](s, "plan", "plan"),
		PostPrices:           object[api.PostPricesParams, api.PostPricesBody](s, "price", "price"),
		PostProducts:         object[api.PostProductsParams, api.PostProductsBody](s, "product", "prod"),
		PostPromotionCodes:   object[api.PostPromotionCodesParams, api.PostPromotionCodesBody](s, "promotion_code", "promo"),
		PostSetupIntents:     object[api.PostSetupIntentsParams, api.PostSetupIntentsBody](s, "setup_intent", "seti"),
		PostShippingRates:    object[api.PostShippingRatesParams, api.PostShippingRatesBody](s, "shipping_rate", "shr"),
		PostTaxRates:         object[api.PostTaxRatesParams, api.PostTaxRatesBody](s, "tax_rate", "txr"),
		PostTopups:           object[api.PostTopupsParams, api.PostTopupsBody](s, "topup", "tu"),
		PostTransfers:        object[api.PostTransfersParams, api.PostTransfersBody](s, "transfer", "tr"),
		PostWebhookEndpoints: object[api.PostWebhookEndpointsParams, api.PostWebhookEndpointsBody](s, "webhook_endpoint", "we"),
	})
	if err != nil {
		return nil, err
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "",
			fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, r.URL.Path))
	})
	return authenticate(mux), nil
}

// caller is who sent a request: the tenant (the secret key's owner) and the connected account
// it acts on (Stripe-Account), "" for the platform itself.
type caller struct{ tenant, account string }

type callerKey struct{}

func callerFrom(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// authenticate takes the secret key from `Authorization: Bearer sk_test_...` (what Stripe's
// SDKs send). Here the key names the tenant itself; a real service looks the key up and
// uses the account it belongs to.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !strings.HasPrefix(key, "sk_test_") {
			writeError(w, http.StatusUnauthorized, "invalid_request_error", "", "",
				"Invalid API Key provided. Send a secret key as `Authorization: Bearer sk_test_...`.")
			return
		}
		c := caller{tenant: key, account: strings.TrimSpace(r.Header.Get("Stripe-Account"))}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// writeError answers outside the idempotency layer (authentication, unknown routes) in
// Stripe's envelope, with a Request-Id as every Stripe answer has.
func writeError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", newID("req", 14))
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(typ, code, param, msg))
}

func errorBody(typ, code, param, msg string) []byte {
	b, _ := json.Marshal(map[string]map[string]string{"error": omitEmpty(map[string]string{
		"type": typ, "code": code, "param": param, "message": msg,
	})})
	return b
}

func omitEmpty(m map[string]string) map[string]string {
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

// handlerError is a final error answer of a handler (stored and replayed, as Stripe stores
// the errors of an endpoint that ran).
func handlerError(status int, typ, code, param, msg string) runtime.Response {
	return runtime.Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: errorBody(typ, code, param, msg)}
}

// ok answers 200 with a Stripe object: id, object, created and livemode, then fields.
func ok(id, object string, created time.Time, fields map[string]any) (runtime.Response, error) {
	out := map[string]any{"id": id, "object": object, "created": created.Unix(), "livemode": false}
	for k, v := range fields {
		out[k] = v
	}
	body, err := json.Marshal(out)
	if err != nil {
		return runtime.Response{}, err
	}
	return runtime.Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, nil
}

// newID returns prefix_ and n random alphanumerics, the shape of Stripe's ids.
func newID(prefix string, n int) string { return prefix + "_" + alnum(n) }

func alnum(n int) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// params is the decoded request as JSON, for the params column and the answer's metadata.
func params(body any) (json.RawMessage, error) {
	return json.Marshal(body)
}

// metadataOf returns the metadata of a request whose metadata may be sent empty to clear it
// (Stripe declares it anyOf [object, enum: [""]]), as the object Stripe answers with: absent
// and cleared (metadata=) are both no metadata on a new object. A key sent empty
// (metadata[k]=) is Stripe's way of removing that key, so it is left out.
func metadataOf(m *canonical.Unsettable[map[string]string]) map[string]string {
	if m == nil || m.Unset {
		return map[string]string{}
	}
	return withoutEmpty(m.Value)
}

func withoutEmpty(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// metadataJSON is metadataOf for the operations handled generically, from the request as
// encoding/json writes it: metadata is either a map or a canonical.Unsettable ({"Value": map,
// "Unset": bool}), depending on how the operation declares it.
func metadataJSON(p json.RawMessage) map[string]string {
	var v struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	if json.Unmarshal(p, &v) != nil || len(v.Metadata) == 0 {
		return map[string]string{}
	}
	var u canonical.Unsettable[map[string]string]
	if json.Unmarshal(v.Metadata, &u) == nil && (u.Value != nil || u.Unset) {
		return metadataOf(&u)
	}
	var m map[string]string
	_ = json.Unmarshal(v.Metadata, &m)
	return withoutEmpty(m)
}

// addressOf is a customer's address as Stripe answers it: null when absent or cleared
// (address=).
func addressOf(a *canonical.Unsettable[api.PostChargesBodyShippingAddress]) any {
	if a == nil || a.Unset {
		return nil
	}
	return a.Value
}

// itemsOf is a subscription's items as Stripe answers them: a list object whose elements are
// in the order of the request's indices (items[0], items[1], ...).
func itemsOf(sub string, items []api.PostSubscriptionsBodyItemsItem) map[string]any {
	data := make([]map[string]any, len(items))
	for i, it := range items {
		var price any
		if it.Price != nil {
			price = map[string]any{"id": *it.Price, "object": "price"}
		}
		quantity := int64(1)
		if it.Quantity != nil {
			quantity = *it.Quantity
		}
		data[i] = map[string]any{"id": newID("si", 14), "object": "subscription_item", "subscription": sub,
			"price": price, "quantity": quantity, "metadata": withoutEmpty(it.Metadata)}
	}
	return map[string]any{"object": "list", "data": data, "has_more": false, "url": "/v1/subscription_items?subscription=" + sub}
}

// wait applies Options.Delay.
func (s *server) wait(ctx context.Context, object string) error {
	if s.opts.Delay == nil {
		return nil
	}
	d := s.opts.Delay(callerFrom(ctx).tenant, object)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *server) createCustomer(ctx context.Context, tx pgstore.DBTX, _ api.PostCustomersParams, b api.PostCustomersBody) (runtime.Response, error) {
	c := callerFrom(ctx)
	p, err := params(b)
	if err != nil {
		return runtime.Response{}, err
	}
	id := newID("cus", 14)
	var created time.Time
	err = tx.QueryRow(ctx, `INSERT INTO customers (id, tenant, account, email, name, description, params)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING created`,
		id, c.tenant, c.account, b.Email, b.Name, b.Description, p).Scan(&created)
	if err != nil {
		return runtime.Response{}, err
	}
	if err := s.wait(ctx, "customer"); err != nil {
		return runtime.Response{}, err
	}
	return ok(id, "customer", created, map[string]any{
		"email": b.Email, "name": b.Name, "description": b.Description, "metadata": metadataOf(b.Metadata),
		"address": addressOf(b.Address),
	})
}

func (s *server) createPaymentIntent(ctx context.Context, tx pgstore.DBTX, _ api.PostPaymentIntentsParams, b api.PostPaymentIntentsBody) (runtime.Response, error) {
	c := callerFrom(ctx)
	if b.Amount < 1 {
		return handlerError(http.StatusBadRequest, "invalid_request_error", "parameter_invalid_integer", "amount",
			"This value must be greater than or equal to 1."), nil
	}
	types := b.PaymentMethodTypes
	if types == nil {
		types = []string{"card"}
	}
	p, err := params(b)
	if err != nil {
		return runtime.Response{}, err
	}
	id := newID("pi", 24)
	var created time.Time
	err = tx.QueryRow(ctx, `INSERT INTO payment_intents (id, tenant, account, amount, currency, customer, description, payment_method_types, params)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING created`,
		id, c.tenant, c.account, b.Amount, b.Currency, b.Customer, b.Description, types, p).Scan(&created)
	if err != nil {
		return runtime.Response{}, err
	}
	if err := s.wait(ctx, "payment_intent"); err != nil {
		return runtime.Response{}, err
	}
	return ok(id, "payment_intent", created, map[string]any{
		"amount": b.Amount, "currency": b.Currency, "customer": b.Customer, "description": b.Description,
		"payment_method_types": types, "status": "requires_payment_method",
		"client_secret": id + "_secret_" + alnum(24), "metadata": withoutEmpty(b.Metadata),
	})
}

func (s *server) createCharge(ctx context.Context, tx pgstore.DBTX, _ api.PostChargesParams, b api.PostChargesBody) (runtime.Response, error) {
	c := callerFrom(ctx)
	if b.Amount == nil || b.Currency == nil {
		param := "amount"
		if b.Amount != nil {
			param = "currency"
		}
		return handlerError(http.StatusBadRequest, "invalid_request_error", "parameter_missing", param,
			"Missing required param: "+param+"."), nil
	}
	p, err := params(b)
	if err != nil {
		return runtime.Response{}, err
	}
	id := newID("ch", 24)
	var created time.Time
	err = tx.QueryRow(ctx, `INSERT INTO charges (id, tenant, account, amount, currency, customer, source, description, params)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING created`,
		id, c.tenant, c.account, *b.Amount, *b.Currency, b.Customer, b.Source, b.Description, p).Scan(&created)
	if err != nil {
		return runtime.Response{}, err
	}
	if err := s.wait(ctx, "charge"); err != nil {
		return runtime.Response{}, err
	}
	return ok(id, "charge", created, map[string]any{
		"amount": *b.Amount, "currency": *b.Currency, "customer": b.Customer, "description": b.Description,
		"paid": true, "status": "succeeded", "metadata": metadataOf(b.Metadata),
	})
}

// createRefund refunds a payment intent (or a charge) of the same caller; one it does not
// know is 404 resource_missing, an answer of the endpoint that is stored like its successes.
func (s *server) createRefund(ctx context.Context, tx pgstore.DBTX, _ api.PostRefundsParams, b api.PostRefundsBody) (runtime.Response, error) {
	c := callerFrom(ctx)
	var (
		amount int64
		table  = "payment_intents"
		ref    = b.PaymentIntent
		param  = "payment_intent"
	)
	switch {
	case b.PaymentIntent != nil:
	case b.Charge != nil:
		table, ref, param = "charges", b.Charge, "charge"
	default:
		return handlerError(http.StatusBadRequest, "invalid_request_error", "parameter_missing", "payment_intent",
			"One of the following params should be provided for this request: payment_intent or charge."), nil
	}
	err := tx.QueryRow(ctx, `SELECT amount FROM `+table+` WHERE id = $1 AND tenant = $2 AND account = $3`,
		*ref, c.tenant, c.account).Scan(&amount)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return handlerError(http.StatusNotFound, "invalid_request_error", "resource_missing", param,
				fmt.Sprintf("No such %s: '%s'", param, *ref)), nil
		}
		return runtime.Response{}, err
	}
	if b.Amount != nil {
		amount = *b.Amount
	}
	p, err := params(b)
	if err != nil {
		return runtime.Response{}, err
	}
	id := newID("re", 24)
	var created time.Time
	err = tx.QueryRow(ctx, `INSERT INTO refunds (id, tenant, account, payment_intent, charge, amount, reason, params)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING created`,
		id, c.tenant, c.account, b.PaymentIntent, b.Charge, amount, b.Reason, p).Scan(&created)
	if err != nil {
		return runtime.Response{}, err
	}
	if err := s.wait(ctx, "refund"); err != nil {
		return runtime.Response{}, err
	}
	return ok(id, "refund", created, map[string]any{
		"amount": amount, "payment_intent": b.PaymentIntent, "charge": b.Charge, "reason": b.Reason,
		"status": "succeeded", "metadata": metadataOf(b.Metadata),
	})
}

func (s *server) createSubscription(ctx context.Context, tx pgstore.DBTX, _ api.PostSubscriptionsParams, b api.PostSubscriptionsBody) (runtime.Response, error) {
	c := callerFrom(ctx)
	p, err := params(b)
	if err != nil {
		return runtime.Response{}, err
	}
	id := newID("sub", 24)
	var created time.Time
	err = tx.QueryRow(ctx, `INSERT INTO subscriptions (id, tenant, account, customer, params)
		VALUES ($1, $2, $3, $4, $5) RETURNING created`, id, c.tenant, c.account, b.Customer, p).Scan(&created)
	if err != nil {
		return runtime.Response{}, err
	}
	if err := s.wait(ctx, "subscription"); err != nil {
		return runtime.Response{}, err
	}
	return ok(id, "subscription", created, map[string]any{
		"customer": b.Customer, "status": "active", "metadata": metadataOf(b.Metadata),
		"items": itemsOf(id, b.Items),
	})
}

func (s *server) createPayout(ctx context.Context, tx pgstore.DBTX, _ api.PostPayoutsParams, b api.PostPayoutsBody) (runtime.Response, error) {
	c := callerFrom(ctx)
	p, err := params(b)
	if err != nil {
		return runtime.Response{}, err
	}
	id := newID("po", 24)
	var created time.Time
	err = tx.QueryRow(ctx, `INSERT INTO payouts (id, tenant, account, amount, currency, params)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING created`, id, c.tenant, c.account, b.Amount, b.Currency, p).Scan(&created)
	if err != nil {
		return runtime.Response{}, err
	}
	if err := s.wait(ctx, "payout"); err != nil {
		return runtime.Response{}, err
	}
	return ok(id, "payout", created, map[string]any{
		"amount": b.Amount, "currency": b.Currency, "status": "pending", "metadata": withoutEmpty(b.Metadata),
	})
}

// object is the handler of the operations the example does not model closely: it records the
// request in objects and answers the object with the request's top-level scalar parameters.
func object[P, B any](s *server, object, prefix string) func(context.Context, pgstore.DBTX, P, B) (runtime.Response, error) {
	return func(ctx context.Context, tx pgstore.DBTX, _ P, b B) (runtime.Response, error) {
		c := callerFrom(ctx)
		p, err := params(b)
		if err != nil {
			return runtime.Response{}, err
		}
		id := newID(prefix, 24)
		var created time.Time
		err = tx.QueryRow(ctx, `INSERT INTO objects (id, tenant, account, object, params)
			VALUES ($1, $2, $3, $4, $5) RETURNING created`, id, c.tenant, c.account, object, p).Scan(&created)
		if err != nil {
			return runtime.Response{}, err
		}
		if err := s.wait(ctx, object); err != nil {
			return runtime.Response{}, err
		}
		var all map[string]any
		if err := json.Unmarshal(p, &all); err != nil {
			return runtime.Response{}, err
		}
		fields := map[string]any{"metadata": metadataJSON(p)}
		for k, v := range all {
			switch v.(type) {
			case string, float64, bool:
				fields[k] = v
			}
		}
		return ok(id, object, created, fields)
	}
}
