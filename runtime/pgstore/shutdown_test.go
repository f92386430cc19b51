package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The adversary's rolling restart: replica A gets SIGTERM while it runs a request, and the
// client's retry goes to replica B. Before, a lease-mode key stayed 409 for the rest of its
// lease (29 s of 30 s) although A knew it was leaving. Runtime.ShutdownServer drains A: it
// takes no new key, lets the request run until the deadline, then hands it over, and B's retry
// runs at once.

// replicaServer serves h on a real listener, as a process does, for ShutdownServer.
func replicaServer(t *testing.T, h http.Handler) (*http.Server, string) {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.Config, ts.URL
}

// post sends r's request to the server at base, as a client does.
func post(t *testing.T, base string, r *http.Request) (*http.Response, error) {
	t.Helper()
	out, err := http.NewRequest(r.Method, base+r.URL.Path, r.Body)
	if err != nil {
		t.Fatal(err)
	}
	out.Header = r.Header.Clone()
	return http.DefaultClient.Do(out)
}

func TestShutdownHandsOverALease(t *testing.T) {
	op := leaseOp()
	op.Lease = 30 * time.Second
	shortStore := func(c *setup) { c.cfg.StoreTimeout = time.Second }
	a := newEnv(t, shortStore)
	b := newEnvAt(t, a.url, shortStore)
	p := &provider{}
	// A's call phase makes its provider call, then waits for the provider's answer (a slow
	// provider, and a handler that does not watch its context).
	g := a.gate("call")
	slow := runtime.LeaseHandler(a.rt, op, runtime.BindLease(decodePay, func(ctx context.Context, l *runtime.Lease, r *payReq) (runtime.CompleteFunc[pgstore.DBTX], error) {
		pk, err := l.ProviderKey(ctx, "charge")
		if err != nil {
			return nil, err
		}
		p.charge(pk)
		g.enter()
		<-g.release
		return func(ctx context.Context, db pgstore.DBTX) (runtime.Response, error) {
			if _, err := db.Exec(ctx, insertPay, r.Tenant, r.Amount); err != nil {
				return runtime.Response{}, err
			}
			return runtime.Response{Status: http.StatusCreated}, nil
		}, nil
	}))
	srv, url := replicaServer(t, slow)
	t.Cleanup(g.open) // before the server's Close, which waits for the handler
	hb := b.leaseHandler(op, p)

	first := make(chan int, 1)
	go func() {
		resp, err := post(t, url, req("t1", key1, body100))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	g.wait(t)
	if w := serve(hb, req("t1", key1, body100)); w.Code != http.StatusConflict {
		t.Fatalf("B while A runs the request: %d, want 409", w.Code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := a.rt.ShutdownServer(ctx, srv)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "handed over") {
		t.Errorf("ShutdownServer: %v, want the deadline with the request handed over", err)
	}
	// The retry on B takes the key over now, not when the 30 s lease would have run out.
	w := serve(hb, req("t1", key1, body100))
	if w.Code != http.StatusCreated || w.Header().Get(runtime.HeaderReplayed) != "" {
		t.Fatalf("B's retry after A's shutdown: %d %s, want the takeover's 201", w.Code, w.Body)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("the key was free %v after the shutdown began", d)
	}
	if n := p.count(); n != 1 {
		t.Errorf("the provider charged %d times, want 1 (the takeover's call deduplicated)", n)
	}
	g.open()
	if code := <-first; code == http.StatusCreated {
		t.Errorf("A's request, handed over, was answered 201 too")
	}
	if n := a.payments("t1"); n != 1 {
		t.Errorf("%d payments, want B's 1 (A's completion lost its lease)", n)
	}
	if w := serve(hb, req("t1", key1, body100)); w.Code != http.StatusCreated || w.Header().Get(runtime.HeaderReplayed) != "true" {
		t.Errorf("a later retry: %d, want B's result replayed", w.Code)
	}
}

// An atomic-mode request whose handler is in a statement at the deadline: its context is
// canceled, pgx cancels the statement, the transaction rolls back, and B's retry runs at once.
func TestShutdownRollsBackAnAtomicClaim(t *testing.T) {
	shortStore := func(c *setup) { c.cfg.StoreTimeout = 2 * time.Second }
	a := newEnv(t, shortStore)
	b := newEnvAt(t, a.url, shortStore)
	slow := a.handlerWith(payOp(), func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		if _, err := db.Exec(ctx, insertPay, r.Tenant, r.Amount); err != nil {
			return runtime.Response{}, err
		}
		if _, err := db.Exec(ctx, "SELECT pg_sleep(60)"); err != nil {
			return runtime.Response{}, err
		}
		return runtime.Response{Status: http.StatusCreated}, nil
	})
	srv, url := replicaServer(t, slow)
	go func() {
		if resp, err := post(t, url, req("t1", key1, body100)); err == nil {
			resp.Body.Close()
		}
	}()
	eventually(t, "the handler's statement", func() bool {
		var n int
		_ = b.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'SELECT pg_sleep(60)'`).Scan(&n)
		return n > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := a.rt.ShutdownServer(ctx, srv); err == nil {
		t.Error("ShutdownServer with a request running at the deadline: nil, want an error saying so")
	}
	// pgx gives up on the statement by closing the connection; the backend notices within the
	// store's client_connection_check_interval (Options.ClientCheckInterval, 1 s), and the
	// transaction rolls back: B's retries, a client's with Retry-After, find the key free then.
	hb := b.atomicHandler(payOp())
	var w *httptest.ResponseRecorder
	deadline := time.Now().Add(10 * time.Second)
	for w = serve(hb, req("t1", key1, body100)); w.Code == http.StatusConflict && time.Now().Before(deadline); w = serve(hb, req("t1", key1, body100)) {
		time.Sleep(100 * time.Millisecond)
	}
	if w.Code != http.StatusCreated || w.Header().Get(runtime.HeaderReplayed) != "" {
		t.Fatalf("B's retry after A's shutdown: %d %s, want 201 executed", w.Code, w.Body)
	}
	if n := a.payments("t1"); n != 1 {
		t.Errorf("%d payments, want B's 1 (A's rolled back)", n)
	}
}

// While Shutdown waits for a running request, the Runtime takes no new key (503, Retry-After,
// Connection: close, nothing runs) and still answers keys with a record.
func TestShutdownRefusesNewKeys(t *testing.T) {
	a := newEnv(t, nil)
	h := a.atomicHandler(payOp())
	if w := serve(h, req("t1", "k-test-done-aaaaaaaaaaaa", body100)); w.Code != http.StatusCreated {
		t.Fatal(w.Code)
	}
	g := a.gate("hold")
	go serve(h, req("t1", key1, body100, "X-Hold", "hold"))
	g.wait(t)
	shut := make(chan error, 1)
	go func() { shut <- a.rt.Shutdown(context.Background()) }()
	probes := 0
	eventually(t, "the runtime to refuse new keys", func() bool {
		probes++
		return serve(h, req("t1", fmt.Sprintf("k-test-probe-%012d", probes), body100)).Code == http.StatusServiceUnavailable
	})
	w := serve(h, req("t1", "k-test-new-aaaaaaaaaaaaa", body100))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || w.Header().Get("Connection") != "close" ||
		!strings.Contains(w.Body.String(), "shutting down") {
		t.Errorf("a new key while shutting down: %d %v %s, want 503 with Retry-After and Connection: close", w.Code, w.Header(), w.Body)
	}
	if w := serve(h, req("t1", "k-test-done-aaaaaaaaaaaa", body100)); w.Code != http.StatusCreated || w.Header().Get(runtime.HeaderReplayed) != "true" {
		t.Errorf("a completed key while shutting down: %d, want its replay", w.Code)
	}
	if w := serve(h, req("t1", "k-test-done-aaaaaaaaaaaa", `{"amount":7}`)); w.Code != http.StatusUnprocessableEntity {
		t.Errorf("a completed key with another request while shutting down: %d, want 422", w.Code)
	}
	g.open()
	if err := <-shut; err != nil {
		t.Errorf("Shutdown once the running request finished: %v", err)
	}
	if n := a.payments("t1"); n != 2+probes-1 {
		t.Errorf("%d payments, want %d (the refused keys ran nothing)", n, 2+probes-1)
	}
	if n := a.obs.get(runtime.OutcomeDraining); n < 2 {
		t.Errorf("%d requests counted as draining", n)
	}
}
