package pgstore_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The Middleware on PostgreSQL under ClaimWithStatement: the wrapped handler cannot be seen,
// so the claim is confirmed (sent alone) before it starts, and a duplicate never reaches it,
// even while the first works before its first statement (the claim timer is set to a minute
// here, so only the confirmation can have claimed). Its writes through TxFrom commit with the
// record.
func TestMiddlewareClaimsBeforeTheHandler(t *testing.T) {
	e := newEnv(t, withDelay(time.Minute))
	route := runtime.Route{Operation: payOp(), Decode: func(in *gen.Input) error { _, err := decodePay(in); return err }}
	mw, err := runtime.Middleware[pgstore.DBTX](e.rt, []runtime.Route{route}, runtime.MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var entered atomic.Int64
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		db, ok := runtime.TxFrom[pgstore.DBTX](r.Context())
		if !ok {
			http.Error(w, "no transaction", 500)
			return
		}
		if r.Header.Get("X-Hold") != "" {
			g := e.gate(r.Header.Get("X-Hold"))
			g.enter()
			<-g.release // work before the first statement
		}
		if _, err := db.Exec(r.Context(), insertPay, "t1", 100); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	done := make(chan int)
	go func() { done <- serve(h, req("t1", key1, body100, "X-Hold", "first")).Code }()
	g := e.gate("first")
	g.wait(t)
	if w := serve(h, req("t1", key1, body100)); w.Code != 409 || problemType(t, w) != runtime.ProblemInFlight {
		t.Errorf("duplicate: %d %s, want 409", w.Code, w.Body)
	}
	if n := entered.Load(); n != 1 {
		t.Errorf("the wrapped handler was entered %d times, want 1 (the duplicate must not reach it)", n)
	}
	g.open()
	if code := <-done; code != 201 {
		t.Fatalf("first: %d", code)
	}
	if w := serve(h, req("t1", key1, body100)); w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "true" {
		t.Errorf("replay: %d %v", w.Code, w.Header())
	}
	if e.payments("t1") != 1 || e.records() != 1 {
		t.Errorf("payments %d, records %d", e.payments("t1"), e.records())
	}
}
