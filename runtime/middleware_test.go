package runtime

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// The Middleware over memstore: the same HTTP layer and machines around a handler that does
// not know about idempotency beyond TxFrom and LeaseFrom.

func payRoute(op *Operation) Route {
	return Route{Operation: op, Decode: func(in *gen.Input) error { _, err := decodePay(in); return err }}
}

// existingHandler is a service's own handler: it reads the body itself, writes through the
// transaction from its context (atomic) or calls the provider (lease), and answers.
func (e *memEnv) existingHandler(entered *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil || !strings.Contains(string(body), `"amount"`) {
			http.Error(w, "the wrapped handler did not get the body", 500)
			return
		}
		tenant, _ := bearerScope(r)
		pr := &payReq{Amount: 1, Tenant: tenant, Header: r.Header}
		var id int64
		if db, ok := TxFrom[*memstore.DB](r.Context()); ok {
			id = e.pay(db, pr)
		} else if l := LeaseFrom(r.Context()); l != nil {
			e.charge(l.ProviderKey("charge"))
		} else {
			http.Error(w, "neither a transaction nor a lease in the context", 500)
			return
		}
		e.hold(pr)
		if f := r.Header.Get("X-Fail"); f != "" {
			w.WriteHeader(503)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/v1/payments/%d", id))
		w.Header().Set("Set-Cookie", "s=1")
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"id":%d}`, id)
	})
}

func TestMiddleware(t *testing.T) {
	e := newMemEnv(t, nil)
	lop := leaseOp()
	lop.Path = "/v1/charges"
	mw, err := Middleware[*memstore.DB](e.rt, []Route{payRoute(payOp()), payRoute(lop)}, MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var entered atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", e.existingHandler(&entered))
	mux.Handle("POST /v1/charges", e.existingHandler(&entered))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	h := mw(mux)

	first := serveReq(h, req("t1", key1, body100))
	if first.Code != 201 || first.Header().Get("Set-Cookie") == "" || first.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("first: %d %v %s", first.Code, first.Header(), first.Body)
	}
	again := serveReq(h, req("t1", key1, body100))
	if again.Code != 201 || again.Header().Get(HeaderReplayed) != "true" || again.Body.String() != first.Body.String() ||
		again.Header().Get("Location") != first.Header().Get("Location") || again.Header().Get("Set-Cookie") != "" {
		t.Errorf("replay: %d %v %s", again.Code, again.Header(), again.Body)
	}
	if w := serveReq(h, req("t1", key1, `{"amount":5}`)); w.Code != 422 {
		t.Errorf("other body: %d", w.Code)
	}
	// Refusals happen before the wrapped handler, as through generated wrappers.
	if w := serveReq(h, req("t1", "", body100)); w.Code != 400 || problemType(t, w) != ProblemKeyMissing {
		t.Errorf("no key: %d %s", w.Code, w.Body)
	}
	if w := serveReq(h, req("t1", key1+"-bad", `{"amount":-1}`)); w.Code != 400 || problemType(t, w) != ProblemBodyInvalid {
		t.Errorf("invalid body: %d %s", w.Code, w.Body)
	}
	// A non-final answer releases the key and rolls back the handler's writes.
	if w := serveReq(h, req("t1", key1+"-503", body100, "X-Fail", "1")); w.Code != 503 {
		t.Errorf("non-final: %d", w.Code)
	}
	if w := serveReq(h, req("t1", key1+"-503", body100)); w.Code != 201 || w.Header().Get(HeaderReplayed) != "" {
		t.Errorf("retry after non-final: %d", w.Code)
	}
	// A duplicate while the first runs never reaches the wrapped handler.
	done := make(chan int)
	go func() { done <- serveReq(h, req("t1", key1+"-dup", body100, "X-Hold", "mw")).Code }()
	g := e.gate("mw")
	g.wait(t)
	before := entered.Load()
	if w := serveReq(h, req("t1", key1+"-dup", body100)); w.Code != 409 || entered.Load() != before {
		t.Errorf("duplicate: %d, wrapped handler entered %d more times", w.Code, entered.Load()-before)
	}
	g.open()
	if code := <-done; code != 201 {
		t.Errorf("held request: %d", code)
	}
	// Lease mode: the handler gets the claim's Lease; one provider charge per key.
	for i := range 2 {
		r := req("t1", key1+"-lease", body100)
		r.URL.Path = "/v1/charges"
		if w := serveReq(h, r); w.Code != 201 || (i == 1) != (w.Header().Get(HeaderReplayed) == "true") {
			t.Errorf("lease request %d: %d %v %s", i, w.Code, w.Header(), w.Body)
		}
	}
	// Other routes pass through untouched.
	if w := serveReq(h, httptest.NewRequest("GET", "/health", nil)); w.Code != 200 || w.Body.String() != "ok" {
		t.Errorf("unmarked route: %d %s", w.Code, w.Body)
	}
	if n := e.payments("t1"); n != 3 || e.charges() != 1 {
		t.Errorf("payments %d, charges %d; want 3 and 1", n, e.charges())
	}
}

// The middleware finds operations by the request's pattern, by method and path (the most
// specific template first), or by the caller's matcher.
func TestMiddlewareRouting(t *testing.T) {
	e := newMemEnv(t, nil)
	byID := payOp()
	byID.ID, byID.Path = "getPayment", "/v1/payments/{id}/capture"
	literal := payOp()
	literal.ID, literal.Path = "captureAll", "/v1/payments/all/capture"
	var got atomic.Value
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := TxFrom[*memstore.DB](r.Context()); ok {
			got.Store("guarded")
		} else {
			got.Store("plain")
		}
		w.WriteHeader(201)
	})
	for _, c := range []struct {
		path string
		op   string
	}{
		{"/v1/payments/p1/capture", "getPayment"},
		{"/v1/payments/all/capture", "captureAll"},
		{"/v1/payments/p1", ""},
		{"/v1/payments/p1/capture/x", ""},
	} {
		mw, err := Middleware[*memstore.DB](e.rt, []Route{payRoute(byID), payRoute(literal)}, MiddlewareOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := req("t1", fmt.Sprintf("k-route-%s-0000000", strings.ReplaceAll(c.path, "/", "-")), body100)
		r.URL.Path = c.path
		w := serveReq(mw(next), r)
		want := "plain"
		if c.op != "" {
			want = "guarded"
			if _, found := e.record("t1", r.Header.Get("Idempotency-Key")); !found || w.Code != 201 {
				t.Errorf("%s: %d, no record", c.path, w.Code)
			}
			rec, _ := e.record("t1", r.Header.Get("Idempotency-Key"))
			if rec.Operation != c.op {
				t.Errorf("%s: served as %q, want %q", c.path, rec.Operation, c.op)
			}
		}
		if got.Load() != want {
			t.Errorf("%s: %v, want %s", c.path, got.Load(), want)
		}
	}
	mw, err := Middleware[*memstore.DB](e.rt, []Route{payRoute(byID)}, MiddlewareOptions{
		Match: func(r *http.Request) (string, bool) { return "getPayment", r.Header.Get("X-Route") != "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	r := req("t1", "k-route-matcher-000001", body100, "X-Route", "1")
	r.URL.Path = "/anything"
	if serveReq(mw(next), r); got.Load() != "guarded" {
		t.Errorf("caller's matcher: %v", got.Load())
	}
}

// Middleware refuses a route table it cannot serve: an operation listed twice, a route without
// a decoder, a store that cannot run the DB writes.
func TestMiddlewareConfigErrors(t *testing.T) {
	e := newMemEnv(t, nil)
	if _, err := Middleware[*memstore.DB](e.rt, []Route{payRoute(payOp()), payRoute(payOp())}, MiddlewareOptions{}); err == nil {
		t.Error("an operation listed twice must fail")
	}
	if _, err := Middleware[*memstore.DB](e.rt, []Route{{Operation: payOp()}}, MiddlewareOptions{}); err == nil {
		t.Error("a route without a decoder must fail")
	}
	if _, err := Middleware[*otherDB](e.rt, []Route{payRoute(payOp())}, MiddlewareOptions{}); err == nil || !strings.Contains(err.Error(), "otherDB") {
		t.Errorf("a store that cannot run the writes: %v", err)
	}
	if _, err := Middleware[*memstore.DB](nil, nil, MiddlewareOptions{}); err == nil {
		t.Error("a nil Runtime must fail")
	}
}
