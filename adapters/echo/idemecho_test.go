package idemecho_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	idemecho "github.com/idemgen/idemgen/adapters/echo"
)

const refunds = "/v1/payments/:id/refunds"

// TestMounts puts the adapter on an echo service in each way echo mounts middleware and checks
// the contract through each: the decoder before the key, one execution per key, the replay of
// what the client got, 422 for the same key on another payment (echo's path parameter is part
// of the request), 409 for a duplicate that never reaches the handler, and unmarked routes
// untouched.
func TestMounts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		mount  func(e *env, srv *echo.Echo)
	}{
		{"route", "", func(e *env, srv *echo.Echo) {
			idem := e.idem(idemecho.Options{})
			srv.POST("/v1/payments", e.createPayment, idem)
			srv.POST(refunds, e.createRefund, idem)
			srv.GET("/v1/payments/:id", e.getPayment, idem)
		}},
		{"group", "", func(e *env, srv *echo.Echo) {
			g := srv.Group("/v1", e.idem(idemecho.Options{}))
			g.POST("/payments", e.createPayment)
			g.POST("/payments/:id/refunds", e.createRefund)
			g.GET("/payments/:id", e.getPayment)
		}},
		{"Use", "", func(e *env, srv *echo.Echo) {
			srv.Use(e.idem(idemecho.Options{}))
			srv.POST("/v1/payments", e.createPayment)
			srv.POST(refunds, e.createRefund)
			srv.GET("/v1/payments/:id", e.getPayment)
		}},
		{"group-under-a-prefix", "/api", func(e *env, srv *echo.Echo) {
			g := srv.Group("/api")
			g.Use(e.idem(idemecho.Options{Prefix: "/api"}))
			g.POST("/v1/payments", e.createPayment)
			g.POST(refunds, e.createRefund)
			g.GET("/v1/payments/:id", e.getPayment)
		}},
		{"mounted-twice", "", func(e *env, srv *echo.Echo) {
			// Globally and on the route: the inner one sees a guarded request and lets it run.
			srv.Use(e.idem(idemecho.Options{}))
			idem := e.idem(idemecho.Options{})
			srv.POST("/v1/payments", e.createPayment, idem)
			srv.POST(refunds, e.createRefund, idem)
			srv.GET("/v1/payments/:id", e.getPayment, idem)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			es := echo.New()
			es.Use(auth)
			tc.mount(e, es)
			srv := httptest.NewServer(es)
			t.Cleanup(srv.Close)
			const tenant = "t-echo"
			payA, payB := e.payment(tenant), e.payment(tenant)
			refund := func(paymentID, key, body string, header ...string) *response {
				return send(t, srv, "POST", tc.prefix+"/v1/payments/"+paymentID+"/refunds", tenant, key, body, header...)
			}

			first := refund(payA, "k-echo-refund-0000001", `{"amount": 10}`)
			if first.status != http.StatusCreated || first.json["payment_id"] != payA || first.replayed() {
				t.Fatalf("first: %s", first)
			}
			again := refund(payA, "k-echo-refund-0000001", `{ "amount" : 10 }`)
			if again.status != http.StatusCreated || again.body != first.body || !again.replayed() {
				t.Errorf("retry: %s, want the replay of %s", again, first)
			}
			if other := refund(payB, "k-echo-refund-0000001", `{"amount": 10}`); other.status != http.StatusUnprocessableEntity || other.problem() != "payload-mismatch" {
				t.Errorf("same key, other payment: %s, want 422 payload-mismatch", other)
			}
			// The generated decoder refuses what the schema does not allow before any key
			// lookup: the handler never sees it, nothing is stored, and the corrected retry
			// with the same key runs.
			if bad := refund(payA, "k-echo-refund-0000002", `{"amount": "ten"}`); bad.status != http.StatusBadRequest || bad.problem() != "body-invalid" {
				t.Errorf("bad body: %s, want 400 body-invalid", bad)
			}
			if fixed := refund(payA, "k-echo-refund-0000002", `{"amount": 20}`); fixed.status != http.StatusCreated || fixed.replayed() {
				t.Errorf("corrected retry: %s, want 201", fixed)
			}
			// A duplicate while the first is inside the handler: 409, not entered twice.
			done := make(chan *response)
			go func() {
				done <- send(t, srv, "POST", tc.prefix+"/v1/payments", tenant, "k-echo-pay-00000003", `{"amount": 30, "currency": "EUR", "to": "acc_1"}`, "X-Hold", "1")
			}()
			select {
			case <-e.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the first request never reached the handler")
			}
			dup := send(t, srv, "POST", tc.prefix+"/v1/payments", tenant, "k-echo-pay-00000003", `{"amount": 30, "currency": "EUR", "to": "acc_1"}`)
			close(e.release)
			if dup.status != http.StatusConflict || dup.problem() != "in-flight" || dup.header.Get("Retry-After") == "" {
				t.Errorf("duplicate: %s, want 409 in-flight with Retry-After", dup)
			}
			if held := <-done; held.status != http.StatusCreated || held.header.Get("Location") == "" {
				t.Errorf("held first request: %s", held)
			}
			if get := send(t, srv, "GET", tc.prefix+"/v1/payments/"+payA, tenant, "k-echo-refund-0000001", ""); get.status != http.StatusOK || get.replayed() {
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

// TestHandlerErrorsRenderedInsideTheGuard: a handler's returned error is rendered by echo's
// HTTPErrorHandler before the outcome is decided, so a final one is stored as the client got
// it (echo's own format, or the service's), and one that is not final (a plain error, echo's
// 500) rolls back and leaves the key free.
func TestHandlerErrorsRenderedInsideTheGuard(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*echo.Echo)
		ct    string
	}{
		{"echo's error handler", func(*echo.Echo) {}, "application/json"},
		{"the service's error handler", func(es *echo.Echo) {
			es.HTTPErrorHandler = func(err error, c echo.Context) {
				if c.Response().Committed {
					return
				}
				he, ok := err.(*echo.HTTPError)
				if !ok {
					he = echo.NewHTTPError(http.StatusInternalServerError, "internal")
				}
				c.Response().Header().Set("Content-Type", "application/problem+json")
				c.Response().WriteHeader(he.Code)
				_ = json.NewEncoder(c.Response()).Encode(map[string]any{"type": "https://payments.example/problems/" + strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "-"), "status": he.Code, "detail": he.Message})
			}
		}, "application/problem+json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			es := echo.New()
			tc.setup(es)
			es.Use(auth)
			es.POST("/v1/payments", e.createPayment, e.idem(idemecho.Options{}))
			srv := httptest.NewServer(es)
			t.Cleanup(srv.Close)
			const tenant = "t-echo-errors"
			body := `{"amount": 40, "currency": "EUR", "to": "acc_1"}`

			notFound := send(t, srv, "POST", "/v1/payments", tenant, "k-echo-err-000000001", body, "X-Answer", "notfound")
			if notFound.status != http.StatusNotFound || !strings.HasPrefix(notFound.header.Get("Content-Type"), tc.ct) || !strings.Contains(notFound.body, "no such account") {
				t.Fatalf("handler's 404: %s", notFound)
			}
			replay := send(t, srv, "POST", "/v1/payments", tenant, "k-echo-err-000000001", body)
			if replay.status != http.StatusNotFound || replay.body != notFound.body || !replay.replayed() {
				t.Errorf("retry of the 404: %s, want the replay of %s", replay, notFound)
			}
			// The 404 is final: its payment row committed with it, as the handler wrote it.
			if n := e.count("payments", tenant); n != 1 {
				t.Errorf("%d payments after the final 404, want 1", n)
			}

			failed := send(t, srv, "POST", "/v1/payments", tenant, "k-echo-err-000000002", body, "X-Answer", "error")
			if failed.status != http.StatusInternalServerError || failed.replayed() {
				t.Errorf("handler's plain error: %s, want echo's 500", failed)
			}
			if ok := send(t, srv, "POST", "/v1/payments", tenant, "k-echo-err-000000002", body); ok.status != http.StatusCreated || ok.replayed() {
				t.Errorf("retry after the 500: %s, want the handler to run again", ok)
			}
			if n := e.count("payments", tenant); n != 2 {
				t.Errorf("%d payments, want 2: the 500's insert rolled back", n)
			}
		})
	}
}

