package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

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
