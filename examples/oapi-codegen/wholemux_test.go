package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// With the middleware around the whole ServeMux, it claims exactly the requests ServeMux
// routes to a marked operation and stores only the operation's answers: "/v1/%70ayments" is
// createPayment for ServeMux, so it runs guarded (once per key); "/v1/payments/" is ServeMux's
// 404, delivered and never stored, so the request to the right path runs under the same key.
func TestWholeMux(t *testing.T) {
	env := conformancetest.NewEnv(t, 8, conformancetest.PGStore(pgstore.Options{}))
	pool, ctx := env.DB, context.Background()
	h, err := newHandler(pool, env.Store, env.Provider, env.Logger, true)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(path, key, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t-wholemux")
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	payments := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE tenant = 't-wholemux'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const body = `{"amount": 100, "currency": "EUR", "to": "acc_1"}`
	first, b1 := post("/v1/%70ayments", "k-wholemux-escaped-0001", body)
	again, b2 := post("/v1/%70ayments", "k-wholemux-escaped-0001", body)
	if first.StatusCode != 201 || again.StatusCode != 201 || again.Header.Get(runtime.HeaderReplayed) != "true" || b1 != b2 || payments() != 1 {
		t.Errorf("/v1/%%70ayments: %d then %d (replayed %q), %d payments; want one payment, then its replay", first.StatusCode, again.StatusCode, again.Header.Get(runtime.HeaderReplayed), payments())
	}
	if resp, b := post("/v1/payments/", "k-wholemux-slash-00001", body); resp.StatusCode != 404 {
		t.Fatalf("/v1/payments/: %d %s, want ServeMux's 404", resp.StatusCode, b)
	}
	if resp, b := post("/v1/payments", "k-wholemux-slash-00001", body); resp.StatusCode != 201 || resp.Header.Get(runtime.HeaderReplayed) != "" {
		t.Errorf("the right path under the 404's key: %d %v %s, want a first execution", resp.StatusCode, resp.Header, b)
	}
	// The decoder differential through the strict server's own encoding/json decoding.
	if resp, b := post("/v1/payments", "k-wholemux-variant-0001", `{"amount": 5, "Amount": 600, "currency": "EUR", "to": "acc_1"}`); resp.StatusCode != 400 {
		t.Errorf("case variant: %d %s, want 400", resp.StatusCode, b)
	}
	if resp, b := post("/v1/payments", "k-wholemux-exponent-001", `{"amount": 1.5e3, "currency": "EUR", "to": "acc_1"}`); resp.StatusCode != 201 || !strings.Contains(b, `"amount":1500`) {
		t.Errorf("1.5e3: %d %s, want a payment of 1500", resp.StatusCode, b)
	}
}