// TestNothingWrittenIsNeverStored: a handler that returns nil without writing gets no stored
// answer: the client gets 500 `internal`, the handler's writes roll back, the key stays free.
func TestNothingWrittenIsNeverStored(t *testing.T) {
	e := newEnv(t)
	es := echo.New()
	es.Use(auth)
	es.POST("/v1/payments", e.createPayment, e.idem(idemecho.Options{}))
	srv := httptest.NewServer(es)
	t.Cleanup(srv.Close)
	const tenant = "t-echo-nothing"
	body := `{"amount": 50, "currency": "EUR", "to": "acc_1"}`
	silent := send(t, srv, "POST", "/v1/payments", tenant, "k-echo-nothing-000001", body, "X-Answer", "nothing")
	if silent.status != http.StatusInternalServerError || silent.problem() != "internal" {
		t.Fatalf("a handler that wrote nothing: %s, want 500 internal", silent)
	}
	if !strings.Contains(e.logs.String(), "wrote no response") {
		t.Errorf("the log does not say the handler wrote no response:\n%s", e.logs)
	}
	if retry := send(t, srv, "POST", "/v1/payments", tenant, "k-echo-nothing-000001", body); retry.status != http.StatusCreated || retry.replayed() {
		t.Errorf("retry: %s, want 201 from the handler", retry)
	}
	if n := e.count("payments", tenant); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}
}

