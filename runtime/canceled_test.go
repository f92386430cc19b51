package runtime

import (
	"context"
	"net/http"
	"testing"
)

// A client that goes away before the store answers is not a store failure: the outcome is
// canceled (not store_error, which pages operators), nothing runs and nothing is recorded, and
// the same request from a client that stays runs normally.
func TestClientGoneIsNotAStoreError(t *testing.T) {
	e := newEnv(t, nil)
	op := payOp()
	h := e.atomicHandler(op)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := req("t1", "k-canceled-0000000001", `{"amount": 5}`).WithContext(ctx)
	serve(h, r)
	if got := e.obs.get(OutcomeCanceled); got != 1 {
		t.Errorf("canceled outcomes = %d, want 1", got)
	}
	if got := e.obs.get(OutcomeStoreError); got != 0 {
		t.Errorf("store_error outcomes = %d, want 0 for a client that went away", got)
	}
	if n := e.payments("t1"); n != 0 {
		t.Fatalf("payments after a canceled request = %d, want 0", n)
	}

	w := serve(h, req("t1", "k-canceled-0000000001", `{"amount": 5}`))
	if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after a canceled request: %d replayed=%q, want a fresh 201", w.Code, w.Header().Get("Idempotent-Replayed"))
	}
	if n := e.payments("t1"); n != 1 {
		t.Fatalf("payments after the retry = %d, want 1", n)
	}
}
