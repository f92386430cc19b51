package conformancetest

import (
	"context"
	"io"
	"net/http"
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
	newcomerOn(t, httpTest(svc))
}

// NewcomerListening is Newcomer for a service that serves on a server of its own (Listen).
func NewcomerListening(t *testing.T, listen Listen) {
	t.Helper()
	newcomerOn(t, listen)
}

func newcomerOn(t *testing.T, listen Listen) {
	t.Helper()
	env := NewEnv(t, MinPoolSize, PGStore(pgstore.Options{}))
	url, err := listen(t, env)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: client.New(nil, client.WithAttemptTimeout(time.Second))}
	r, err := http.NewRequest(http.MethodPost, url+"/v1/payments", strings.NewReader(`{"amount": 1500, "currency": "EUR", "to": "acc_123"}`))
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