// TestScopeFromTheEchoContext: the scope is what the service's auth middleware put in the
// echo.Context; a request without one is refused 401 before any key lookup, and tenants do not
// share keys.
func TestScopeFromTheEchoContext(t *testing.T) {
	e := newEnv(t)
	es := echo.New()
	es.Use(auth)
	es.POST("/v1/payments", e.createPayment, e.idem(idemecho.Options{}))
	srv := httptest.NewServer(es)
	t.Cleanup(srv.Close)
	body := `{"amount": 60, "currency": "EUR", "to": "acc_1"}`
	if anon := send(t, srv, "POST", "/v1/payments", "", "k-echo-scope-0000001", body); anon.status != http.StatusUnauthorized || anon.problem() != "unauthenticated" {
		t.Errorf("no tenant: %s, want 401 unauthenticated", anon)
	}
	a := send(t, srv, "POST", "/v1/payments", "t-echo-a", "k-echo-scope-0000001", body)
	b := send(t, srv, "POST", "/v1/payments", "t-echo-b", "k-echo-scope-0000001", body)
	if a.status != http.StatusCreated || b.status != http.StatusCreated || a.replayed() || b.replayed() || a.json["id"] == b.json["id"] {
		t.Errorf("one key, two tenants: %s and %s, want two executions", a, b)
	}
	if e.calls.Load() != 2 {
		t.Errorf("the handler ran %d times, want 2", e.calls.Load())
	}
}

