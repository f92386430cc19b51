package pgstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/client"
	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The newcomer's scenario (issue 39): a client whose attempts time out after 1 s
// (runtime/client, WithAttemptTimeout) against a handler that takes 2 s. Each timed-out attempt
// disconnects; the operation it started must finish anyway, its answer be stored, and a retry
// replay it. Before handlers ran detached from their client, every attempt's handler was
// canceled with it, its transaction rolled back and its key released: zero payments, and the
// client never succeeded (the Attached cases below still behave so, by choice).
func TestClientShorterThanTheHandler(t *testing.T) {
	const handlerTime = "2s"
	ways := []struct {
		name    string
		handler func(e *env, op *runtime.Operation) http.Handler
		lease   bool
	}{
		{name: "atomic", handler: func(e *env, op *runtime.Operation) http.Handler { return e.atomicHandler(op) }},
		{name: "lease", lease: true, handler: slowLease},
		{name: "middleware", handler: func(e *env, op *runtime.Operation) http.Handler { return slowMiddleware(e, op) }},
	}
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			op := payOp()
			if way.lease {
				op = leaseOp()
				op.Lease = 5 * time.Second // longer than the handler: no takeover, the retry waits
			}
			srv := httptest.NewServer(way.handler(e, op))
			defer srv.Close()
			resp, err := newcomer(t, srv.URL, handlerTime)
			if err != nil {
				t.Fatalf("the client never succeeded: %v (payments %d)", err, e.payments("t1"))
			}
			if resp.StatusCode != http.StatusCreated || !client.Replayed(resp) {
				t.Errorf("the client got %d (replayed %v), want the stored 201 replayed", resp.StatusCode, client.Replayed(resp))
			}
			if n := e.payments("t1"); n != 1 {
				t.Errorf("payments = %d, want exactly 1", n)
			}
		})
	}
}

// With execution.detach false (Operation.Attached) the handler stops with its client, as every
// handler did before: the same client never succeeds and nothing is paid. This is the opt-out
// for handlers that truly must stop, and the scenario's failure before detaching.
func TestAttachedHandlerStopsWithItsClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op := payOp()
	op.Attached = true
	srv := httptest.NewServer(e.atomicHandler(op))
	defer srv.Close()
	if resp, err := newcomer(t, srv.URL, "2s"); err == nil {
		t.Fatalf("an attached handler's client succeeded (%d): it should have been canceled with every attempt", resp.StatusCode)
	}
	if n := e.payments("t1"); n != 0 {
		t.Errorf("payments = %d, want 0: every attempt was canceled", n)
	}
}

// A detached handler still ends at the operation's execution limit: its work is rolled back and
// the key released, with ErrExecutionLimit as its context's cause.
func TestExecutionLimitEndsADetachedHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op := payOp()
	op.ExecutionLimit = 300 * time.Millisecond
	cause := make(chan error, 1)
	h := e.handlerWith(op, func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		if _, err := db.Exec(ctx, insertPay, r.Tenant, r.Amount); err != nil {
			return runtime.Response{}, err
		}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return runtime.Response{}, ctx.Err()
	})
	w := serve(h, req("t1", key1, body100))
	if w.Code != http.StatusInternalServerError {
		t.Errorf("status %d, want 500 for a handler stopped by its execution limit", w.Code)
	}
	if got := <-cause; !errors.Is(got, runtime.ErrExecutionLimit) {
		t.Errorf("context cause %v, want ErrExecutionLimit", got)
	}
	if n, r := e.payments("t1"), e.records(); n != 0 || r != 0 {
		t.Errorf("payments %d, records %d after the limit, want 0 and 0 (rolled back, key released)", n, r)
	}
}

// newcomer runs the newcomer's client against url: runtime/client with 1 s attempts, one POST
// whose handler takes handlerTime (the tests' X-Delay knob).
func newcomer(t *testing.T, url, handlerTime string) (*http.Response, error) {
	t.Helper()
	hc := &http.Client{Transport: client.New(nil, client.WithAttemptTimeout(time.Second))}
	r, err := http.NewRequest(http.MethodPost, url+"/v1/payments", strings.NewReader(body100))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer t1")
	r.Header.Set("X-Delay", handlerTime)
	resp, err := hc.Do(r)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// slowLease is a lease-mode handler whose call phase takes X-Delay (or ends with its context)
// and whose completion writes a payment.
func slowLease(e *env, op *runtime.Operation) http.Handler {
	return runtime.LeaseHandler(e.rt, op, runtime.BindLease(decodePay, func(ctx context.Context, l *runtime.Lease, r *payReq) (runtime.CompleteFunc[pgstore.DBTX], error) {
		if _, err := l.ProviderKey(ctx, "charge"); err != nil {
			return nil, err
		}
		d, _ := time.ParseDuration(r.Header.Get("X-Delay"))
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return func(ctx context.Context, db pgstore.DBTX) (runtime.Response, error) {
			if _, err := db.Exec(ctx, insertPay, r.Tenant, r.Amount); err != nil {
				return runtime.Response{}, err
			}
			return runtime.Response{Status: http.StatusCreated, Body: []byte(`{"paid":true}`)}, nil
		}, nil
	}))
}

// slowMiddleware is runtime.Middleware in front of an existing handler that writes a payment
// through TxFrom, then sleeps for X-Delay (or until its request's context ends).
func slowMiddleware(e *env, op *runtime.Operation) http.Handler {
	route := runtime.Route{Operation: op, Decode: func(in *gen.Input) error { _, err := decodePay(in); return err }}
	mw, err := runtime.Middleware[pgstore.DBTX](e.rt, []runtime.Route{route}, runtime.MiddlewareOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		db, ok := runtime.TxFrom[pgstore.DBTX](r.Context())
		if !ok {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		if _, err := db.Exec(r.Context(), insertPay, "t1", 100); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		d, _ := time.ParseDuration(r.Header.Get("X-Delay"))
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			http.Error(w, "canceled", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"paid":true}`))
	}))
}
