package idemhuma_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	idemhuma "github.com/idemgen/idemgen/adapters/huma"
	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/runtime"
)

const payment = `{"amount": 90, "currency": "EUR", "to": "acc_1"}`

// Each documented way to mount the middleware (for the whole API after the service's
// authentication, or in the operation's own Middlewares), also with the server under otelhttp,
// guards POST /v1/payments: a new key runs once and is replayed with its status, body and
// Location; 20 parallel duplicates of a new key make one payment; Huma's rendering of the
// handler's error (its error model) is stored and replayed; a plain error is Huma's 500 that
// frees the key; a missing key is refused before the handler runs; a request the service's own
// authentication refuses gets Huma's 401 and leaves no record.
func TestMountings(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		otel bool
		op   bool // the middleware in the operation's Middlewares, not the API's
	}{
		{"api", false, false},
		{"operation", false, true},
		{"api-otelhttp", true, false},
		{"operation-otelhttp", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux, a := newAPI()
			a.UseMiddleware(authenticate(a))
			if tc.op {
				huma.Register(a, createPaymentOp(e.idem()), e.createPayment)
			} else {
				a.UseMiddleware(e.idem())
				huma.Register(a, createPaymentOp(), e.createPayment)
			}
			var h http.Handler = mux
			if tc.otel {
				h = otelhttp.NewHandler(mux, "payments")
			}
			base := serve(t, h)
			tenant := "t-huma-" + tc.name
			e.calls.Store(0)

			first := send(t, base, "POST", "/v1/payments", tenant, "k-huma-first-"+tc.name, payment)
			again := send(t, base, "POST", "/v1/payments", tenant, "k-huma-first-"+tc.name, payment)
			if first.status != http.StatusCreated || first.header.Get("Location") == "" {
				t.Fatalf("first: %s", first)
			}
			if !again.replayed() || again.body != first.body || again.header.Get("Location") != first.header.Get("Location") || e.calls.Load() != 1 {
				t.Errorf("retry: %s after %d runs, want the replay", again, e.calls.Load())
			}

			statuses := parallel(t, 20, base, "/v1/payments", tenant, "k-huma-parallel-"+tc.name, payment)
			for _, s := range statuses {
				if s != "201 " && s != "409 in-flight" {
					t.Errorf("a parallel duplicate: %s, want 201 or 409 in-flight", s)
				}
			}
			if n := e.count("payments", tenant); n != 2 {
				t.Errorf("%d payments after the first key and 20 parallel duplicates, want 2", n)
			}

			before := e.calls.Load()
			decline := send(t, base, "POST", "/v1/payments", tenant, "k-huma-decline-"+tc.name, payment, "X-Answer", "decline")
			declineAgain := send(t, base, "POST", "/v1/payments", tenant, "k-huma-decline-"+tc.name, payment, "X-Answer", "decline")
			if decline.status != http.StatusPaymentRequired || decline.json["title"] != "Payment Required" || decline.header.Get("Content-Type") != "application/problem+json" ||
				!declineAgain.replayed() || declineAgain.body != decline.body || e.calls.Load() != before+1 {
				t.Errorf("decline: %s then %s, want Huma's 402 stored and replayed", decline, declineAgain)
			}

			before = e.calls.Load()
			for range 2 {
				if got := send(t, base, "POST", "/v1/payments", tenant, "k-huma-error-"+tc.name, payment, "X-Answer", "error"); got.status != http.StatusInternalServerError || got.replayed() {
					t.Errorf("error: %s, want 500, not stored", got)
				}
			}
			if e.calls.Load() != before+2 {
				t.Errorf("the failed request ran %d times for 2 attempts, want 2 (the key was released)", e.calls.Load()-before)
			}

			before = e.calls.Load()
			records := e.records()
			if got := send(t, base, "POST", "/v1/payments", tenant, "", payment); got.status != http.StatusBadRequest || got.problem() != "key-missing" {
				t.Errorf("no key: %s", got)
			}
			if got := send(t, base, "POST", "/v1/payments", "", "k-huma-no-tenant-"+tc.name, payment); got.status != http.StatusUnauthorized || got.json["title"] != "Unauthorized" || got.json["detail"] != "no bearer token" {
				t.Errorf("no tenant: %s, want the service's own 401 in Huma's error model", got)
			}
			if e.records() != records {
				t.Error("a refused request left a record")
			}
			if got := send(t, base, "POST", "/v1/payments", tenant, "k-huma-mismatch-"+tc.name, `{"amount": 91, "currency": "EUR", "to": "acc_1"}`); got.status != http.StatusCreated {
				t.Errorf("new key: %s", got)
			}
			if got := send(t, base, "POST", "/v1/payments", tenant, "k-huma-mismatch-"+tc.name, payment); got.status != http.StatusUnprocessableEntity {
				t.Errorf("same key, other body: %s, want 422", got)
			}
			if e.calls.Load() != before+1 {
				t.Errorf("refused requests ran the handler: %d runs, want 1", e.calls.Load()-before)
			}
		})
	}
}