// TestOnlyWhatEchoRoutes: with the adapter on the whole Echo, a request echo answers 404 or 405
// is never claimed (nothing stored under its key), and the path parameter the fingerprint
// covers is the one echo decodes (echo routes and reads parameters on the escaped path).
func TestOnlyWhatEchoRoutes(t *testing.T) {
	e := newEnv(t)
	es := echo.New()
	es.Use(auth, e.idem(idemecho.Options{}))
	es.POST(refunds, e.createRefund)
	es.GET("/v1/payments", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	srv := httptest.NewServer(es)
	t.Cleanup(srv.Close)
	const tenant = "t-echo-routes"
	pay := e.payment(tenant)
	body := `{"amount": 70, "currency": "EUR", "to": "acc_1"}`
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/payments"},   // 405: the route has GET only
		{"POST", "/v1/payments/"},  // 404: a trailing slash is another route
		{"POST", "/v1/%70ayments"}, // 404: echo routes the escaped path
	} {
		got := send(t, srv, tc.method, tc.path, tenant, "k-echo-routes-000001", body)
		if got.status != http.StatusMethodNotAllowed && got.status != http.StatusNotFound {
			t.Errorf("%s %s: %s, want echo's 404 or 405", tc.method, tc.path, got)
		}
	}
	if n := e.records(); n != 0 {
		t.Errorf("%d idempotency records after requests echo did not route, want 0", n)
	}
	// echo hands c.Param the escaped value: "pay%5F..." is another payment than "pay_...", for
	// the handler and so for the fingerprint.
	escaped := strings.Replace(pay, "_", "%5F", 1)
	first := send(t, srv, "POST", "/v1/payments/"+escaped+"/refunds", tenant, "k-echo-routes-000002", `{"amount": 5}`)
	if first.status != http.StatusNotFound || !strings.Contains(first.body, escaped) {
		t.Fatalf("refund of %s: %s, want the handler's 404 for the escaped id", escaped, first)
	}
	if other := send(t, srv, "POST", "/v1/payments/"+pay+"/refunds", tenant, "k-echo-routes-000002", `{"amount": 5}`); other.status != http.StatusUnprocessableEntity {
		t.Errorf("same key, the unescaped id: %s, want 422 (another request)", other)
	}
}

// TestUnsentWritesAreDropped: an HTTPErrorHandler that does not check Committed writes again
// after the response was sent; the adapter drops that write, so the client gets what was
// stored.
func TestUnsentWritesAreDropped(t *testing.T) {
	e := newEnv(t)
	es := echo.New()
	es.HTTPErrorHandler = func(err error, c echo.Context) {
		_ = c.JSON(http.StatusTeapot, map[string]string{"careless": err.Error()})
	}
	es.Use(auth)
	es.POST("/v1/payments", e.createPayment, e.idem(idemecho.Options{}))
	srv := httptest.NewServer(es)
	t.Cleanup(srv.Close)
	body := `{"amount": 80, "currency": "EUR", "to": "acc_1"}`
	first := send(t, srv, "POST", "/v1/payments", "t-echo-careless", "k-echo-careless-00001", body, "X-Answer", "notfound")
	replay := send(t, srv, "POST", "/v1/payments", "t-echo-careless", "k-echo-careless-00001", body)
	if first.status != http.StatusTeapot || strings.Count(first.body, "careless") != 1 || replay.body != first.body || !replay.replayed() {
		t.Errorf("first %s, replay %s: want one rendering of the error, replayed as sent", first, replay)
	}
}

// TestUndeclaredQueryIsNotHandedOn: echo's form binder reads the query with the body, so an
// undeclared "?description=..." would fill a field the fingerprint does not cover; the handler
// gets the declared query parameters only (createCharge declares none).
func TestUndeclaredQueryIsNotHandedOn(t *testing.T) {
	e := newEnv(t)
	es := echo.New()
	es.Use(auth, e.idem(idemecho.Options{}))
	var got []string
	es.POST("/v1/charges", func(c echo.Context) error {
		var req struct {
			Amount      int64  `form:"amount"`
			Description string `form:"description"`
		}
		if err := c.Bind(&req); err != nil {
			return err
		}
		got = append(got, req.Description+"|"+c.QueryParam("description")+"|"+c.Request().URL.RawQuery)
		return c.JSON(http.StatusCreated, map[string]int64{"amount": req.Amount})
	})
	srv := httptest.NewServer(es)
	t.Cleanup(srv.Close)
	form := "amount=2500&currency=usd"
	first := send(t, srv, "POST", "/v1/charges?description=evil", "t-echo-query", "k-echo-query-000001", form, "Content-Type", "application/x-www-form-urlencoded")
	again := send(t, srv, "POST", "/v1/charges?description=other", "t-echo-query", "k-echo-query-000001", form, "Content-Type", "application/x-www-form-urlencoded")
	if first.status != http.StatusCreated || !again.replayed() || len(got) != 1 || got[0] != "||" {
		t.Errorf("first %s, again %s, the handler saw %q: want the description unseen and the retry replayed", first, again, got)
	}
}
