package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/conform"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
)

// TestConform runs idemgen conform against the Stripe-compatible server with Stripe's own spec
// and idemgen.yaml, so under profile: stripe: a mismatch must be Stripe's 400
// idempotency_error, a replay carries a new Request-Id and names the first in
// Original-Request, keys are 1 to 255 characters, a duplicate waits and replays. Two secret
// keys are two tenants; the effects oracle counts every table's rows.
func TestConform(t *testing.T) {
	// Judged by the spec as `idemgen spec` writes it from Stripe's and idemgen.yaml: what idemgen
	// declares to Stripe's clients is checked too (Idempotency-Key-Expires on every stored
	// answer and replay).
	res := conformancetest.Annotated(t, spec.Options{Path: "../../testdata/specs/vendor/stripe-spec3.yaml", ConfigPath: "idemgen.yaml"})
	pool := pgtest.NewPool(t, 24)
	if err := Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	effects := func(ctx context.Context) (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM customers) + (SELECT count(*) FROM payment_intents) + (SELECT count(*) FROM charges)
			+ (SELECT count(*) FROM refunds) + (SELECT count(*) FROM subscriptions) + (SELECT count(*) FROM payouts) + (SELECT count(*) FROM objects)`).Scan(&n)
		return n, err
	}
	o := conform.Options{
		BaseURL:      srv.URL,
		Header:       http.Header{"Authorization": {"Bearer sk_test_conform_a"}},
		TenantHeader: http.Header{"Authorization": {"Bearer sk_test_conform_b"}},
		Effects:      effects,
		Seed:         24,
	}
	// Every check of every operation; then the fault checks on three operations of different
	// shapes (a customer, a payment intent with an amount, a payout that waits 0 s), which
	// keeps the test under 30 s.
	check(t, res.Doc, o)
	o.Faults, o.Short, o.Operations = true, true, []string{"PostCustomers", "PostPaymentIntents", "PostPayouts"}
	o.Checks = []conform.Check{conform.CheckLostResponse, conform.CheckLateDuplicate, conform.CheckTwoConnections, conform.CheckStorm}
	check(t, res.Doc, o)
}

func check(t *testing.T, doc *model.Document, o conform.Options) {
	t.Helper()
	rep, err := conform.Run(context.Background(), doc, o)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	conform.WriteText(&text, rep)
	if rep.Failed() {
		t.Fatalf("idemgen conform failed:\n%s", text.String())
	}
	t.Log(text.String())
}
