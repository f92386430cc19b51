package conformancetest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/client"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// Newcomer runs the newcomer's scenario of issue 39 against the service svc builds on a fresh
// database: runtime/client with 1 s attempts (WithAttemptTimeout) posts a payment whose handler
// takes 2 s (X-Test-Delay). Each timed-out attempt disconnects; the service must finish the
// operation its first attempt started (the runtime detaches the handler from its client), so
// that a retry replays it: the client succeeds, with exactly one payment. A service whose
// handler is canceled with its client never succeeds, and pays nothing.
func Newcomer(t *testing.T, svc Service) {
	t.Helper()
	env := NewEnv(t, MinPoolSize, PGStore(pgstore.Options{}))
	h, err := svc(env)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	hc := &http.Client{Transport: client.New(nil, client.WithAttemptTimeout(time.Second))}
	r, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/payments", strings.NewReader(`{"amount": 1500, "currency": "EUR", "to": "acc_123"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer newcomer")
	r.Header.Set("X-Test-Delay", "2s")
	resp, err := hc.Do(r)
	if err != nil {
		t.Fatalf("the client never succeeded: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !client.Replayed(resp) {
		t.Errorf("the client got %d (replayed %v), want the first attempt's 201, replayed", resp.StatusCode, client.Replayed(resp))
	}
	var n int
	if err := env.DB.QueryRow(context.Background(), `SELECT count(*) FROM payments WHERE tenant = 'newcomer'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("payments = %d, want exactly 1", n)
	}
}
