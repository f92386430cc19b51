package pgstore_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/runtime"
)

// A client that goes away before the store answers is not a store failure: the outcome is
// canceled (not store_error, which pages operators), nothing runs and nothing is recorded, and
// the same request from a client that stays runs normally.
func TestClientGoneIsNotAStoreError(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withStrategy(s.strategy))
			h := e.atomicHandler(payOp())

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			serve(h, req("t1", "k-canceled-0000000001", `{"amount": 5}`).WithContext(ctx))
			if got := e.obs.get(runtime.OutcomeCanceled); got != 1 {
				t.Errorf("canceled outcomes = %d, want 1", got)
			}
			if got := e.obs.get(runtime.OutcomeStoreError); got != 0 {
				t.Errorf("store_error outcomes = %d, want 0 for a client that went away", got)
			}
			if n := e.payments("t1"); n != 0 || e.records() != 0 {
				t.Fatalf("payments %d, records %d after a canceled request, want 0", n, e.records())
			}

			w := serve(h, req("t1", "k-canceled-0000000001", `{"amount": 5}`))
			if w.Code != http.StatusCreated || w.Header().Get(runtime.HeaderReplayed) != "" {
				t.Fatalf("retry after a canceled request: %d replayed=%q, want a fresh 201", w.Code, w.Header().Get(runtime.HeaderReplayed))
			}
			if n := e.payments("t1"); n != 1 {
				t.Fatalf("payments after the retry = %d, want 1", n)
			}
		})
	}
}
