package chiexample

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	api "github.com/idemgen/idemgen/golden/conformance"
	nulls "github.com/idemgen/idemgen/golden/nulls"
	"github.com/idemgen/idemgen/internal/cases"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// env is a database with the conformance tables, a runtime over it, and a refunds handler of
// the team's own that counts how often it is entered.
type env struct {
	pool  *pgxpool.Pool
	rt    *runtime.Runtime
	calls atomic.Int64
	// entered and release hold a request that carries X-Hold inside the handler.
	entered, release chan struct{}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := conformancetest.NewEnv(t, 16, conformancetest.PGStore(pgstore.Options{}))
	rt, err := runtime.New(runtime.Config{Store: db.Store, Scope: conformance.TenantOf, Logger: db.Logger})
	if err != nil {
		t.Fatal(err)
	}
	return &env{pool: db.DB, rt: rt, entered: make(chan struct{}), release: make(chan struct{})}
}

// payment inserts a payment of tenant and returns its id.
func (e *env) payment(t *testing.T, tenant string) string {
	t.Helper()
	id := "pay_" + uuid.NewString()
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO payments (id, tenant, amount, currency, to_account) VALUES ($1, $2, 100, 'EUR', 'acc_1')`, id, tenant); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *env) refunds(t *testing.T, tenant string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM refunds WHERE tenant = $1`, tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// refund is POST /v1/payments/{payment_id}/refunds as a chi service writes it without idemgen's
// types: it reads its own body and path parameter and writes its own response; only its
// transaction comes from the middleware.
func (e *env) refund(w http.ResponseWriter, r *http.Request) {
	e.calls.Add(1)
	if r.Header.Get("X-Hold") != "" {
		e.entered <- struct{}{}
		<-e.release
	}
	var body struct {
		Amount int64 `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "the service's own 400: "+err.Error(), http.StatusBadRequest)
		return
	}
	tx, ok := runtime.TxFrom[pgstore.DBTX](r.Context())
	if !ok {
		http.Error(w, "no idempotency transaction", http.StatusInternalServerError)
		return
	}
	tenant, _ := conformance.TenantOf(r)
	id, paymentID := "re_"+uuid.NewString(), chi.URLParam(r, "payment_id")
	if _, err := tx.Exec(r.Context(), `INSERT INTO refunds (id, tenant, payment_id, amount) VALUES ($1, $2, $3, $4)`, id, tenant, paymentID, body.Amount); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]any{"id": id, "payment_id": paymentID, "amount": body.Amount, "pattern": r.Pattern})
}

// getPayment is the unmarked GET: the middleware lets it through without a transaction.
func (e *env) getPayment(w http.ResponseWriter, r *http.Request) {
	if _, ok := runtime.TxFrom[pgstore.DBTX](r.Context()); ok {
		http.Error(w, "an unmarked operation got a transaction", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// TestMiddlewareOnChi puts runtime.Middleware in front of the refunds handler above, mounted on
// chi in each way a chi service mounts middleware, and checks the contract through each: the
// generated decoder before the key, one execution per key, replay, 422 for the same key on
// another payment (the path parameter is part of the request), 409 for a concurrent duplicate
// that never reaches the handler, and unmarked routes untouched.
func TestMiddlewareOnChi(t *testing.T) {
	const path = "/v1/payments/{payment_id}/refunds"
	for _, tc := range []struct {
		name   string
		prefix string
		// mount builds the router with the middleware mw, or with the options it needs.
		mount func(e *env, mw func(*runtime.Runtime, runtime.MiddlewareOptions) func(http.Handler) http.Handler) http.Handler
	}{
		{
			// Inline middleware runs after chi has routed: Request.Pattern is chi's pattern,
			// without a method ("/v1/payments/{payment_id}/refunds"), and names the operation.
			name: "With",
			mount: func(e *env, mw func(*runtime.Runtime, runtime.MiddlewareOptions) func(http.Handler) http.Handler) http.Handler {
				r := chi.NewRouter()
				r.With(mw(e.rt, runtime.MiddlewareOptions{})).Post(path, e.refund)
				r.With(mw(e.rt, runtime.MiddlewareOptions{})).Get("/v1/payments/{payment_id}", e.getPayment)
				return r
			},
		},
		{
			// A group's middleware is inline too.
			name: "Group",
			mount: func(e *env, mw func(*runtime.Runtime, runtime.MiddlewareOptions) func(http.Handler) http.Handler) http.Handler {
				r := chi.NewRouter()
				r.Group(func(r chi.Router) {
					r.Use(mw(e.rt, runtime.MiddlewareOptions{}))
					r.Post(path, e.refund)
					r.Get("/v1/payments/{payment_id}", e.getPayment)
				})
				return r
			},
		},
		{
			// Router-level middleware runs before chi routes (no pattern yet): the middleware
			// matches method and path against the operations' path templates.
			name: "Use",
			mount: func(e *env, mw func(*runtime.Runtime, runtime.MiddlewareOptions) func(http.Handler) http.Handler) http.Handler {
				r := chi.NewRouter()
				r.Use(mw(e.rt, runtime.MiddlewareOptions{}))
				r.Post(path, e.refund)
				r.Get("/v1/payments/{payment_id}", e.getPayment)
				return r
			},
		},
		{
			// chi's regexp parameters: the pattern is not the spec's template, the path still
			// matches it.
			name: "With-regexp-parameter",
			mount: func(e *env, mw func(*runtime.Runtime, runtime.MiddlewareOptions) func(http.Handler) http.Handler) http.Handler {
				r := chi.NewRouter()
				r.With(mw(e.rt, runtime.MiddlewareOptions{})).Post("/v1/payments/{payment_id:pay_[0-9a-f-]+}/refunds", e.refund)
				r.Get("/v1/payments/{payment_id}", e.getPayment)
				return r
			},
		},
		{
			// Under a prefix neither the pattern nor the path is the spec's, so the service
			// tells the middleware the operation (MiddlewareOptions.Match) from chi's own
			// route pattern, without the prefix.
			name:   "sub-router-under-a-prefix-with-Match",
			prefix: "/api",
			mount: func(e *env, mw func(*runtime.Runtime, runtime.MiddlewareOptions) func(http.Handler) http.Handler) http.Handler {
				ops := map[string]string{}
				for _, op := range api.Operations() {
					ops[op.Method+" "+op.Path] = op.ID
				}
				match := func(r *http.Request) (string, bool) {
					pattern := strings.TrimPrefix(chi.RouteContext(r.Context()).RoutePattern(), "/api")
					id, ok := ops[r.Method+" "+pattern]
					return id, ok
				}
				r := chi.NewRouter()
				r.Route("/api", func(r chi.Router) {
					r.With(mw(e.rt, runtime.MiddlewareOptions{Match: match})).Post(path, e.refund)
					r.With(mw(e.rt, runtime.MiddlewareOptions{Match: match})).Get("/v1/payments/{payment_id}", e.getPayment)
				})
				return r
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			mw := func(rt *runtime.Runtime, opts runtime.MiddlewareOptions) func(http.Handler) http.Handler {
				m, err := runtime.Middleware[pgstore.DBTX](rt, api.Routes(), opts)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			srv := httptest.NewServer(tc.mount(e, mw))
			t.Cleanup(srv.Close)
			const tenant = "t-chi"
			payA, payB := e.payment(t, tenant), e.payment(t, tenant)
			post := func(paymentID, key, body string, header ...string) *response {
				return send(t, srv, "POST", tc.prefix+"/v1/payments/"+paymentID+"/refunds", tenant, key, body, header...)
			}

			first := post(payA, "k-chi-refund-00000001", `{"amount": 10}`)
			if first.status != http.StatusCreated || first.json["payment_id"] != payA || first.header.Get(runtime.HeaderReplayed) != "" {
				t.Fatalf("first: %s", first)
			}
			if (tc.name == "With" || tc.name == "Group") && first.json["pattern"] != path {
				t.Errorf("chi's Request.Pattern in the handler: %v, want %q", first.json["pattern"], path)
			}
			again := post(payA, "k-chi-refund-00000001", `{ "amount" : 10 }`)
			if again.status != http.StatusCreated || again.body != first.body || again.header.Get(runtime.HeaderReplayed) != "true" {
				t.Errorf("retry: %s, want the replay of %s", again, first)
			}
			if other := post(payB, "k-chi-refund-00000001", `{"amount": 10}`); other.status != http.StatusUnprocessableEntity || !strings.HasSuffix(fmt.Sprint(other.json["type"]), runtime.ProblemPayloadMismatch) {
				t.Errorf("same key, other payment: %s, want 422 payload-mismatch", other)
			}
			// The generated decoder refuses a body the schema does not allow before any key
			// lookup: the handler never sees it and nothing is stored, so the corrected retry
			// with the same key runs.
			if bad := post(payA, "k-chi-refund-00000002", `{"amount": "ten"}`); bad.status != http.StatusBadRequest || !strings.HasSuffix(fmt.Sprint(bad.json["type"]), runtime.ProblemBodyInvalid) {
				t.Errorf("bad body: %s, want 400 body-invalid", bad)
			}
			if fixed := post(payA, "k-chi-refund-00000002", `{"amount": 20}`); fixed.status != http.StatusCreated || fixed.header.Get(runtime.HeaderReplayed) != "" {
				t.Errorf("corrected retry: %s, want 201", fixed)
			}

			// A duplicate while the first is inside the handler: 409, and the handler is not
			// entered a second time.
			done := make(chan *response)
			go func() { done <- post(payA, "k-chi-refund-00000003", `{"amount": 30}`, "X-Hold", "1") }()
			select {
			case <-e.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the first request never reached the handler")
			}
			dup := post(payA, "k-chi-refund-00000003", `{"amount": 30}`, "X-Hold", "1")
			close(e.release)
			if dup.status != http.StatusConflict || !strings.HasSuffix(fmt.Sprint(dup.json["type"]), runtime.ProblemInFlight) || dup.header.Get("Retry-After") == "" {
				t.Errorf("duplicate: %s, want 409 in-flight with Retry-After", dup)
			}
			if held := <-done; held.status != http.StatusCreated {
				t.Errorf("held first request: %s", held)
			}

			if get := send(t, srv, "GET", tc.prefix+"/v1/payments/"+payA, tenant, "k-chi-refund-00000001", ""); get.status != http.StatusOK || get.header.Get(runtime.HeaderReplayed) != "" {
				t.Errorf("unmarked GET: %s", get)
			}
			if n := e.calls.Load(); n != 3 {
				t.Errorf("the handler was entered %d times, want 3 (one per key)", n)
			}
			if n := e.refunds(t, tenant); n != 3 {
				t.Errorf("%d refunds written, want 3", n)
			}
		})
	}
}

// TestOneOperationByHand mounts one generated handler by hand with chi's Method, in a
// sub-router under a prefix and with a regexp path parameter: the handler gets payment_id in
// its typed parameters, and the path stays part of the fingerprint, because the runtime finds
// the parameters by the operation's path template rather than by the router's pattern.
func TestOneOperationByHand(t *testing.T) {
	e := newEnv(t)
	var got []string
	fn := func(ctx context.Context, tx pgstore.DBTX, p api.CreateRefundParams, b api.CreateRefundBody) (runtime.Response, error) {
		got = append(got, p.PaymentID)
		id := "re_" + uuid.NewString()
		if _, err := tx.Exec(ctx, `INSERT INTO refunds (id, tenant, payment_id, amount) VALUES ($1, 't-hand', $2, $3)`, id, p.PaymentID, b.Amount); err != nil {
			return runtime.Response{}, err
		}
		body, _ := json.Marshal(map[string]any{"id": id, "payment_id": p.PaymentID, "amount": b.Amount})
		return runtime.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, nil
	}
	r := chi.NewRouter()
	r.Route("/api/v1", func(r chi.Router) {
		r.Method(http.MethodPost, "/payments/{payment_id:pay_[0-9a-f-]+}/refunds", api.CreateRefundHandler(e.rt, fn))
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	payA, payB := e.payment(t, "t-hand"), e.payment(t, "t-hand")
	post := func(paymentID string) *response {
		return send(t, srv, "POST", "/api/v1/payments/"+paymentID+"/refunds", "t-hand", "k-by-hand-000000001", `{"amount": 5}`)
	}
	first := post(payA)
	if first.status != http.StatusCreated || first.json["payment_id"] != payA {
		t.Fatalf("first: %s", first)
	}
	if again := post(payA); again.body != first.body || again.header.Get(runtime.HeaderReplayed) != "true" {
		t.Errorf("retry: %s, want the replay of %s", again, first)
	}
	if other := post(payB); other.status != http.StatusUnprocessableEntity {
		t.Errorf("same key, other payment: %s, want 422", other)
	}
	if notRouted := post("not-a-payment-id"); notRouted.status != http.StatusNotFound {
		t.Errorf("a path chi's regexp refuses: %s, want chi's 404", notRouted)
	}
	if len(got) != 1 || got[0] != payA {
		t.Errorf("the handler ran for %v, want once for %s", got, payA)
	}
}

type response struct {
	status int
	header http.Header
	body   string
	json   map[string]any
}

func (r *response) String() string { return fmt.Sprintf("%d %v %s", r.status, r.header, r.body) }

func send(t *testing.T, srv *httptest.Server, method, path, tenant, key, body string, header ...string) *response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tenant)
	req.Header.Set("Idempotency-Key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := &response{status: resp.StatusCode, header: resp.Header, body: string(b)}
	_ = json.Unmarshal(b, &out.json)
	return out
}

// TestNullsBehindMiddleware runs testdata/cases-nulls against the tips API on chi behind
// runtime.Middleware, with encoding/json handlers of the team's own (conformance.TipsHTTP): the
// handler reads the body the middleware fingerprinted, in which a null member stays null, so
// {"note": null} and {} are two requests and a merge patch clears the note once.
func TestNullsBehindMiddleware(t *testing.T) {
	db := conformancetest.NewEnv(t, 16, conformancetest.PGStore(pgstore.Options{}))
	rt, err := runtime.New(runtime.Config{Store: db.Store, Scope: conformance.TenantOf, Logger: db.Logger})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := runtime.Middleware[pgstore.DBTX](rt, nulls.Routes(), runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	create, update := conformance.TipsHTTP()
	r := chi.NewRouter()
	r.Use(conformance.WithKnobs)
	r.With(mw).Post("/v1/tips", create.ServeHTTP)
	r.With(mw).Patch("/v1/tips/{tip_id}", update.ServeHTTP)
	r.Get("/v1/tips/{tip_id}", conformance.GetTip(db.DB).ServeHTTP)
	r.Get("/_effects", conformance.Effects(db.DB, db.Provider))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	list, err := cases.LoadDir("../../testdata/cases-nulls")
	if err != nil || len(list) == 0 {
		t.Fatalf("testdata/cases-nulls: %d cases, %v", len(list), err)
	}
	runner := &cases.Runner{BaseURL: srv.URL, Client: srv.Client()}
	for _, c := range list {
		t.Run(c.Name, func(t *testing.T) {
			if err := runner.Run(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		})
	}
}
