package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// existingServer is a service that already exists: plain net/http handlers on a ServeMux that
// read their own body and write their own response. Marked operations write through the
// transaction they take from the context.
func (e *memEnv) existingServer(t *testing.T, calls *int) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/payments", func(w http.ResponseWriter, r *http.Request) {
		*calls++
		var body struct{ Amount int64 }
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, "the service's own 400", http.StatusBadRequest)
			return
		}
		db, ok := TxFrom[*memstore.DB](r.Context())
		if !ok {
			t.Error("no transaction in the handler's context")
			return
		}
		tenant, _ := bearerScope(r)
		id := e.pay(db, &payReq{Amount: body.Amount, Tenant: tenant})
		e.hold(&payReq{Header: r.Header})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/v1/payments/%d", id))
		w.Header().Set("Set-Cookie", "session=secret")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"amount":%d}`, id, body.Amount)
	})
	mux.HandleFunc("GET /v1/payments/{id}", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := TxFrom[*memstore.DB](r.Context()); ok {
			t.Error("an unmarked operation got a transaction")
		}
		w.WriteHeader(http.StatusOK)
	})
	mw, err := Middleware[*memstore.DB](e.rt, []Route{NewRoute(payOp(), decodePay)}, MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mw(mux)
}

// The middleware gives an existing handler the contract of a generated one: the decoder before
// the key, one execution per key, replays with the stored headers, 422, 409 without reaching
// the handler, and unmarked operations untouched.
func TestMiddlewareOnAnExistingServer(t *testing.T) {
	e := newMemEnv(t, nil)
	calls := 0
	h := e.existingServer(t, &calls)

	first := serveReq(h, req("t1", key1, body100))
	if first.Code != 201 || first.Header().Get("Location") == "" || first.Header().Get("Set-Cookie") == "" {
		t.Fatalf("first: %d %v %s", first.Code, first.Header(), first.Body)
	}
	replay := serveReq(h, req("t1", key1, body100))
	if replay.Code != 201 || replay.Body.String() != first.Body.String() || replay.Header().Get(HeaderReplayed) != "true" ||
		replay.Header().Get("Location") != first.Header().Get("Location") || replay.Header().Get("Set-Cookie") != "" {
		t.Errorf("replay: %d %v %s", replay.Code, replay.Header(), replay.Body)
	}
	if w := serveReq(h, req("t1", key1, `{"amount":5}`)); w.Code != 422 || problemType(t, w) != ProblemPayloadMismatch {
		t.Errorf("other body: %d %s", w.Code, w.Body)
	}
	// The generated decoder refuses a malformed body before any key lookup: the service never
	// sees it and nothing is stored, so the corrected retry with the same key runs.
	if w := serveReq(h, req("t1", "k-test-0009-cccccccccccc", `{"amount":-1}`)); w.Code != 400 || problemType(t, w) != ProblemBodyInvalid {
		t.Errorf("bad body: %d %s", w.Code, w.Body)
	}
	if w := serveReq(h, req("t1", "k-test-0009-cccccccccccc", `{"amount":9}`)); w.Code != 201 {
		t.Errorf("corrected retry: %d %s", w.Code, w.Body)
	}
	if w := serveReq(h, req("t1", "", body100)); w.Code != 400 || problemType(t, w) != ProblemKeyMissing {
		t.Errorf("no key: %d", w.Code)
	}
	if calls != 2 || e.payments("t1") != 2 {
		t.Errorf("handler ran %d times, %d payments; want 2 and 2", calls, e.payments("t1"))
	}
	get := httptestRequest("GET", "/v1/payments/1")
	if w := serveReq(h, get); w.Code != 200 {
		t.Errorf("unmarked operation: %d", w.Code)
	}
}

// A concurrent duplicate is answered 409 while the first request is in its handler, and never
// reaches the wrapped handler.
func TestMiddlewareDuplicateNeverReachesTheHandler(t *testing.T) {
	e := newMemEnv(t, nil)
	calls := 0
	h := e.existingServer(t, &calls)
	g := e.gate("first")
	done := make(chan int)
	go func() { done <- serveReq(h, req("t1", key1, body100, "X-Hold", "first")).Code }()
	g.wait(t)
	if w := serveReq(h, req("t1", key1, body100)); w.Code != 409 || problemType(t, w) != ProblemInFlight {
		t.Errorf("duplicate: %d %s", w.Code, w.Body)
	}
	g.open()
	select {
	case code := <-done:
		if code != 201 {
			t.Fatalf("first: %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("first request did not finish")
	}
	if calls != 1 {
		t.Errorf("the handler ran %d times, want 1", calls)
	}
}

// Routes that cannot be served are errors, not panics; a matcher decides for routers the
// middleware cannot see into.
func TestMiddlewareConfiguration(t *testing.T) {
	e := newMemEnv(t, nil)
	if _, err := Middleware[*memstore.DB](e.rt, []Route{NewRoute(payOp(), decodePay), NewRoute(payOp(), decodePay)}, MiddlewareOptions{}); err == nil {
		t.Error("an operation listed twice was accepted")
	}
	if _, err := Middleware[*otherDB](e.rt, []Route{NewRoute(payOp(), decodePay)}, MiddlewareOptions{}); err == nil {
		t.Error("a store that cannot run the handler's DB was accepted")
	}
	if _, err := Middleware[*memstore.DB](nil, nil, MiddlewareOptions{}); err == nil {
		t.Error("a nil runtime was accepted")
	}
	seen := false
	mw, err := Middleware[*memstore.DB](e.rt, []Route{NewRoute(payOp(), decodePay)}, MiddlewareOptions{
		Match: func(r *http.Request) (string, bool) { return "createPayment", r.URL.Path == "/rpc/pay" },
	})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, seen = TxFrom[*memstore.DB](r.Context())
		w.WriteHeader(http.StatusAccepted)
	}))
	r := req("t1", key1, body100)
	r.URL.Path = "/rpc/pay"
	if w := serveReq(h, r); w.Code != 202 || !seen {
		t.Errorf("matched request: %d, transaction %v", w.Code, seen)
	}
}

func httptestRequest(method, target string) *http.Request {
	r, _ := http.NewRequest(method, target, nil)
	return r
}

// Mounted under a prefix, the middleware still finds the operation: by Prefix for the path, by
// the end of a router's pattern (chi's pattern of a mounted sub-router); without either, a
// request to an unknown path passes through.
func TestMiddlewareUnderAPrefix(t *testing.T) {
	e := newMemEnv(t, nil)
	ran := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := TxFrom[*memstore.DB](r.Context()); ok {
			ran++
		}
		w.WriteHeader(http.StatusCreated)
	})
	withPrefix, err := Middleware[*memstore.DB](e.rt, []Route{NewRoute(payOp(), decodePay)}, MiddlewareOptions{Prefix: "/api/"})
	if err != nil {
		t.Fatal(err)
	}
	r := req("t1", key1, body100)
	r.URL.Path = "/api/v1/payments"
	if w := serveReq(withPrefix(next), r); w.Code != 201 || ran != 1 {
		t.Errorf("prefix: %d, guarded runs %d", w.Code, ran)
	}
	r = req("t1", key1, body100)
	r.URL.Path = "/elsewhere/v1/payments"
	if w := serveReq(withPrefix(next), r); w.Code != 201 || ran != 1 {
		t.Errorf("outside the prefix: %d, guarded runs %d (want it left alone)", w.Code, ran)
	}
	plain, err := Middleware[*memstore.DB](e.rt, []Route{NewRoute(payOp(), decodePay)}, MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r = req("t1", "k-test-0003-dddddddddddd", body100)
	r.URL.Path = "/api/v1/payments"
	r.Pattern = "/api/v1/payments" // what chi sets for a route of a sub-router mounted at /api
	if w := serveReq(plain(next), r); w.Code != 201 || ran != 2 {
		t.Errorf("sub-router pattern: %d, guarded runs %d", w.Code, ran)
	}
}

// A lease-mode handler behind the middleware defers its rows with OnComplete: they commit with
// the stored response when it is final and roll back when it is not.
func TestMiddlewareLeaseOnComplete(t *testing.T) {
	e := newMemEnv(t, nil)
	mw, err := Middleware[*memstore.DB](e.rt, []Route{NewRoute(leaseOp(), decodePay)}, MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := LeaseFrom(r.Context())
		if l == nil {
			t.Error("no lease in the handler's context")
			return
		}
		pk, err := l.ProviderKey(r.Context(), "charge")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		e.charge(pk)
		OnComplete(r.Context(), func(ctx context.Context, db *memstore.DB) error {
			e.pay(db, &payReq{Amount: 1, Tenant: "t1"})
			return nil
		})
		if r.Header.Get("X-Fail") != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	if w := serveReq(h, req("t1", "k-test-0004-eeeeeeeeeeee", body100, "X-Fail", "503")); w.Code != 503 {
		t.Fatalf("failing attempt: %d", w.Code)
	}
	if e.payments("t1") != 0 {
		t.Fatalf("a non-final answer kept its deferred rows")
	}
	if w := serveReq(h, req("t1", "k-test-0004-eeeeeeeeeeee", body100)); w.Code != 201 || e.payments("t1") != 1 || e.charges() != 1 {
		t.Fatalf("retry: %d, payments %d, charges %d", w.Code, e.payments("t1"), e.charges())
	}
	if OnComplete(context.Background(), func(context.Context, *memstore.DB) error { return nil }) {
		t.Error("OnComplete outside a request reported success")
	}
}

// opHandler stands for an operation's handler in a router, so a test can ask the router which
// operation it would dispatch a request to.
type opHandler string

func (opHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

// The middleware in front of http.ServeMux claims exactly the requests ServeMux routes to a
// marked operation: the same percent-decoding of segments ("/v1/%70ayments"), "%2F" inside one
// segment, no trailing slash, letter case or ';' of its own, unclean paths redirected rather
// than routed, and a method override header ignored, as ServeMux ignores it. The only requests
// it claims beyond ServeMux's are those chi routes (unclean paths with an empty parameter):
// the router then answers something else, which verify keeps from being stored.
func TestMiddlewareClaimsWhatServeMuxRoutes(t *testing.T) {
	refundOp := &Operation{ID: "createRefund", Method: "POST", Path: "/v1/payments/{payment_id}/refunds",
		Key: KeyRule{Header: "Idempotency-Key", Required: true}}
	recordingOp := &Operation{ID: "updateRecording", Method: "POST", Path: "/Accounts/{AccountSid}/Recordings/{Sid}.{Format}",
		Key: KeyRule{Header: "Idempotency-Key", Required: true}}
	table, err := newRouteTable([]Route{NewRoute(payOp(), decodePay), NewRoute(refundOp, decodePay), NewRoute(recordingOp, decodePay)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", opHandler("createPayment"))
	mux.Handle("POST /v1/payments/{payment_id}/refunds", opHandler("createRefund"))
	mux.Handle("POST /Accounts/{AccountSid}/Recordings/{seg3}", opHandler("updateRecording")) // as idemgen registers it
	mux.Handle("GET /v1/payments/{id}", opHandler("getPayment"))
	recording := gen.ParseTemplate(recordingOp.Path)
	chiOnly := map[string]bool{"/v1/payments//refunds": true, "/v1/payments/./refunds": true}
	for _, tt := range []struct {
		method, path string
		header       []string
		want         string // the operation the middleware claims the request for
	}{
		{"POST", "/v1/payments", nil, "createPayment"},
		{"POST", "/v1/%70ayments", nil, "createPayment"},
		{"POST", "/v1/pay%6Dents", nil, "createPayment"},
		{"POST", "/v1/payments?x=1", nil, "createPayment"},
		{"POST", "/v1/payments/", nil, ""},
		{"POST", "/v1/payments%2F", nil, ""},
		{"POST", "/v1%2Fpayments", nil, ""},
		{"POST", "//v1/payments", nil, ""},
		{"POST", "/v1//payments", nil, ""},
		{"POST", "/v1/./payments", nil, ""},
		{"POST", "/v1/x/../payments", nil, ""},
		{"POST", "/V1/payments", nil, ""},
		{"POST", "/v1/Payments", nil, ""},
		{"POST", "/v1/payments;x", nil, ""},
		{"POST", "/v1/payments;", nil, ""},
		{"PUT", "/v1/payments", nil, ""},
		{"GET", "/v1/payments", []string{"X-HTTP-Method-Override", "POST"}, ""},
		{"POST", "/v1/payments", []string{"X-HTTP-Method-Override", "DELETE"}, "createPayment"},
		{"POST", "/v1/payments", []string{"X-Method-Override", "PUT"}, "createPayment"},
		{"POST", "/v1/payments/pay_1/refunds", nil, "createRefund"},
		{"POST", "/v1/payments/a%2Fb/refunds", nil, "createRefund"},
		{"POST", "/v1/payments/%2E/refunds", nil, "createRefund"},
		{"POST", "/v1/payments/pay_1/refunds/", nil, ""},
		{"POST", "/v1/payments//refunds", nil, "createRefund"},  // chi routes it with an empty id
		{"POST", "/v1/payments/./refunds", nil, "createRefund"}, // chi routes it with id "."
		{"POST", "/v1/payments/pay_1/../refunds", nil, ""},
		{"POST", "/Accounts/AC1/Recordings/RE1.mp3", nil, "updateRecording"},
		{"POST", "/Accounts/AC1/Recordings/RE1%2Emp3", nil, "updateRecording"},
		{"POST", "/Accounts/AC1/Recordings/RE1", nil, ""}, // the wrapper answers 404
	} {
		r := httptestRequest(tt.method, "http://api.test"+tt.path)
		for i := 0; i+1 < len(tt.header); i += 2 {
			r.Header.Set(tt.header[i], tt.header[i+1])
		}
		got := ""
		if route, how := table.find(r, MiddlewareOptions{}); route != nil {
			got = route.Operation.ID
			if how != foundByPath {
				t.Errorf("%s %s: found %v, want by path", tt.method, tt.path, how)
			}
		}
		if got != tt.want {
			t.Errorf("%s %s: claimed for %q, want %q", tt.method, tt.path, got, tt.want)
		}
		h, _ := mux.Handler(r)
		routed, _ := h.(opHandler)
		switch {
		case routed == "getPayment":
			routed = ""
		case routed == "updateRecording" && !recording.Match(gen.DecodeSegments(gen.SplitPath(r.URL.EscapedPath())), false):
			// ServeMux cannot express "{Sid}.{Format}": the route's handler checks the literal
			// text (a generated wrapper answers 404), and the middleware leaves it to the router.
			routed = ""
		}
		switch {
		case routed != "" && string(routed) != got:
			t.Errorf("%s %s: ServeMux routes it to %s, the middleware claims it for %q", tt.method, tt.path, routed, got)
		case routed == "" && got != "" && !chiOnly[tt.path]:
			t.Errorf("%s %s: claimed for %s, which ServeMux does not route it to", tt.method, tt.path, got)
		}
	}
}

// middlewareAround wraps h in the middleware for payOp (and leaseOp when lease is set).
func (e *memEnv) middlewareAround(t *testing.T, h http.Handler, lease bool) http.Handler {
	t.Helper()
	op := payOp()
	if lease {
		op = leaseOp()
	}
	mw, err := Middleware[*memstore.DB](e.rt, []Route{NewRoute(op, decodePay)}, MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mw(h)
}

// A handler that returns without writing anything has no answer to store (echo.WrapMiddleware
// renders a returned error only after the chain): its writes roll back, the key is released, the
// client gets the 500 internal problem and the log says why. An explicit WriteHeader with an
// empty body is an answer, stored and replayed.
func TestMiddlewareNothingWritten(t *testing.T) {
	for _, lease := range []bool{false, true} {
		t.Run(map[bool]string{false: "atomic", true: "lease"}[lease], func(t *testing.T) {
			e := newMemEnv(t, nil)
			calls := 0
			h := e.middlewareAround(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				if db, ok := TxFrom[*memstore.DB](r.Context()); ok {
					e.pay(db, &payReq{Amount: 1, Tenant: "t1"})
				}
				if l := LeaseFrom(r.Context()); l != nil {
					OnComplete(r.Context(), func(ctx context.Context, db *memstore.DB) error {
						e.pay(db, &payReq{Amount: 1, Tenant: "t1"})
						return nil
					})
				}
				w.Header().Set("X-Only-A-Header", "1") // headers alone are not an answer
				if r.Header.Get("X-Answer") != "" {
					w.WriteHeader(http.StatusNoContent)
				}
			}), lease)
			for i := range 2 {
				w := serveReq(h, req("t1", key1, body100))
				if w.Code != 500 || problemType(t, w) != ProblemInternal || w.Header().Get("X-Only-A-Header") != "" {
					t.Fatalf("attempt %d: %d %v %s, want the 500 internal problem", i, w.Code, w.Header(), w.Body)
				}
			}
			if calls != 2 || e.payments("t1") != 0 {
				t.Errorf("handler ran %d times (want 2: the key was released), %d payments kept (want 0)", calls, e.payments("t1"))
			}
			if _, found := e.record("t1", key1); found {
				t.Error("a record was kept for a request that was not answered")
			}
			if !strings.Contains(e.logs.String(), "wrote no response") {
				t.Errorf("the log does not say the handler wrote no response:\n%s", e.logs)
			}
			const k = "k-test-0002-bbbbbbbbbbbb"
			first := serveReq(h, req("t1", k, body100, "X-Answer", "1"))
			again := serveReq(h, req("t1", k, body100, "X-Answer", "1"))
			if first.Code != 204 || again.Code != 204 || again.Header().Get(HeaderReplayed) != "true" || calls != 3 || e.payments("t1") != 1 {
				t.Errorf("empty 204: %d then %d (replayed %q), handler ran %d times, %d payments", first.Code, again.Code,
					again.Header().Get(HeaderReplayed), calls, e.payments("t1"))
			}
		})
	}
}

// The recorder keeps the final status, not an informational one sent before it.
func TestMiddlewareInformationalStatus(t *testing.T) {
	e := newMemEnv(t, nil)
	h := e.middlewareAround(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		TxFrom[*memstore.DB](r.Context())
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusCreated)
	}), false)
	if w := serveReq(h, req("t1", key1, body100)); w.Code != 201 {
		t.Fatalf("status %d, want 201", w.Code)
	}
	if rec, _ := e.record("t1", key1); rec.Response.Status != 201 {
		t.Errorf("stored status %d, want 201", rec.Response.Status)
	}
}

// In front of the router, the middleware stores only what the operation's handler answered:
// the router's own 404 or redirect, an inner middleware's refusal and another route's answer
// are delivered as they are, never stored, and the key stays free for the request that does
// reach the handler. The handler's answer is stored when the router names its route
// (Request.Pattern) or when it takes its transaction.
func TestMiddlewareStoresOnlyTheHandlersAnswer(t *testing.T) {
	e := newMemEnv(t, nil)
	refundOp := &Operation{ID: "createRefund", Method: "POST", Path: "/v1/payments/{payment_id}/refunds",
		Key: KeyRule{Header: "Idempotency-Key", Required: true}, MediaTypes: []string{"application/json"}}
	handled := map[string]int{}
	handler := func(name string, status int, takeTx bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			handled[name]++
			if takeTx {
				if db, ok := TxFrom[*memstore.DB](r.Context()); ok {
					e.pay(db, &payReq{Amount: 1, Tenant: "t1"})
				}
			}
			w.WriteHeader(status)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", handler("createPayment", 201, true))
	mux.Handle("POST /v1/payments/{id}/refunds", handler("createRefund", 402, false)) // a decline, no write
	mux.Handle("DELETE /v1/payments", handler("deletePayments", 204, false))
	// An override middleware that rewrites the method in place (as gorilla/handlers does), and
	// an authentication middleware that answers on its own, both between the idempotency
	// middleware and the router.
	override := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if m := r.Header.Get("X-HTTP-Method-Override"); m != "" {
				r.Method = m
			}
			next.ServeHTTP(w, r)
		})
	}
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Session") == "expired" {
				http.Error(w, "session expired", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mw, err := Middleware[*memstore.DB](e.rt, []Route{NewRoute(payOp(), decodePay), NewRoute(refundOp, decodePay)}, MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(auth(override(mux)))
	refund := func(key, path string) *http.Request {
		r := req("t1", key, body100)
		r.URL.Path = path
		return r
	}
	// chi routes "/v1/payments//refunds" (an empty id): ServeMux redirects it.
	const k2 = "k-test-0002-bbbbbbbbbbbb"
	if w := serveReq(h, refund(k2, "/v1/payments//refunds")); w.Code != http.StatusTemporaryRedirect {
		t.Fatalf("unclean path: %d, want ServeMux's redirect", w.Code)
	}
	if _, found := e.record("t1", k2); found {
		t.Error("the router's redirect was stored")
	}
	if w := serveReq(h, req("t1", key1, body100, "X-Session", "expired")); w.Code != 401 {
		t.Fatalf("expired session: %d", w.Code)
	}
	if w := serveReq(h, req("t1", key1, body100, "X-HTTP-Method-Override", "DELETE")); w.Code != 204 || handled["deletePayments"] != 1 {
		t.Fatalf("override: %d, delete handler ran %d times", w.Code, handled["deletePayments"])
	}
	if _, found := e.record("t1", key1); found {
		t.Fatal("an answer the operation's handler did not produce was stored")
	}
	// The request that reaches the handler runs, and only its answer is replayed.
	if w := serveReq(h, req("t1", key1, body100)); w.Code != 201 || handled["createPayment"] != 1 {
		t.Fatalf("first request to reach the handler: %d, ran %d times", w.Code, handled["createPayment"])
	}
	if w := serveReq(h, req("t1", key1, body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "true" || handled["createPayment"] != 1 {
		t.Errorf("retry: %d replayed %q, handler ran %d times", w.Code, w.Header().Get(HeaderReplayed), handled["createPayment"])
	}
	// A decline written without the transaction is stored: ServeMux named the route.
	for range 2 {
		serveReq(h, refund("k-test-0003-cccccccccccc", "/v1/payments/pay_1/refunds"))
	}
	if handled["createRefund"] != 1 {
		t.Errorf("the stored decline ran %d times, want 1", handled["createRefund"])
	}
	if !strings.Contains(e.logs.String(), "not produced by the operation's handler") {
		t.Errorf("the log does not say a response was not the handler's:\n%s", e.logs)
	}
}

// Behind a middleware that hands the router a copy of the request (r.WithContext), the
// router's Request.Pattern is out of sight: a handler that takes its transaction still has its
// answer stored; one that takes nothing has it delivered without being stored, so the key stays
// free (nothing it did is in the transaction).
func TestMiddlewareBehindACopyingMiddleware(t *testing.T) {
	e := newMemEnv(t, nil)
	calls := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/payments", func(w http.ResponseWriter, r *http.Request) {
		calls++
		if r.Header.Get("X-Decline") == "" {
			db, _ := TxFrom[*memstore.DB](r.Context())
			e.pay(db, &payReq{Amount: 1, Tenant: "t1"})
			w.WriteHeader(http.StatusCreated)
			return
		}
		w.WriteHeader(http.StatusPaymentRequired)
	})
	type ctxKey struct{}
	copying := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, "request-id")))
	})
	h := e.middlewareAround(t, copying, false)
	for range 2 {
		serveReq(h, req("t1", key1, body100))
	}
	if calls != 1 || e.payments("t1") != 1 {
		t.Errorf("a handler that took its transaction ran %d times, %d payments (want 1, 1)", calls, e.payments("t1"))
	}
	for range 2 {
		if w := serveReq(h, req("t1", "k-test-0002-bbbbbbbbbbbb", body100, "X-Decline", "1")); w.Code != 402 {
			t.Fatalf("decline: %d", w.Code)
		}
	}
	if calls != 3 {
		t.Errorf("a decline without the transaction ran %d times in all, want 3 (not stored)", calls)
	}
}

// The wrapped handler gets only the query parameters the operation declares, which the
// fingerprint covers: r.FormValue and form binders merge the query into the body's fields, so
// an undeclared "?description=x" would reach the handler under the same key whatever it says.
func TestMiddlewareHandsOnOnlyTheDeclaredQuery(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Query = []string{"expand", "filter"}
	var seen []string
	mw, err := Middleware[*memstore.DB](e.rt, []Route{NewRoute(op, decodePay)}, MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		TxFrom[*memstore.DB](r.Context())
		seen = append(seen, r.URL.RawQuery+"|"+r.FormValue("description"))
		w.WriteHeader(http.StatusCreated)
	}))
	r := req("t1", key1, body100)
	r.URL.RawQuery = "description=evil&expand=customer&filter%5Bstatus%5D=open"
	if w := serveReq(h, r); w.Code != 201 {
		t.Fatalf("status %d %s, want 201", w.Code, w.Body)
	}
	if want := "expand=customer&filter%5Bstatus%5D=open|"; len(seen) != 1 || seen[0] != want {
		t.Errorf("the handler saw %q, want %q: the declared parameters and the deepObject's field, no description", seen, want)
	}
}

// A success from a handler that took neither the transaction nor the lease, under no route
// pattern of the operation (fiber's adaptor.FiberApp behind the middleware, whose handlers never
// see the request's context; a handler writing through its own pool behind a router that names
// no pattern), is not delivered unstored, which would run it again on every retry: the request
// fails (500, key released), the misuse is logged, and every later request is refused before
// the handler runs. A refusal without the transaction (a 402) is still delivered unstored.
func TestMiddlewareSuccessWithoutTheTransaction(t *testing.T) {
	e := newMemEnv(t, nil)
	calls := 0
	h := e.middlewareAround(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if r.Header.Get("X-Decline") != "" {
			w.WriteHeader(http.StatusPaymentRequired)
			return
		}
		w.WriteHeader(http.StatusCreated) // wrote elsewhere, never took TxFrom
	}), false)
	for range 2 {
		if w := serveReq(h, req("t1", "k-test-0001-declinedddd", body100, "X-Decline", "1")); w.Code != http.StatusPaymentRequired {
			t.Fatalf("decline: %d", w.Code)
		}
	}
	if calls != 2 {
		t.Errorf("a decline without the transaction ran %d times, want 2 (delivered, not stored)", calls)
	}
	if w := serveReq(h, req("t1", key1, body100)); w.Code != http.StatusInternalServerError {
		t.Errorf("a success without the transaction: %d, want 500", w.Code)
	}
	for _, k := range []string{key1, "k-test-0002-bbbbbbbbbbbb"} {
		if w := serveReq(h, req("t1", k, body100)); w.Code != http.StatusInternalServerError {
			t.Errorf("after the misuse showed: %d, want 500", w.Code)
		}
	}
	if calls != 3 {
		t.Errorf("the handler ran %d times in all, want 3 (refused before running once the misuse showed)", calls)
	}
	if !strings.Contains(e.logs.String(), "answered a success without taking its transaction or lease") {
		t.Errorf("the log does not say why:\n%s", e.logs)
	}
}
