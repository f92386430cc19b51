package idemgin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	idemgin "github.com/idemgen/idemgen/adapters/gin"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

const refunds = "/v1/payments/:id/refunds"

// TestMounts puts the adapter on a gin service in each way gin mounts middleware and checks the
// contract through each: the decoder before the key, one execution per key, the replay of what
// the client got, 422 for the same key on another payment (gin's path parameter is part of the
// request), 409 for a duplicate that never reaches the handler, and unmarked routes untouched.
func TestMounts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		mount  func(e *env, r *gin.Engine)
	}{
		{"route", "", func(e *env, r *gin.Engine) {
			idem := e.idem(idemgin.Options{})
			r.POST("/v1/payments", idem, e.createPayment)
			r.POST(refunds, idem, e.createRefund)
			r.GET("/v1/payments/:id", idem, e.getPayment)
		}},
		{"group", "", func(e *env, r *gin.Engine) {
			g := r.Group("/v1", e.idem(idemgin.Options{}))
			g.POST("/payments", e.createPayment)
			g.POST("/payments/:id/refunds", e.createRefund)
			g.GET("/payments/:id", e.getPayment)
		}},
		{"Use", "", func(e *env, r *gin.Engine) {
			r.Use(e.idem(idemgin.Options{}))
			r.POST("/v1/payments", e.createPayment)
			r.POST(refunds, e.createRefund)
			r.GET("/v1/payments/:id", e.getPayment)
		}},
		{"group-under-a-prefix", "/api", func(e *env, r *gin.Engine) {
			g := r.Group("/api")
			g.Use(e.idem(idemgin.Options{Prefix: "/api"}))
			g.POST("/v1/payments", e.createPayment)
			g.POST(refunds, e.createRefund)
			g.GET("/v1/payments/:id", e.getPayment)
		}},
		{"mounted-twice", "", func(e *env, r *gin.Engine) {
			// Globally and on the route: the inner one sees a guarded request and lets it run.
			r.Use(e.idem(idemgin.Options{}))
			idem := e.idem(idemgin.Options{})
			r.POST("/v1/payments", idem, e.createPayment)
			r.POST(refunds, idem, e.createRefund)
			r.GET("/v1/payments/:id", idem, e.getPayment)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := gin.New()
			r.Use(auth)
			tc.mount(e, r)
			srv := httptest.NewServer(r)
			t.Cleanup(srv.Close)
			const tenant = "t-gin"
			payA, payB := e.payment(tenant), e.payment(tenant)
			refund := func(paymentID, key, body string, header ...string) *response {
				return send(t, srv, "POST", tc.prefix+"/v1/payments/"+paymentID+"/refunds", tenant, key, body, header...)
			}

			first := refund(payA, "k-gin-refund-00000001", `{"amount": 10}`)
			if first.status != http.StatusCreated || first.json["payment_id"] != payA || first.replayed() {
				t.Fatalf("first: %s", first)
			}
			again := refund(payA, "k-gin-refund-00000001", `{ "amount" : 10 }`)
			if again.status != http.StatusCreated || again.body != first.body || !again.replayed() {
				t.Errorf("retry: %s, want the replay of %s", again, first)
			}
			if other := refund(payB, "k-gin-refund-00000001", `{"amount": 10}`); other.status != http.StatusUnprocessableEntity || other.problem() != "payload-mismatch" {
				t.Errorf("same key, other payment: %s, want 422 payload-mismatch", other)
			}
			if bad := refund(payA, "k-gin-refund-00000002", `{"amount": "ten"}`); bad.status != http.StatusBadRequest || bad.problem() != "body-invalid" {
				t.Errorf("bad body: %s, want 400 body-invalid", bad)
			}
			if fixed := refund(payA, "k-gin-refund-00000002", `{"amount": 20}`); fixed.status != http.StatusCreated || fixed.replayed() {
				t.Errorf("corrected retry: %s, want 201", fixed)
			}
			done := make(chan *response)
			go func() {
				done <- send(t, srv, "POST", tc.prefix+"/v1/payments", tenant, "k-gin-pay-000000003", `{"amount": 30, "currency": "EUR", "to": "acc_1"}`, "X-Hold", "1")
			}()
			select {
			case <-e.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the first request never reached the handler")
			}
			dup := send(t, srv, "POST", tc.prefix+"/v1/payments", tenant, "k-gin-pay-000000003", `{"amount": 30, "currency": "EUR", "to": "acc_1"}`)
			close(e.release)
			if dup.status != http.StatusConflict || dup.problem() != "in-flight" || dup.header.Get("Retry-After") == "" {
				t.Errorf("duplicate: %s, want 409 in-flight with Retry-After", dup)
			}
			if held := <-done; held.status != http.StatusCreated || held.header.Get("Location") == "" {
				t.Errorf("held first request: %s", held)
			}
			if get := send(t, srv, "GET", tc.prefix+"/v1/payments/"+payA, tenant, "k-gin-refund-00000001", ""); get.status != http.StatusOK || get.replayed() {
				t.Errorf("unmarked GET: %s", get)
			}
			if n := e.calls.Load(); n != 3 {
				t.Errorf("the handlers were entered %d times, want 3 (one per key)", n)
			}
			if n := e.count("refunds", tenant); n != 2 {
				t.Errorf("%d refunds written, want 2", n)
			}
		})
	}
}

