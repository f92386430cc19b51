package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v82"

	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// env is one server on a fresh database, behind the fault-injecting proxy.
type env struct {
	pool  *pgxpool.Pool
	proxy *faultProxy
	url   string // the proxy's, what stripe-go talks to

	mu      sync.Mutex
	delay   map[string]time.Duration // by tenant: how long its handlers take
	retries map[string]*retryLog     // by tenant: what its stripe-go clients said about retrying
}

func newEnv(t *testing.T, limits pgstore.Limits) *env {
	t.Helper()
	pool := pgtest.NewPool(t, 16)
	if err := Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	e := &env{pool: pool, delay: map[string]time.Duration{}, retries: map[string]*retryLog{}}
	h, err := NewHandler(pool, Options{Limits: limits, Delay: func(tenant, _ string) time.Duration {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.delay[tenant]
	}})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(h)
	t.Cleanup(api.Close)
	e.proxy = newFaultProxy(api.URL)
	front := httptest.NewServer(e.proxy)
	t.Cleanup(front.Close)
	e.url = front.URL
	return e
}

// slow makes tenant's handlers take d after their write.
func (e *env) slow(tenant string, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delay[tenant] = d
}

// client is stripe-go as an application configures it, pointed at the proxy: two retries
// (stripe-go's default, said out loud), its own connection pool. Its log is kept to count the
// retries stripe-go itself decided on (sdkRetries).
func (e *env) client(tenant string) *stripe.Client {
	e.mu.Lock()
	log := e.retries[tenant]
	if log == nil {
		log = &retryLog{}
		e.retries[tenant] = log
	}
	e.mu.Unlock()
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL:               stripe.String(e.url),
		HTTPClient:        &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}},
		MaxNetworkRetries: stripe.Int64(2),
		LeveledLogger:     log,
	})
	return stripe.NewClient(tenant, stripe.WithBackends(backends))
}

// sdkRetries checks how many retries tenant's stripe-go clients made: the attempts the proxy
// saw minus these are the ones the SDK did not decide on (net/http's own re-sends).
func (e *env) sdkRetries(t *testing.T, tenant string, want int) {
	t.Helper()
	e.mu.Lock()
	got := e.retries[tenant].n.Load()
	e.mu.Unlock()
	if got != int64(want) {
		t.Errorf("stripe-go retried %d time(s), want %d", got, want)
	}
}

// retryLog is a stripe-go logger that counts stripe-go's retry decisions ("Initiating retry",
// logged at warning level before each retry's sleep) and drops the rest.
type retryLog struct{ n atomic.Int64 }

func (l *retryLog) Debugf(string, ...any) {}
func (l *retryLog) Infof(string, ...any)  {}
func (l *retryLog) Errorf(string, ...any) {}
func (l *retryLog) Warnf(format string, _ ...any) {
	if strings.HasPrefix(format, "Initiating retry") {
		l.n.Add(1)
	}
}