// The path parameter the fingerprint covers is Huma's (ctx.Param): a refund of another payment
// with the same key is another request (422), and the handler's own 404 is stored.
func TestPathParameters(t *testing.T) {
	e := newEnv(t)
	mux, a := newAPI()
	a.UseMiddleware(authenticate(a), e.idem())
	huma.Register(a, huma.Operation{OperationID: "createRefund", Method: http.MethodPost, Path: "/v1/payments/{id}/refunds", DefaultStatus: http.StatusCreated,
		Extensions: map[string]any{idemhuma.Extension: true}}, func(ctx context.Context, in *struct {
		ID   string `path:"id"`
		Body struct {
			Amount int64 `json:"amount"`
		}
	}) (*struct{ Body map[string]any }, error) {
		e.calls.Add(1)
		if in.ID == "pay_unknown" {
			return nil, huma.Error404NotFound("no payment " + in.ID)
		}
		return &struct{ Body map[string]any }{map[string]any{"payment": in.ID}}, nil
	})
	base := serve(t, mux)
	const tenant = "t-huma-params"
	if got := send(t, base, "POST", "/v1/payments/pay_1/refunds", tenant, "k-huma-refund-0001", `{"amount": 1}`); got.status != http.StatusCreated || got.json["payment"] != "pay_1" {
		t.Fatalf("refund: %s", got)
	}
	if got := send(t, base, "POST", "/v1/payments/pay_2/refunds", tenant, "k-huma-refund-0001", `{"amount": 1}`); got.status != http.StatusUnprocessableEntity || got.problem() != "payload-mismatch" {
		t.Errorf("another payment, same key: %s, want 422", got)
	}
	for range 2 {
		if got := send(t, base, "POST", "/v1/payments/pay_unknown/refunds", tenant, "k-huma-refund-0404", `{"amount": 1}`); got.status != http.StatusNotFound {
			t.Errorf("unknown payment: %s", got)
		}
	}
	if n := e.calls.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2 (the 404 is replayed)", n)
	}
}

// An operation marked x-idempotent in Huma's code that the generated table does not have, or
// has under another method or path (the code changed, go generate did not run), is refused with
// Huma's 500 before the handler runs, and a log line says what to run; Check finds the same
// before any request. An unmarked operation runs untouched.
func TestStaleTable(t *testing.T) {
	e := newEnv(t)
	mux, a := newAPI()
	a.UseMiddleware(authenticate(a), e.idem())
	handler := func(ctx context.Context, in *struct{}) (*struct{ Body string }, error) {
		e.calls.Add(1)
		return &struct{ Body string }{"ran"}, nil
	}
	huma.Register(a, huma.Operation{OperationID: "createInvoice", Method: http.MethodPost, Path: "/v1/invoices", Extensions: map[string]any{idemhuma.Extension: true}}, handler)
	huma.Register(a, huma.Operation{OperationID: "createOrder", Method: http.MethodPut, Path: "/v1/orders", Extensions: map[string]any{idemhuma.Extension: true}}, handler)
	huma.Register(a, huma.Operation{OperationID: "listInvoices", Method: http.MethodPost, Path: "/v1/invoices/search"}, handler)
	base := serve(t, mux)
	for _, tc := range []struct{ method, path string }{{"POST", "/v1/invoices"}, {"PUT", "/v1/orders"}} {
		if got := send(t, base, tc.method, tc.path, "t-huma-stale", "k-huma-stale-00001", `{}`); got.status != http.StatusInternalServerError || got.json["title"] != "Internal Server Error" {
			t.Errorf("%s %s: %s, want Huma's 500", tc.method, tc.path, got)
		}
	}
	if n := e.calls.Load(); n != 0 {
		t.Errorf("the handler of a stale operation ran %d times", n)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "createInvoice is marked x-idempotent in the code but not in the generated operation table") ||
		!strings.Contains(logs, "createOrder is PUT /v1/orders in the code but POST /v1/orders") || !strings.Contains(logs, "go generate") {
		t.Errorf("logs: %s", logs)
	}
	if got := send(t, base, "POST", "/v1/invoices/search", "t-huma-stale", "", `{}`); got.status != http.StatusOK || e.calls.Load() != 1 {
		t.Errorf("an unmarked operation: %s", got)
	}
	err := idemhuma.Check(a, api.Routes())
	for _, want := range []string{"createInvoice (POST /v1/invoices) is marked x-idempotent in the API but not in the table", "createOrder is PUT /v1/orders in the API, POST /v1/orders in the table", "createPayment (POST /v1/payments) is in the table but not in the API"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check: %v, want it to say %q", err, want)
		}
	}
}

// MustNew panics with New's error, naming what is wrong, for a Config New refuses.
func TestMustNewPanicsOnNewsError(t *testing.T) {
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok || !strings.Contains(err.Error(), "idemhuma: runtime: Config.Store is nil") {
			t.Errorf("MustNew without a Store: recovered %v, want New's error", r)
		}
	}()
	idemhuma.MustNew[any](runtime.Config{}, api.Routes(), idemhuma.Options{})
	t.Error("MustNew without a Store returned")
}