// TestErrorsRenderedInsideTheGuard: what gin sends for a handler's c.Error, c.Abort* or
// c.Status is what is stored. c.Error is rendered by the service's error middleware, given as
// Options.Errors or mounted after the adapter; a final answer is replayed byte for byte, one that
// is not final rolls back and frees the key.
func TestErrorsRenderedInsideTheGuard(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mount func(e *env, r *gin.Engine)
	}{
		{"Options.Errors", func(e *env, r *gin.Engine) {
			r.Use(errorsMiddleware) // the service's, before the routes: its own run writes nothing more
			r.POST("/v1/payments", e.idem(idemgin.Options{Errors: errorsMiddleware}), e.createPayment)
		}},
		{"error middleware after the adapter", func(e *env, r *gin.Engine) {
			r.POST("/v1/payments", e.idem(idemgin.Options{}), errorsMiddleware, e.createPayment)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := gin.New()
			r.Use(auth)
			tc.mount(e, r)
			srv := httptest.NewServer(r)
			t.Cleanup(srv.Close)
			const tenant = "t-gin-errors"
			body := `{"amount": 40, "currency": "EUR", "to": "acc_1"}`
			for i, answer := range []struct {
				header string
				status int
				ct     string
			}{
				{"notfound", http.StatusNotFound, "application/problem+json"},
				{"abort", http.StatusNotFound, "application/json"},
				{"status", http.StatusAccepted, ""},
			} {
				key := "k-gin-err-0000000" + string(rune('1'+i))
				got := send(t, srv, "POST", "/v1/payments", tenant, key, body, "X-Answer", answer.header)
				if got.status != answer.status || !strings.HasPrefix(got.header.Get("Content-Type"), answer.ct) || strings.Count(got.body, "no such account") > 1 {
					t.Fatalf("%s: %s, want %d %s", answer.header, got, answer.status, answer.ct)
				}
				replay := send(t, srv, "POST", "/v1/payments", tenant, key, body)
				if replay.status != got.status || replay.body != got.body || !replay.replayed() {
					t.Errorf("retry of %s: %s, want the replay of %s", answer.header, replay, got)
				}
			}
			if n := e.count("payments", tenant); n != 3 {
				t.Errorf("%d payments after three final answers, want 3", n)
			}
			failed := send(t, srv, "POST", "/v1/payments", tenant, "k-gin-err-000000009", body, "X-Answer", "error")
			if failed.status != http.StatusInternalServerError || !strings.Contains(failed.body, "the business code failed") || failed.replayed() {
				t.Errorf("c.Error 500: %s, want the service's 500", failed)
			}
			if ok := send(t, srv, "POST", "/v1/payments", tenant, "k-gin-err-000000009", body); ok.status != http.StatusCreated || ok.replayed() {
				t.Errorf("retry after the 500: %s, want the handler to run again", ok)
			}
			if n := e.count("payments", tenant); n != 4 {
				t.Errorf("%d payments, want 4: the 500's insert rolled back", n)
			}
		})
	}
}