// rows counts tenant's rows in every business table: the effects that happened.
func (e *env) rows(t *testing.T, tenant string) int {
	t.Helper()
	total := 0
	for _, table := range BusinessTables {
		var n int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE tenant = $1`, tenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// expect checks what the proxy saw for tenant: the server's statuses and whether each was a
// replay ("200", "200r"; a dropped answer gets a trailing "!"), and logs the timeline.
func (e *env) expect(t *testing.T, tenant string, t0 time.Time, want ...string) []*attempt {
	t.Helper()
	as := e.proxy.seen(t, tenant)
	var got, timeline []string
	for _, a := range as {
		s := strconv.Itoa(a.status)
		if a.replayed {
			s += "r"
		}
		if a.dropped {
			s += "!"
		}
		got = append(got, s)
		timeline = append(timeline, a.describe(t0))
	}
	t.Logf("proxy saw %d attempt(s): %s", len(as), strings.Join(timeline, "; "))
	if !slices.Equal(got, want) {
		t.Errorf("proxy saw %v, want %v", got, want)
	}
	return as
}

func pi(amount int64, key string) *stripe.PaymentIntentCreateParams {
	p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(amount), Currency: stripe.String("usd")}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

func replayed(r *stripe.APIResponse) bool { return r.Header.Get("Idempotent-Replayed") == "true" }

// stripeError returns err as stripe-go's typed error, or fails.
func stripeError(t *testing.T, err error) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	if !errors.As(err, &se) {
		t.Fatalf("want a *stripe.Error, got %T: %v", err, err)
	}
	return se
}

func TestStripeGo(t *testing.T) {
	e := newEnv(t, pgstore.Limits{})
	ctx := context.Background()

	// Every marked operation, once, through stripe-go's own typed calls: 22 answers, 22 rows.
	t.Run("every-operation", func(t *testing.T) {
		const tenant = "sk_test_every"
		sc := e.client(tenant)
		t0 := time.Now()
		// metadata[scenario]=every-operation on each: 10 of the 22 declare metadata as
		// Stripe's anyOf [object, enum: [""]], 12 as a plain map.
		md := map[string]string{"scenario": "every-operation"}
		cus, err := sc.V1Customers.Create(ctx, &stripe.CustomerCreateParams{Metadata: md, Email: stripe.String("jenny@example.com"), Name: stripe.String("Jenny Rosen")})
		if err != nil {
			t.Fatal(err)
		}
		intent, err := sc.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{Metadata: md, Amount: stripe.Int64(2000), Currency: stripe.String("usd"), Customer: stripe.String(cus.ID)})
		if err != nil {
			t.Fatal(err)
		}
		coupon, err := sc.V1Coupons.Create(ctx, &stripe.CouponCreateParams{Metadata: md, PercentOff: stripe.Float64(25), Duration: stripe.String("once")})
		if err != nil {
			t.Fatal(err)
		}
		calls := []struct {
			name string
			call func() (string, error)
		}{
			{"charges", func() (string, error) {
				r, err := sc.V1Charges.Create(ctx, &stripe.ChargeCreateParams{Metadata: md, Amount: stripe.Int64(1500), Currency: stripe.String("usd"), Source: &stripe.PaymentSourceSourceParams{Token: stripe.String("tok_visa")}})
				return id(r, err, func() string { return r.ID })
			}},
			{"checkout.sessions", func() (string, error) {
				r, err := sc.V1CheckoutSessions.Create(ctx, &stripe.CheckoutSessionCreateParams{Metadata: md, SuccessURL: stripe.String("https://example.com/ok"), Mode: stripe.String("payment")})
				return id(r, err, func() string { return r.ID })
			}},
			{"invoiceitems", func() (string, error) {
				r, err := sc.V1InvoiceItems.Create(ctx, &stripe.InvoiceItemCreateParams{Metadata: md, Customer: stripe.String(cus.ID), Amount: stripe.Int64(500), Currency: stripe.String("usd")})
				return id(r, err, func() string { return r.ID })
			}},
			{"invoices", func() (string, error) {
				r, err := sc.V1Invoices.Create(ctx, &stripe.InvoiceCreateParams{Metadata: md, Customer: stripe.String(cus.ID)})
				return id(r, err, func() string { return r.ID })
			}},
			{"payment_links", func() (string, error) {
				r, err := sc.V1PaymentLinks.Create(ctx, &stripe.PaymentLinkCreateParams{Metadata: md, LineItems: []*stripe.PaymentLinkCreateLineItemParams{{Price: stripe.String("price_1"), Quantity: stripe.Int64(1)}}})
				return id(r, err, func() string { return r.ID })
			}},
			{"payment_methods", func() (string, error) {
				r, err := sc.V1PaymentMethods.Create(ctx, &stripe.PaymentMethodCreateParams{Metadata: md, Type: stripe.String("card")})
				return id(r, err, func() string { return r.ID })
			}},
			{"payouts", func() (string, error) {
				r, err := sc.V1Payouts.Create(ctx, &stripe.PayoutCreateParams{Metadata: md, Amount: stripe.Int64(1100), Currency: stripe.String("usd")})
				return id(r, err, func() string { return r.ID })
			}},
			{"plans", func() (string, error) {
				r, err := sc.V1Plans.Create(ctx, &stripe.PlanCreateParams{Metadata: md, Amount: stripe.Int64(1200), Currency: stripe.String("usd"), Interval: stripe.String("month"), ProductID: stripe.String("prod_1")})
				return id(r, err, func() string { return r.ID })
			}},
			{"prices", func() (string, error) {
				r, err := sc.V1Prices.Create(ctx, &stripe.PriceCreateParams{Metadata: md, Currency: stripe.String("usd"), UnitAmount: stripe.Int64(1000), Product: stripe.String("prod_1")})
				return id(r, err, func() string { return r.ID })
			}},
			{"products", func() (string, error) {
				r, err := sc.V1Products.Create(ctx, &stripe.ProductCreateParams{Metadata: md, Name: stripe.String("T-shirt")})
				return id(r, err, func() string { return r.ID })
			}},
			{"promotion_codes", func() (string, error) {
				r, err := sc.V1PromotionCodes.Create(ctx, &stripe.PromotionCodeCreateParams{Metadata: md, Coupon: stripe.String(coupon.ID), Code: stripe.String("SPRING25")})
				return id(r, err, func() string { return r.ID })
			}},
			{"refunds", func() (string, error) {
				r, err := sc.V1Refunds.Create(ctx, &stripe.RefundCreateParams{Metadata: md, PaymentIntent: stripe.String(intent.ID)})
				return id(r, err, func() string { return r.ID })
			}},
			{"setup_intents", func() (string, error) {
				r, err := sc.V1SetupIntents.Create(ctx, &stripe.SetupIntentCreateParams{Metadata: md, Customer: stripe.String(cus.ID)})
				return id(r, err, func() string { return r.ID })
			}},
			{"shipping_rates", func() (string, error) {
				r, err := sc.V1ShippingRates.Create(ctx, &stripe.ShippingRateCreateParams{Metadata: md, DisplayName: stripe.String("Ground")})
				return id(r, err, func() string { return r.ID })
			}},
			{"subscriptions", func() (string, error) {
				r, err := sc.V1Subscriptions.Create(ctx, &stripe.SubscriptionCreateParams{Metadata: md, Customer: stripe.String(cus.ID)})
				return id(r, err, func() string { return r.ID })
			}},
			{"tax_rates", func() (string, error) {
				r, err := sc.V1TaxRates.Create(ctx, &stripe.TaxRateCreateParams{Metadata: md, DisplayName: stripe.String("VAT"), Inclusive: stripe.Bool(false), Percentage: stripe.Float64(20)})
				return id(r, err, func() string { return r.ID })
			}},
			{"topups", func() (string, error) {
				r, err := sc.V1Topups.Create(ctx, &stripe.TopupCreateParams{Metadata: md, Amount: stripe.Int64(5000), Currency: stripe.String("usd")})
				return id(r, err, func() string { return r.ID })
			}},
			{"transfers", func() (string, error) {
				r, err := sc.V1Transfers.Create(ctx, &stripe.TransferCreateParams{Metadata: md, Amount: stripe.Int64(400), Currency: stripe.String("usd"), Destination: stripe.String("acct_1")})
				return id(r, err, func() string { return r.ID })
			}},
			{"webhook_endpoints", func() (string, error) {
				r, err := sc.V1WebhookEndpoints.Create(ctx, &stripe.WebhookEndpointCreateParams{Metadata: md, URL: stripe.String("https://example.com/hook"), EnabledEvents: []*string{stripe.String("charge.succeeded")}})
				return id(r, err, func() string { return r.ID })
			}},
		}
		for _, c := range calls {
			got, err := c.call()
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			if got == "" {
				t.Errorf("%s: no id in the answer", c.name)
			}
		}
		want := make([]string, 22)
		for i := range want {
			want[i] = "200"
		}
		e.expect(t, tenant, t0, want...)
		e.sdkRetries(t, tenant, 0)
		e.sdkRetries(t, tenant, 0)
		if n := e.rows(t, tenant); n != 22 {
			t.Errorf("rows = %d, want 22", n)
		}
		// Every handler got the metadata as a typed field.
		withMetadata := 0
		for _, table := range BusinessTables {
			var n int
			if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE tenant = $1 AND
				coalesce(params #>> '{metadata,Value,scenario}', params #>> '{metadata,scenario}') = 'every-operation'`, tenant).Scan(&n); err != nil {
				t.Fatal(err)
			}
			withMetadata += n
		}
		if withMetadata != 22 {
			t.Errorf("rows with metadata[scenario] = %d, want 22", withMetadata)
		}
	})

	// The answer to the first attempt is lost after the server committed: stripe-go retries
	// with the same key and gets the stored answer.
	t.Run("response-dropped-once", func(t *testing.T) {
		const tenant, key = "sk_test_drop1", "7c9e6679-7425-40de-944b-e07fc1f90ae7"
		e.proxy.plan(tenant, plan{drop: []int{0}})
		sc := e.client(tenant)
		t0 := time.Now()
		got, err := sc.V1PaymentIntents.Create(ctx, pi(2000, key))
		took := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		as := e.expect(t, tenant, t0, "200!", "200r")
		e.sdkRetries(t, tenant, 1)
		t.Logf("the caller got its payment intent after %.2fs", took.Seconds())
		if !replayed(got.LastResponse) || got.Amount != 2000 || got.Currency != "usd" {
			t.Errorf("answer: replayed=%v amount=%d currency=%s", replayed(got.LastResponse), got.Amount, got.Currency)
		}
		h := got.LastResponse.Header
		if h.Get("Original-Request") != as[0].requestID || got.LastResponse.RequestID == as[0].requestID || got.LastResponse.RequestID == "" {
			t.Errorf("Request-Id %q, Original-Request %q: want a new id naming the execution %q",
				got.LastResponse.RequestID, h.Get("Original-Request"), as[0].requestID)
		}
		if got.LastResponse.IdempotencyKey != key {
			t.Errorf("Idempotency-Key echoed as %q", got.LastResponse.IdempotencyKey)
		}
		if as[0].key != key || as[1].key != key {
			t.Errorf("keys sent: %q, %q", as[0].key, as[1].key)
		}
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	t.Run("response-dropped-twice", func(t *testing.T) {
		const tenant, key = "sk_test_drop2", "b3c1d1e2-2f5a-4e8b-9d0c-1a2b3c4d5e6f"
		e.proxy.plan(tenant, plan{drop: []int{0, 1}})
		sc := e.client(tenant)
		t0 := time.Now()
		p := &stripe.ChargeCreateParams{Amount: stripe.Int64(4200), Currency: stripe.String("eur"), Source: &stripe.PaymentSourceSourceParams{Token: stripe.String("tok_visa")}}
		p.SetIdempotencyKey(key)
		got, err := sc.V1Charges.Create(ctx, p)
		took := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		e.expect(t, tenant, t0, "200!", "200r!", "200r")
		e.sdkRetries(t, tenant, 2)
		t.Logf("the caller got its charge after %.2fs", took.Seconds())
		if !replayed(got.LastResponse) || got.Amount != 4200 {
			t.Errorf("answer: replayed=%v amount=%d", replayed(got.LastResponse), got.Amount)
		}
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	// Without a key of the caller's, stripe-go makes one (every POST gets one) and sends it
	// on each retry: the retry is still a replay.
	t.Run("sdk-generated-key", func(t *testing.T) {
		const tenant = "sk_test_autokey"
		e.proxy.plan(tenant, plan{drop: []int{0}})
		sc := e.client(tenant)
		t0 := time.Now()
		got, err := sc.V1Customers.Create(ctx, &stripe.CustomerCreateParams{Email: stripe.String("auto@example.com")})
		if err != nil {
			t.Fatal(err)
		}
		as := e.expect(t, tenant, t0, "200!", "200r")
		e.sdkRetries(t, tenant, 1)
		if !regexp.MustCompile(`^[0-9]+_[A-Za-z0-9_-]{6}$`).MatchString(as[0].key) || as[1].key != as[0].key {
			t.Errorf("keys sent: %q, %q: want one key of stripe-go's shape on both", as[0].key, as[1].key)
		}
		if !replayed(got.LastResponse) {
			t.Error("retry not replayed")
		}
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	// What a retry may change without being another request: the SDK's headers (another
	// process, another SDK version, another API version pinned) and the order of the form
	// fields. The fingerprint covers the decoded parameters, not these.
	t.Run("retries-with-other-headers-and-field-order", func(t *testing.T) {
		const tenant, key = "sk_test_headers", "e2a4b5c6-7d8e-4f90-a1b2-c3d4e5f60718"
		e.proxy.plan(tenant, plan{drop: []int{0}, rewrite: func(n int, h http.Header, body []byte) []byte {
			if n == 0 {
				return body
			}
			// As if another SDK sent the retry: stripe-node's headers, an older API version.
			h.Set("User-Agent", "Stripe/v1 NodeBindings/18.5.0")
			h.Set("X-Stripe-Client-User-Agent", `{"bindings_version":"18.5.0","lang":"node","lang_version":"v22.11.0","publisher":"stripe"}`)
			h.Set("Stripe-Version", "2024-06-20")
			h.Set("X-Stripe-Client-Telemetry", `{"last_request_metrics":{"request_id":"req_other","request_duration_ms":12}}`)
			return reverseFields(body)
		}})
		sc := e.client(tenant)
		t0 := time.Now()
		p := pi(3000, key)
		p.Description = stripe.String("order 1001")
		p.ReceiptEmail = stripe.String("jenny@example.com")
		first, err := sc.V1PaymentIntents.Create(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		// The same key again later, from a client whose headers differ per request.
		p = pi(3000, key)
		p.Description = stripe.String("order 1001")
		p.ReceiptEmail = stripe.String("jenny@example.com")
		p.Headers = http.Header{"Stripe-Version": {"2025-03-31.basil"}, "User-Agent": {"Stripe/v1 GoBindings/82.0.0 shop/2.1"}}
		second, err := sc.V1PaymentIntents.Create(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		// And as a hand-written client sends it: other field order, no SDK headers at all.
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/payment_intents",
			strings.NewReader("receipt_email=jenny%40example.com&description=order+1001&currency=usd&amount=3000"))
		req.Header = http.Header{"Authorization": {"Bearer " + tenant}, "Idempotency-Key": {key},
			"Content-Type": {"application/x-www-form-urlencoded"}}
		third, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		third.Body.Close()

		as := e.expect(t, tenant, t0, "200!", "200r", "200r", "200r")
		e.sdkRetries(t, tenant, 1)
		if as[0].body == as[1].body || as[0].header.Get("User-Agent") == as[1].header.Get("User-Agent") ||
			as[0].header.Get("Stripe-Version") == as[1].header.Get("Stripe-Version") {
			t.Errorf("the retry was not changed:\n%s %v\n%s %v", as[0].body, as[0].header, as[1].body, as[1].header)
		}
		t.Logf("first attempt: %s\nits retry:     %s", as[0].body, as[1].body)
		if !replayed(first.LastResponse) || !replayed(second.LastResponse) || first.ID != second.ID {
			t.Errorf("answers %s (replayed %v), %s (replayed %v)", first.ID, replayed(first.LastResponse), second.ID, replayed(second.LastResponse))
		}
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	// The same key with another amount is another request: Stripe answers 400
	// idempotency_error, which stripe-go raises as *stripe.Error wrapping
	// *stripe.IdempotencyError and does not retry.
	t.Run("key-reused-with-another-amount", func(t *testing.T) {
		const tenant, key = "sk_test_mismatch", "0f8fad5b-d9cb-469f-a165-70867728950e"
		sc := e.client(tenant)
		t0 := time.Now()
		first, err := sc.V1PaymentIntents.Create(ctx, pi(2000, key))
		if err != nil {
			t.Fatal(err)
		}
		_, err = sc.V1PaymentIntents.Create(ctx, pi(2500, key))
		se := stripeError(t, err)
		var ie *stripe.IdempotencyError
		if se.HTTPStatusCode != http.StatusBadRequest || se.Type != stripe.ErrorTypeIdempotency || !errors.As(err, &ie) {
			t.Errorf("got %d %s (IdempotencyError: %v): %s", se.HTTPStatusCode, se.Type, ie != nil, se.Msg)
		}
		if v := se.LastResponse.Header.Get("Stripe-Should-Retry"); v != "false" {
			t.Errorf("Stripe-Should-Retry: %q, want false", v)
		}
		t.Logf("stripe-go error: %s", se.Msg)
		// The key names one request of the tenant, whatever the endpoint (Stripe's rule).
		cp := &stripe.CustomerCreateParams{Email: stripe.String("x@example.com")}
		cp.SetIdempotencyKey(key)
		_, err = sc.V1Customers.Create(ctx, cp)
		if se := stripeError(t, err); se.HTTPStatusCode != http.StatusBadRequest || se.Type != stripe.ErrorTypeIdempotency {
			t.Errorf("another endpoint: got %d %s", se.HTTPStatusCode, se.Type)
		}
		// Once per call: no retry of a 400.
		e.expect(t, tenant, t0, "200", "400", "400")
		e.sdkRetries(t, tenant, 0)
		if first.Amount != 2000 {
			t.Errorf("first amount %d", first.Amount)
		}
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	// Two callers with one key while the handler takes 2 s: the second waits (the profile's
	// concurrency.wait, 5 s) and gets the first one's answer.
	t.Run("concurrent-duplicates-slow-handler", func(t *testing.T) {
		const tenant, key = "sk_test_concurrent", "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
		e.slow(tenant, 2*time.Second)
		sc := e.client(tenant)
		t0 := time.Now()
		var (
			wg   sync.WaitGroup
			got  [2]*stripe.Charge
			errs [2]error
			took [2]time.Duration
		)
		for i := range 2 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 300 * time.Millisecond)
				p := &stripe.ChargeCreateParams{Amount: stripe.Int64(990), Currency: stripe.String("usd"), Source: &stripe.PaymentSourceSourceParams{Token: stripe.String("tok_visa")}}
				p.SetIdempotencyKey(key)
				got[i], errs[i] = sc.V1Charges.Create(ctx, p)
				took[i] = time.Since(t0)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("caller %d: %v", i, err)
			}
		}
		e.expect(t, tenant, t0, "200", "200r")
		e.sdkRetries(t, tenant, 0)
		t.Logf("callers done at %.2fs and %.2fs", took[0].Seconds(), took[1].Seconds())
		if got[0].ID != got[1].ID || replayed(got[0].LastResponse) || !replayed(got[1].LastResponse) {
			t.Errorf("ids %s %s", got[0].ID, got[1].ID)
		}
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	// The case: a load balancer drops the client's connection 100 ms into a 2 s
	// handler. stripe-go retries 0.5 s later, while the first request still runs; the server
	// holds the retry until the first commits and replays it.
	t.Run("connection-reset-while-the-handler-runs", func(t *testing.T) {
		const tenant, key = "sk_test_reset", "6fa459ea-ee8a-3ca4-894e-db77e160355e"
		e.slow(tenant, 2*time.Second)
		e.proxy.plan(tenant, plan{resetAfter: 100 * time.Millisecond})
		sc := e.client(tenant)
		t0 := time.Now()
		got, err := sc.V1PaymentIntents.Create(ctx, pi(5100, key))
		took := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		as := e.expect(t, tenant, t0, "200!", "200r")
		e.sdkRetries(t, tenant, 1)
		t.Logf("the caller got its payment intent after %.2fs", took.Seconds())
		if !replayed(got.LastResponse) || as[1].sent.After(as[0].answered) {
			t.Errorf("the retry should arrive while the first runs and replay: %s / %s", as[0].describe(t0), as[1].describe(t0))
		}
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	// Without the wait (payouts set concurrency.wait: 0s in idemgen.yaml, as Stripe behaves),
	// a duplicate during the first gets 409 idempotency_key_in_use, and stripe-go gives up
	// at once: its retry logic never retries an error in Stripe's envelope (but 429
	// lock_timeout). This is why the profile waits.
	t.Run("in-flight-409-without-wait", func(t *testing.T) {
		const tenant, key = "sk_test_inflight", "a8098c1a-f86e-11da-bd1a-00112444be1e"
		e.slow(tenant, 1500*time.Millisecond)
		sc := e.client(tenant)
		t0 := time.Now()
		done := make(chan error, 1)
		go func() {
			p := &stripe.PayoutCreateParams{Amount: stripe.Int64(7700), Currency: stripe.String("usd")}
			p.SetIdempotencyKey(key)
			_, err := sc.V1Payouts.Create(ctx, p)
			done <- err
		}()
		time.Sleep(300 * time.Millisecond)
		p := &stripe.PayoutCreateParams{Amount: stripe.Int64(7700), Currency: stripe.String("usd")}
		p.SetIdempotencyKey(key)
		_, err := sc.V1Payouts.Create(ctx, p)
		se := stripeError(t, err)
		if se.HTTPStatusCode != http.StatusConflict || se.Code != stripe.ErrorCodeIdempotencyKeyInUse {
			t.Errorf("duplicate: got %d %s %s", se.HTTPStatusCode, se.Type, se.Code)
		}
		if v := se.LastResponse.Header.Get("Stripe-Should-Retry"); v != "true" {
			t.Errorf("Stripe-Should-Retry: %q, want true", v)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// The caller's own retry, after the first finished, is a replay.
		p = &stripe.PayoutCreateParams{Amount: stripe.Int64(7700), Currency: stripe.String("usd")}
		p.SetIdempotencyKey(key)
		again, err := sc.V1Payouts.Create(ctx, p)
		if err != nil || !replayed(again.LastResponse) {
			t.Errorf("late retry: %v", err)
		}
		e.expect(t, tenant, t0, "200", "409", "200r")
		e.sdkRetries(t, tenant, 0)
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	// Stripe takes keys of 1 to 255 characters; idemgen's default minimum (16) is off.
	t.Run("short-key", func(t *testing.T) {
		const tenant = "sk_test_shortkey"
		sc := e.client(tenant)
		t0 := time.Now()
		for range 2 {
			if _, err := sc.V1PaymentIntents.Create(ctx, pi(4200, "order-42")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := sc.V1PaymentIntents.Create(ctx, pi(4200, "7")); err != nil {
			t.Fatal(err)
		}
		e.expect(t, tenant, t0, "200", "200r", "200")
		e.sdkRetries(t, tenant, 0)
		if n := e.rows(t, tenant); n != 2 {
			t.Errorf("rows = %d, want 2", n)
		}
	})

	// Stripe-Account acts on a connected account: the same key for another account is
	// another request (the profile folds the header into the scope), not a replay of the
	// platform's answer.
	t.Run("stripe-account-scopes-the-key", func(t *testing.T) {
		const tenant, key = "sk_test_connect", "order-43"
		sc := e.client(tenant)
		t0 := time.Now()
		ids := map[string]string{}
		for _, acct := range []string{"", "acct_1Ab2Cd3Ef4Gh5Ij6", "acct_9Zy8Xw7Vu6Ts5Rq4", "acct_1Ab2Cd3Ef4Gh5Ij6"} {
			p := pi(1000, key)
			if acct != "" {
				p.SetStripeAccount(acct)
			}
			got, err := sc.V1PaymentIntents.Create(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if prev, ok := ids[acct]; ok && prev != got.ID {
				t.Errorf("account %q: replay answered %s, first %s", acct, got.ID, prev)
			}
			ids[acct] = got.ID
		}
		as := e.expect(t, tenant, t0, "200", "200", "200", "200r")
		e.sdkRetries(t, tenant, 0)
		if as[1].account != "acct_1Ab2Cd3Ef4Gh5Ij6" {
			t.Errorf("Stripe-Account sent: %q", as[1].account)
		}
		if len(ids) != 3 {
			t.Errorf("ids %v", ids)
		}
		var accounts []string
		rows, _ := e.pool.Query(ctx, `SELECT account FROM payment_intents WHERE tenant = $1 ORDER BY account`, tenant)
		for rows.Next() {
			var a string
			_ = rows.Scan(&a)
			accounts = append(accounts, a)
		}
		if rows.Err() != nil || !slices.Equal(accounts, []string{"", "acct_1Ab2Cd3Ef4Gh5Ij6", "acct_9Zy8Xw7Vu6Ts5Rq4"}) {
			t.Errorf("rows by account: %q (%v)", accounts, rows.Err())
		}
	})

	// Errors in Stripe's envelope are final for stripe-go: one attempt each. A request the
	// decoder refuses is not stored (as at Stripe), so the corrected request with the same
	// key runs; an error the endpoint answers is stored and replayed (as at Stripe).
	t.Run("4xx-not-retried", func(t *testing.T) {
		const tenant = "sk_test_invalid"
		sc := e.client(tenant)
		t0 := time.Now()
		bad := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(2000)} // no currency
		bad.SetIdempotencyKey("order-44")
		_, err := sc.V1PaymentIntents.Create(ctx, bad)
		se := stripeError(t, err)
		if se.HTTPStatusCode != http.StatusBadRequest || se.Type != stripe.ErrorTypeInvalidRequest || se.Param != "currency" {
			t.Errorf("missing currency: got %d %s param %q: %s", se.HTTPStatusCode, se.Type, se.Param, se.Msg)
		}
		bad = &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(2000), Currency: stripe.String("usd"), CaptureMethod: stripe.String("later")}
		bad.SetIdempotencyKey("order-44")
		_, err = sc.V1PaymentIntents.Create(ctx, bad)
		if se := stripeError(t, err); se.HTTPStatusCode != http.StatusBadRequest || se.Param != "capture_method" {
			t.Errorf("bad enum: got %d %s param %q", se.HTTPStatusCode, se.Type, se.Param)
		}
		if _, err := sc.V1PaymentIntents.Create(ctx, pi(2000, "order-44")); err != nil {
			t.Fatalf("the corrected request: %v", err)
		}
		// Refused by the endpoint itself: stored, and the same answer again.
		for range 2 {
			rp := &stripe.RefundCreateParams{PaymentIntent: stripe.String("pi_unknown")}
			rp.SetIdempotencyKey("refund-1")
			_, err = sc.V1Refunds.Create(ctx, rp)
			if se := stripeError(t, err); se.HTTPStatusCode != http.StatusNotFound || se.Code != stripe.ErrorCodeResourceMissing {
				t.Errorf("unknown payment intent: got %d %s", se.HTTPStatusCode, se.Code)
			}
		}
		e.expect(t, tenant, t0, "400", "400", "200", "404", "404r")
		e.sdkRetries(t, tenant, 0)
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	// Stripe's SDKs send nested parameters in brackets: address[city], metadata[order_id]
	// (stripe-go's AddMetadata). The server reads them into typed fields; the fingerprint
	// covers the fields, not their order nor the SDK's headers, so a retry with the fields
	// reversed and another SDK's headers replays, and so does a hand-written body with the
	// brackets percent-encoded in yet another order.
	t.Run("bracketed-fields", func(t *testing.T) {
		const tenant, key = "sk_test_brackets", "cus-brackets-1"
		e.proxy.plan(tenant, plan{drop: []int{0}, rewrite: func(n int, h http.Header, body []byte) []byte {
			if n != 1 {
				return body
			}
			h.Set("User-Agent", "Stripe/v1 NodeBindings/18.5.0")
			h.Set("Stripe-Version", "2024-06-20")
			return reverseFields(body)
		}})
		sc := e.client(tenant)
		t0 := time.Now()
		cus, err := sc.V1Customers.Create(ctx, customerWithAddress(key, "6735"))
		if err != nil {
			t.Fatal(err)
		}
		status, _ := e.post(t, tenant, key, "/v1/customers",
			"address%5Bcountry%5D=DE&metadata%5Bchannel%5D=web&email=jenny%40example.com&address[line1]=Unter+den+Linden+1"+
				"&metadata[order_id]=6735&address[postal_code]=10117&address%5Bcity%5D=Berlin")
		as := e.expect(t, tenant, t0, "200!", "200r", "200r")
		e.sdkRetries(t, tenant, 1)
		t.Logf("first attempt: %s\nits retry:     %s", as[0].body, as[1].body)
		if as[0].body == as[1].body || as[0].header.Get("User-Agent") == as[1].header.Get("User-Agent") ||
			!slices.Contains(strings.Split(as[0].body, "&"), "address[city]=Berlin") {
			t.Errorf("stripe-go sent %s; the retry %s", as[0].body, as[1].body)
		}
		if status != http.StatusOK || !replayed(cus.LastResponse) {
			t.Errorf("hand-written body: %d; stripe-go's retry replayed: %v", status, replayed(cus.LastResponse))
		}
		if cus.Metadata["order_id"] != "6735" || cus.Metadata["channel"] != "web" || len(cus.Metadata) != 2 {
			t.Errorf("customer metadata %v", cus.Metadata)
		}
		if cus.Address == nil || cus.Address.City != "Berlin" || cus.Address.PostalCode != "10117" || cus.Address.Country != "DE" {
			t.Errorf("customer address %+v", cus.Address)
		}
		// What the handler received, as stored: typed fields, not raw pairs.
		var city, order string
		if err := e.pool.QueryRow(ctx, `SELECT params #>> '{address,Value,city}', params #>> '{metadata,Value,order_id}' FROM customers WHERE id = $1`,
			cus.ID).Scan(&city, &order); err != nil || city != "Berlin" || order != "6735" {
			t.Errorf("stored address city %q, metadata order_id %q (%v)", city, order, err)
		}
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	// The same key with other bracketed values is another request: 400 idempotency_error,
	// raised by stripe-go as *stripe.IdempotencyError, one attempt each.
	t.Run("key-reused-with-other-metadata", func(t *testing.T) {
		const tenant, key = "sk_test_othermeta", "cus-brackets-2"
		sc := e.client(tenant)
		t0 := time.Now()
		first, err := sc.V1Customers.Create(ctx, customerWithAddress(key, "6735"))
		if err != nil {
			t.Fatal(err)
		}
		other := []struct {
			what string
			p    *stripe.CustomerCreateParams
		}{
			{"another metadata value", customerWithAddress(key, "6736")},
			{"one more metadata key", func() *stripe.CustomerCreateParams {
				p := customerWithAddress(key, "6735")
				p.AddMetadata("campaign", "spring")
				return p
			}()},
			{"another address[city]", func() *stripe.CustomerCreateParams {
				p := customerWithAddress(key, "6735")
				p.Address.City = stripe.String("Potsdam")
				return p
			}()},
		}
		for _, o := range other {
			_, err := sc.V1Customers.Create(ctx, o.p)
			se := stripeError(t, err)
			var ie *stripe.IdempotencyError
			if se.HTTPStatusCode != http.StatusBadRequest || se.Type != stripe.ErrorTypeIdempotency || !errors.As(err, &ie) {
				t.Errorf("%s: got %d %s (IdempotencyError: %v): %s", o.what, se.HTTPStatusCode, se.Type, ie != nil, se.Msg)
			}
		}
		e.expect(t, tenant, t0, "200", "400", "400", "400")
		e.sdkRetries(t, tenant, 0)
		if first.Metadata["order_id"] != "6735" {
			t.Errorf("first metadata %v", first.Metadata)
		}
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	// Arrays with indices: payment_method_types[0], items[0][price], items[1][quantity]. The
	// handler gets the elements in index order whatever the order of the fields, so a retry
	// with the fields reversed (items[1] before items[0]) replays, while the elements swapped is
	// another request. A gap in the indices is refused before the key is claimed. stripe-go's
	// expand[0] and curl's expand[] decode to the same value, but a key names the fields as
	// sent, so one key with both spellings is a mismatch.
	t.Run("indexed-arrays", func(t *testing.T) {
		const tenant = "sk_test_indices"
		e.proxy.plan(tenant, plan{drop: []int{0, 3}, rewrite: func(n int, h http.Header, body []byte) []byte {
			if n == 1 || n == 4 {
				return reverseFields(body)
			}
			return body
		}})
		sc := e.client(tenant)
		t0 := time.Now()
		cus := "cus_indices"
		newPI := func(types ...string) *stripe.PaymentIntentCreateParams {
			p := pi(2500, "pi-brackets-1")
			p.Customer = stripe.String(cus)
			p.PaymentMethodTypes = stripe.StringSlice(types)
			p.AddMetadata("order_id", "6735")
			p.AddExpand("customer")
			return p
		}
		intent, err := sc.V1PaymentIntents.Create(ctx, newPI("card", "link"))
		if err != nil {
			t.Fatal(err)
		}
		if !replayed(intent.LastResponse) || !slices.Equal(intent.PaymentMethodTypes, []string{"card", "link"}) || intent.Metadata["order_id"] != "6735" {
			t.Errorf("payment intent: replayed=%v types=%v metadata=%v", replayed(intent.LastResponse), intent.PaymentMethodTypes, intent.Metadata)
		}
		var types []string
		if err := e.pool.QueryRow(ctx, `SELECT payment_method_types FROM payment_intents WHERE id = $1`, intent.ID).Scan(&types); err != nil || !slices.Equal(types, []string{"card", "link"}) {
			t.Errorf("payment_method_types stored as %v (%v)", types, err)
		}
		_, err = sc.V1PaymentIntents.Create(ctx, newPI("link", "card"))
		if se := stripeError(t, err); se.HTTPStatusCode != http.StatusBadRequest || se.Type != stripe.ErrorTypeIdempotency {
			t.Errorf("swapped payment_method_types: got %d %s", se.HTTPStatusCode, se.Type)
		}

		sp := &stripe.SubscriptionCreateParams{Customer: stripe.String(cus), Items: []*stripe.SubscriptionCreateItemParams{
			{Price: stripe.String("price_basic"), Quantity: stripe.Int64(1)},
			{Price: stripe.String("price_addon"), Quantity: stripe.Int64(3), Metadata: map[string]string{"seat": "extra"}}}}
		sp.AddMetadata("order_id", "6735")
		sp.SetIdempotencyKey("sub-brackets-1")
		sub, err := sc.V1Subscriptions.Create(ctx, sp)
		if err != nil {
			t.Fatal(err)
		}
		if !replayed(sub.LastResponse) || sub.Items == nil || len(sub.Items.Data) != 2 {
			t.Fatalf("subscription: replayed=%v items=%+v", replayed(sub.LastResponse), sub.Items)
		}
		for i, want := range []struct {
			price    string
			quantity int64
		}{{"price_basic", 1}, {"price_addon", 3}} {
			if it := sub.Items.Data[i]; it.Price == nil || it.Price.ID != want.price || it.Quantity != want.quantity {
				t.Errorf("items[%d]: %+v", i, it)
			}
		}
		if sub.Items.Data[1].Metadata["seat"] != "extra" {
			t.Errorf("items[1][metadata]: %v", sub.Items.Data[1].Metadata)
		}
		// items[0] and items[2] without items[1]: 400 invalid_request_error, not stored.
		status, body := e.post(t, tenant, "sub-brackets-2", "/v1/subscriptions",
			"customer=cus_indices&items[0][price]=price_basic&items[2][price]=price_addon")
		if status != http.StatusBadRequest || !strings.Contains(body, `"invalid_request_error"`) || !strings.Contains(body, `"param":"items`) {
			t.Errorf("a gap in items: %d %s", status, body)
		}
		t.Logf("a gap in items: %d %s", status, body)
		for i, body := range []string{
			"amount=100&currency=usd&expand[0]=customer&metadata[a]=1&metadata[b]=2",
			"metadata[b]=2&expand[]=customer&currency=usd&metadata[a]=1&amount=100",
		} {
			if status, _ := e.post(t, tenant, "pi-expand-"+strconv.Itoa(i), "/v1/payment_intents", body); status != http.StatusOK {
				t.Errorf("%s: %d", body, status)
			}
		}
		status, _ = e.post(t, tenant, "pi-expand-0", "/v1/payment_intents", "amount=100&currency=usd&expand[]=customer&metadata[a]=1&metadata[b]=2")
		if status != http.StatusBadRequest {
			t.Errorf("expand[] under expand[0]'s key: %d", status)
		}
		var expand []string
		rows, _ := e.pool.Query(ctx, `SELECT params->>'expand' FROM payment_intents WHERE tenant = $1 AND amount = 100`, tenant)
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			expand = append(expand, s)
		}
		if rows.Err() != nil || !slices.Equal(expand, []string{`["customer"]`, `["customer"]`}) {
			t.Errorf("expand stored as %q (%v)", expand, rows.Err())
		}

		e.expect(t, tenant, t0, "200!", "200r", "400", "200!", "200r", "400", "200", "200", "400")
		e.sdkRetries(t, tenant, 2)
		if n := e.rows(t, tenant); n != 4 {
			t.Errorf("rows = %d, want 4", n)
		}
	})

	// The empty string, Stripe's "unset" for a field declared anyOf [X, enum: [""]], sent
	// the ways stripe-go v82.5.1 sends it: AddExtra("metadata", "") writes metadata= (Params.Extra
	// is encoded at the top level: params.go 37-43, 208, 261-267), a non-nil empty slice writes
	// default_tax_rates= (form.go 176-184), and a map value "" writes metadata[channel]= (map
	// values are always encoded: form.go 363-369), which clears that one key. Unset is neither
	// absent nor a value: the same key without metadata and with metadata= are two requests.
	t.Run("empty-string-unsets", func(t *testing.T) {
		const tenant = "sk_test_unset"
		e.proxy.plan(tenant, plan{drop: []int{2}})
		sc := e.client(tenant)
		t0 := time.Now()
		plain := &stripe.CustomerCreateParams{Email: stripe.String("unset@example.com")}
		plain.SetIdempotencyKey("cus-unset-1")
		cus, err := sc.V1Customers.Create(ctx, plain)
		if err != nil {
			t.Fatal(err)
		}
		unset := func(key string) *stripe.CustomerCreateParams {
			p := &stripe.CustomerCreateParams{Email: stripe.String("unset@example.com")}
			p.AddExtra("metadata", "")
			p.AddExtra("address", "")
			p.SetIdempotencyKey(key)
			return p
		}
		_, err = sc.V1Customers.Create(ctx, unset("cus-unset-1"))
		if se := stripeError(t, err); se.HTTPStatusCode != http.StatusBadRequest || se.Type != stripe.ErrorTypeIdempotency {
			t.Errorf("metadata= under the key of a request without metadata: %d %s", se.HTTPStatusCode, se.Type)
		}
		cleared, err := sc.V1Customers.Create(ctx, unset("cus-unset-2"))
		if err != nil {
			t.Fatal(err)
		}
		if !replayed(cleared.LastResponse) || len(cleared.Metadata) != 0 || cleared.Address != nil {
			t.Errorf("cleared: replayed=%v metadata=%v address=%+v", replayed(cleared.LastResponse), cleared.Metadata, cleared.Address)
		}
		oneKey := &stripe.CustomerCreateParams{Email: stripe.String("unset@example.com")}
		oneKey.AddMetadata("order_id", "6735")
		oneKey.AddMetadata("channel", "")
		oneKey.SetIdempotencyKey("cus-unset-3")
		third, err := sc.V1Customers.Create(ctx, oneKey)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(third.Metadata, map[string]string{"order_id": "6735"}) {
			t.Errorf("metadata[channel]= answered as %v", third.Metadata)
		}
		sp := &stripe.SubscriptionCreateParams{Customer: stripe.String(cus.ID), DefaultTaxRates: []*string{},
			Items: []*stripe.SubscriptionCreateItemParams{{Price: stripe.String("price_basic")}}}
		sp.SetIdempotencyKey("sub-unset-1")
		sub, err := sc.V1Subscriptions.Create(ctx, sp)
		if err != nil {
			t.Fatal(err)
		}

		as := e.expect(t, tenant, t0, "200", "400", "200!", "200r", "200", "200")
		e.sdkRetries(t, tenant, 1)
		for _, sent := range []struct {
			attempt int
			field   string
		}{{2, "metadata="}, {2, "address="}, {4, "metadata[channel]="}, {5, "default_tax_rates="}} {
			if !slices.Contains(strings.Split(as[sent.attempt].body, "&"), sent.field) {
				t.Errorf("stripe-go sent %s, without %s", as[sent.attempt].body, sent.field)
			}
		}
		// What the handlers received: Unset for metadata= and default_tax_rates=, and "" for
		// the one key.
		var metaUnset, addrUnset, taxUnset bool
		var channel string
		err = e.pool.QueryRow(ctx, `SELECT
			(SELECT (params #>> '{metadata,Unset}')::bool FROM customers WHERE id = $1),
			(SELECT (params #>> '{address,Unset}')::bool FROM customers WHERE id = $1),
			(SELECT params #>> '{metadata,Value,channel}' FROM customers WHERE id = $2),
			(SELECT (params #>> '{default_tax_rates,Unset}')::bool FROM subscriptions WHERE id = $3)`,
			cleared.ID, third.ID, sub.ID).Scan(&metaUnset, &addrUnset, &channel, &taxUnset)
		if err != nil || !metaUnset || !addrUnset || channel != "" || !taxUnset {
			t.Errorf("stored: metadata unset %v, address unset %v, metadata[channel] %q, default_tax_rates unset %v (%v)",
				metaUnset, addrUnset, channel, taxUnset, err)
		}
		if n := e.rows(t, tenant); n != 4 {
			t.Errorf("rows = %d, want 4", n)
		}
	})

	// On a reused keep-alive connection, net/http itself re-sends a request that carries an
	// Idempotency-Key when the connection breaks before the answer (net/http's transport
	// treats such a request as replayable), before stripe-go's retry logic sees anything:
	// the proxy sees two attempts, stripe-go one call without a retry.
	t.Run("keep-alive-transport-resend", func(t *testing.T) {
		const tenant, key = "sk_test_keepalive", "order-45"
		e.proxy.plan(tenant, plan{keepAlive: true, drop: []int{1}})
		sc := e.client(tenant)
		t0 := time.Now()
		if _, err := sc.V1Customers.Create(ctx, &stripe.CustomerCreateParams{Name: stripe.String("warm the connection")}); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		got, err := sc.V1PaymentIntents.Create(ctx, pi(6000, key))
		took := time.Since(t1)
		if err != nil {
			t.Fatal(err)
		}
		e.expect(t, tenant, t0, "200", "200!", "200r")
		e.sdkRetries(t, tenant, 0)
		t.Logf("the caller got its payment intent after %.3fs, without a retry of stripe-go's (whose first would wait 0.5s)", took.Seconds())
		if !replayed(got.LastResponse) {
			t.Error("the re-sent request was not replayed")
		}
		if n := e.rows(t, tenant); n != 2 {
			t.Errorf("rows = %d, want 2", n)
		}
	})
}

// The refusals of the idempotency layer that need a server of their own, each a *stripe.Error
// with Stripe's type, code and message, read from a document in the spec's `error` schema:
// a tenant over its cap of new keys (429 rate_limit) and an unreachable store (503
// api_error). stripe-go retries neither (of Stripe's errors it retries only 429
// lock_timeout), so the proxy sees each once.
func TestStripeGoErrors(t *testing.T) {
	ctx := context.Background()

	t.Run("rate-limited-429", func(t *testing.T) {
		const tenant = "sk_test_limited"
		e := newEnv(t, pgstore.Limits{Records: 1, RecordsInterval: time.Hour})
		sc := e.client(tenant)
		t0 := time.Now()
		if _, err := sc.V1PaymentIntents.Create(ctx, pi(1000, "limit-0001")); err != nil {
			t.Fatal(err)
		}
		_, err := sc.V1PaymentIntents.Create(ctx, pi(1000, "limit-0002"))
		se := apiError(t, err, http.StatusTooManyRequests)
		if se.Type != stripe.ErrorTypeInvalidRequest || se.Code != stripe.ErrorCodeRateLimit || se.Msg == "" {
			t.Errorf("got %s %s %q", se.Type, se.Code, se.Msg)
		}
		if h := se.LastResponse.Header; h.Get("Stripe-Should-Retry") != "true" || h.Get("Retry-After") == "" {
			t.Errorf("Stripe-Should-Retry %q, Retry-After %q", h.Get("Stripe-Should-Retry"), h.Get("Retry-After"))
		}
		// A replay is an answer from an existing record: not limited.
		again, err := sc.V1PaymentIntents.Create(ctx, pi(1000, "limit-0001"))
		if err != nil || !replayed(again.LastResponse) {
			t.Errorf("replay under the cap: %v", err)
		}
		e.expect(t, tenant, t0, "200", "429", "200r")
		e.sdkRetries(t, tenant, 0)
		if n := e.rows(t, tenant); n != 1 {
			t.Errorf("rows = %d, want 1", n)
		}
	})

	t.Run("store-unavailable-503", func(t *testing.T) {
		const tenant = "sk_test_outage"
		e := newEnv(t, pgstore.Limits{})
		e.pool.Close() // the store cannot be reached: nothing runs
		sc := e.client(tenant)
		t0 := time.Now()
		_, err := sc.V1Customers.Create(ctx, &stripe.CustomerCreateParams{Email: stripe.String("x@example.com")})
		se := apiError(t, err, http.StatusServiceUnavailable)
		if se.Type != stripe.ErrorTypeAPI || se.Msg == "" {
			t.Errorf("got %s %s %q", se.Type, se.Code, se.Msg)
		}
		e.expect(t, tenant, t0, "503")
		e.sdkRetries(t, tenant, 0)
	})
}

// apiError checks that err is stripe-go's *stripe.Error for an answer of status whose body is
// one of the spec's `error` documents (strictly: no member the schema does not declare), and
// that the error's type, code and message are that document's.
func apiError(t *testing.T, err error, status int) *stripe.Error {
	t.Helper()
	se := stripeError(t, err)
	t.Logf("stripe-go: %d %s %s: %s", se.HTTPStatusCode, se.Type, se.Code, se.Msg)
	if se.HTTPStatusCode != status || se.LastResponse == nil {
		t.Fatalf("status %d, want %d", se.HTTPStatusCode, status)
	}
	body := se.LastResponse.RawJSON
	schema, err := spec.LoadSchema("../../testdata/specs/vendor/stripe-spec3.yaml", "#/components/schemas/error")
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(body, true); err != nil {
		t.Errorf("the %d body %s is not the spec's error: %v", status, body, err)
	}
	var doc struct {
		Error struct{ Type, Code, Message string }
	}
	if err := json.Unmarshal(body, &doc); err != nil || string(se.Type) != doc.Error.Type ||
		string(se.Code) != doc.Error.Code || se.Msg != doc.Error.Message {
		t.Errorf("stripe-go's error %s %s %q, the document %s", se.Type, se.Code, se.Msg, body)
	}
	return se
}

// customerWithAddress is a customer with an address and two metadata keys, sent by stripe-go
// as address[city]=..., metadata[order_id]=....
func customerWithAddress(key, orderID string) *stripe.CustomerCreateParams {
	p := &stripe.CustomerCreateParams{Email: stripe.String("jenny@example.com"), Address: &stripe.AddressParams{
		Line1: stripe.String("Unter den Linden 1"), City: stripe.String("Berlin"), PostalCode: stripe.String("10117"), Country: stripe.String("DE")}}
	p.AddMetadata("order_id", orderID)
	p.AddMetadata("channel", "web")
	p.SetIdempotencyKey(key)
	return p
}

// post sends a hand-written form body through the proxy, as curl would, and returns the
// status and the body of the answer.
func (e *env) post(t *testing.T, tenant, key, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = http.Header{"Authorization": {"Bearer " + tenant}, "Idempotency-Key": {key},
		"Content-Type": {"application/x-www-form-urlencoded"}}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// id returns get() when err is nil.
func id[T any](r *T, err error, get func() string) (string, error) {
	if err != nil || r == nil {
		return "", err
	}
	return get(), nil
}

// reverseFields reverses the order of the fields of a form body.
func reverseFields(body []byte) []byte {
	fields := strings.Split(string(body), "&")
	slices.Reverse(fields)
	return []byte(strings.Join(fields, "&"))
}

// TestWaitCost measures what concurrency.wait costs the other requests: a waiting duplicate
// gives its pool connection back while it waits (pgstore wakes it when the key's claim ends).
// On a pool of 4 connections, 8 copies of one request with a 2 s handler: under the profile's
// 5 s wait all 8 succeed, and meanwhile another tenant's new request is served at once (it
// would wait for a connection if the waiters held theirs); with payouts' wait of 0s, 7 copies
// get 409 at once. The figures are logged (docs/stripe.md quotes them); the test asserts the
// outcomes, and that the other request did not wait for a waiter's connection (well under the
// 2 s handler).
func TestWaitCost(t *testing.T) {
	pool := pgtest.NewPool(t, 4)
	if err := Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(pool, Options{Delay: func(tenant, _ string) time.Duration {
		if tenant == "sk_test_storm" {
			return 2 * time.Second
		}
		return 0
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(path, tenant, key string) (int, time.Duration) {
		t0 := time.Now()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("amount=100&currency=usd"))
		req.Header = http.Header{"Authorization": {"Bearer " + tenant}, "Idempotency-Key": {key},
			"Content-Type": {"application/x-www-form-urlencoded"}}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, 0
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(t0)
	}
	for _, c := range []struct {
		path string
		want map[int]int // statuses of the 8 copies
	}{
		{"/v1/payment_intents", map[int]int{200: 8}},
		{"/v1/payouts", map[int]int{200: 1, 409: 7}},
	} {
		t0 := time.Now()
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			statuses = map[int]int{}
			last     time.Duration
		)
		for i := range 8 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 20 * time.Millisecond)
				s, _ := post(c.path, "sk_test_storm", "storm"+c.path)
				mu.Lock()
				statuses[s]++
				last = max(last, time.Since(t0))
				mu.Unlock()
			})
		}
		time.Sleep(400 * time.Millisecond)
		other, took := post(c.path, "sk_test_other", "other"+c.path)
		wg.Wait()
		t.Logf("%s: 8 copies %v, the last answered at %.2fs; another tenant's new request: %d after %.3fs",
			c.path, statuses, last.Seconds(), other, took.Seconds())
		if !maps.Equal(statuses, c.want) || other != http.StatusOK {
			t.Errorf("%s: copies %v, want %v; other %d", c.path, statuses, c.want, other)
		}
		if took > time.Second {
			t.Errorf("%s: another tenant's request took %v: waiting duplicates held the pool", c.path, took)
		}
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM payment_intents) + (SELECT count(*) FROM payouts)`).Scan(&n); err != nil || n != 4 {
		t.Errorf("rows = %d (%v), want 4", n, err)
	}
}

// TestReadmeSection checks that the README's "Stripe-compatible" section shows this example's
// config (idemgen.yaml without its comment lines) and its go:generate command, so that what
// the README shows is what this test runs.
func TestReadmeSection(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Stripe-compatible\n")
	if !ok {
		t.Fatal(`README.md has no "## Stripe-compatible" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	block := func(lang string) string {
		_, rest, ok := strings.Cut(section, "```"+lang+"\n")
		if !ok {
			t.Fatalf("the section has no %s block", lang)
		}
		b, _, _ := strings.Cut(rest, "```")
		return b
	}
	cfg, err := os.ReadFile("idemgen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for line := range strings.Lines(string(cfg)) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			want.WriteString(line)
		}
	}
	if got := block("yaml"); got != want.String() {
		t.Errorf("README's config:\n%s\nidemgen.yaml without comments:\n%s", got, want.String())
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, gen, _ := strings.Cut(string(src), "//go:generate ")
	gen, _, _ = strings.Cut(gen, "\n")
	if got := strings.TrimSpace(block("sh")); got != gen {
		t.Errorf("README's command %q, main.go's go:generate %q", got, gen)
	}
}