// TestUnrenderedErrorsAreNeverStored: the handler records c.Error and writes nothing while the
// service's error middleware runs outside the adapter (before it, with no Options.Errors): the
// guard sees no response. Nothing is stored, the client gets 500 `internal` and not the error
// middleware's late write too, the log names c.Errors and the way out, the key stays free.
func TestUnrenderedErrorsAreNeverStored(t *testing.T) {
	e := newEnv(t)
	r := gin.New()
	r.Use(auth, errorsMiddleware)
	r.POST("/v1/payments", e.idem(idemgin.Options{}), e.createPayment)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	const tenant = "t-gin-unrendered"
	body := `{"amount": 50, "currency": "EUR", "to": "acc_1"}`
	for _, answer := range []string{"notfound", "nothing"} {
		key := "k-gin-unrendered-" + answer
		got := send(t, srv, "POST", "/v1/payments", tenant, key, body, "X-Answer", answer)
		if got.status != http.StatusInternalServerError || got.problem() != "internal" || strings.Contains(got.body, "no such account") {
			t.Errorf("%s: %s, want 500 internal alone", answer, got)
		}
		if retry := send(t, srv, "POST", "/v1/payments", tenant, key, body); retry.status != http.StatusCreated || retry.replayed() {
			t.Errorf("%s, retry: %s, want 201 from the handler", answer, retry)
		}
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "wrote no response") || !strings.Contains(logs, "idemgin.Options.Errors") || !strings.Contains(logs, "no such account") {
		t.Errorf("the log does not say what happened:\n%s", logs)
	}
	if n := e.count("payments", tenant); n != 2 {
		t.Errorf("%d payments, want 2", n)
	}
}

// TestScopeFromTheGinContext: the scope is what the service's auth middleware put in c.Keys; a
// request without one is refused 401 before any key lookup, and tenants do not share keys.
func TestScopeFromTheGinContext(t *testing.T) {
	e := newEnv(t)
	r := gin.New()
	r.Use(auth)
	r.POST("/v1/payments", e.idem(idemgin.Options{}), e.createPayment)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	body := `{"amount": 60, "currency": "EUR", "to": "acc_1"}`
	if anon := send(t, srv, "POST", "/v1/payments", "", "k-gin-scope-00000001", body); anon.status != http.StatusUnauthorized || anon.problem() != "unauthenticated" {
		t.Errorf("no tenant: %s, want 401 unauthenticated", anon)
	}
	a := send(t, srv, "POST", "/v1/payments", "t-gin-a", "k-gin-scope-00000001", body)
	b := send(t, srv, "POST", "/v1/payments", "t-gin-b", "k-gin-scope-00000001", body)
	if a.status != http.StatusCreated || b.status != http.StatusCreated || a.replayed() || b.replayed() || a.json["id"] == b.json["id"] {
		t.Errorf("one key, two tenants: %s and %s, want two executions", a, b)
	}
	if e.calls.Load() != 2 {
		t.Errorf("the handler ran %d times, want 2", e.calls.Load())
	}
}

// TestOnlyWhatGinRoutes: with the adapter on the whole Engine, a request gin answers 404, 405
// or a trailing-slash redirect is never claimed (nothing stored under its key, so the correct
// retry runs), and the path parameter the fingerprint covers is the one gin decodes.
func TestOnlyWhatGinRoutes(t *testing.T) {
	e := newEnv(t)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(auth, e.idem(idemgin.Options{}))
	r.POST(refunds, e.createRefund)
	r.POST("/v1/payments", e.createPayment)
	r.GET("/v1/orders", func(c *gin.Context) { c.Status(http.StatusOK) })
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	const tenant = "t-gin-routes"
	pay := e.payment(tenant)
	body := `{"amount": 70, "currency": "EUR", "to": "acc_1"}`
	client := *srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/v1/payments/", http.StatusTemporaryRedirect}, // gin redirects a trailing slash
		{"/v1/orders", http.StatusMethodNotAllowed},     // a marked operation's path, routed with GET only
		{"/v1/payments/x/y/refunds", http.StatusNotFound},
	} {
		req, _ := http.NewRequest("POST", srv.URL+tc.path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tenant)
		req.Header.Set("Idempotency-Key", "k-gin-routes-0000001")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("POST %s: %d, want gin's %d", tc.path, resp.StatusCode, tc.status)
		}
	}
	if n := e.records(); n != 0 {
		t.Errorf("%d idempotency records after requests gin did not route, want 0", n)
	}
	if ok := send(t, srv, "POST", "/v1/payments", tenant, "k-gin-routes-0000001", body); ok.status != http.StatusCreated || ok.replayed() {
		t.Errorf("the correct request with the same key: %s, want 201", ok)
	}
	// gin decodes the path: "pay%5F..." is the payment "pay_...", for the handler and so for the
	// fingerprint, and the request replays.
	first := send(t, srv, "POST", "/v1/payments/"+pay+"/refunds", tenant, "k-gin-routes-0000002", `{"amount": 5}`)
	escaped := send(t, srv, "POST", "/v1/payments/"+strings.Replace(pay, "_", "%5F", 1)+"/refunds", tenant, "k-gin-routes-0000002", `{"amount": 5}`)
	if first.status != http.StatusCreated || escaped.body != first.body || !escaped.replayed() {
		t.Errorf("first %s, escaped %s: want the replay", first, escaped)
	}
}

// TestLeaseMode: a lease-mode operation through the adapter gets its claim from the
// gin.Context (LeaseFrom), calls the provider once per key under a derived provider key, and
// writes its row in the transaction that completes the record (OnComplete).
func TestLeaseMode(t *testing.T) {
	e := newEnv(t)
	provider := conformance.NewProvider()
	r := gin.New()
	r.Use(auth)
	r.POST("/v1/provider-charges", e.idem(idemgin.Options{}), func(c *gin.Context) {
		e.calls.Add(1)
		var req struct {
			Amount int64 `json:"amount"`
		}
		if err := c.ShouldBindJSON(&req); err != nil {
			c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			return
		}
		lease := idemgin.LeaseFrom(c)
		if lease == nil {
			c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "no lease"})
			return
		}
		tenant := c.GetString("tenant")
		pk, err := lease.ProviderKey(c.Request.Context(), "charge")
		if err != nil {
			c.AbortWithStatusJSON(http.StatusServiceUnavailable, gin.H{"error": err.Error()})
			return
		}
		ref, err := provider.Charge(c.Request.Context(), tenant, pk, req.Amount)
		if err != nil {
			c.AbortWithStatusJSON(http.StatusBadGateway, gin.H{"error": err.Error()})
			return
		}
		id := "pc_" + lease.DeriveID("provider-charge")
		if !idemgin.OnComplete(c, func(ctx context.Context, db pgstore.DBTX) error {
			_, err := db.Exec(ctx, `INSERT INTO provider_charges (id, tenant, amount, provider_reference) VALUES ($1, $2, $3, $4)`, id, tenant, req.Amount, ref)
			return err
		}) {
			c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "not a lease-mode request"})
			return
		}
		c.JSON(http.StatusCreated, gin.H{"id": id, "provider_reference": ref})
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	const tenant = "t-gin-lease"
	first := send(t, srv, "POST", "/v1/provider-charges", tenant, "k-gin-lease-00000001", `{"amount": 700}`)
	again := send(t, srv, "POST", "/v1/provider-charges", tenant, "k-gin-lease-00000001", `{"amount": 700}`)
	if first.status != http.StatusCreated || again.body != first.body || !again.replayed() {
		t.Fatalf("first %s, retry %s: want 201 and its replay", first, again)
	}
	if calls := provider.Calls(tenant); calls != 1 || e.count("provider_charges", tenant) != 1 || e.calls.Load() != 1 {
		t.Errorf("provider calls %d, rows %d, handler runs %d: want 1, 1, 1", calls, e.count("provider_charges", tenant), e.calls.Load())
	}
}

// TestUndeclaredQueryIsNotHandedOn: gin's form binder reads the query with the body, so an
// undeclared "?description=..." would fill a field the fingerprint does not cover; the handler
// gets the declared query parameters only (createCharge declares none).
func TestUndeclaredQueryIsNotHandedOn(t *testing.T) {
	e := newEnv(t)
	r := gin.New()
	r.Use(auth, e.idem(idemgin.Options{}))
	var got []string
	r.POST("/v1/charges", func(c *gin.Context) {
		var req struct {
			Amount      int64  `form:"amount"`
			Description string `form:"description"`
		}
		if err := c.ShouldBind(&req); err != nil {
			c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			return
		}
		got = append(got, req.Description+"|"+c.Query("description")+"|"+c.Request.URL.RawQuery)
		c.JSON(http.StatusCreated, gin.H{"amount": req.Amount})
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	form := "amount=2500&currency=usd"
	first := send(t, srv, "POST", "/v1/charges?description=evil", "t-gin-query", "k-gin-query-0000001", form, "Content-Type", "application/x-www-form-urlencoded")
	again := send(t, srv, "POST", "/v1/charges?description=other", "t-gin-query", "k-gin-query-0000001", form, "Content-Type", "application/x-www-form-urlencoded")
	if first.status != http.StatusCreated || !again.replayed() || len(got) != 1 || got[0] != "||" {
		t.Errorf("first %s, again %s, the handler saw %q: want the description unseen and the retry replayed", first, again, got)
	}
}
