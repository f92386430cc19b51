package sdkclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/examples/sdk-client/client"
	"github.com/idemgen/idemgen/golden/petstore"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// TestClientFromTheAnnotatedSpec drives the client oapi-codegen generated from the spec idemgen
// spec wrote (the idempotency key a typed header parameter, the problem responses typed) against
// the server idemgen generates from the same spec, on a real PostgreSQL: a retry replays
// (Idempotent-Replayed), a key reused with another order is a typed 422 problem, a missing key a
// typed 400, and a duplicate while the first still runs a typed 409 with Retry-After.
func TestClientFromTheAnnotatedSpec(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t, 8)
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}, 1), make(chan struct{})
	mux := http.NewServeMux()
	err = petstore.Register(mux, rt, petstore.Handlers{
		PlaceOrder: func(ctx context.Context, tx pgstore.DBTX, p petstore.PlaceOrderParams, body petstore.PlaceOrderBody) (runtime.Response, error) {
			if body.Quantity == 99 { // the slow order of the in-flight case
				// The duplicate may start here too: under pgstore's default ClaimWithStatement
				// the claim goes with the handler's first statement, or alone after its Delay,
				// and a lost claim cancels the handler's context (store.ErrClaimLost). A
				// handler that honours its context then ends, and the duplicate is answered
				// 409; waiting on release alone would hold the duplicate until the first ends.
				select {
				case started <- struct{}{}:
				default:
				}
				select {
				case <-release:
				case <-ctx.Done():
					return runtime.Response{}, context.Cause(ctx)
				}
			}
			return runtime.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}},
				Body: []byte(`{"order":"` + time.Now().Format(time.RFC3339Nano) + `"}`)}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := client.NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	order := func(key string, quantity int32) *client.PlaceOrderResponse {
		t.Helper()
		r, err := c.PlaceOrderWithResponse(ctx, 7, &client.PlaceOrderParams{IdempotencyKey: key}, client.Order{PetId: 1, Quantity: quantity})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	first := order("order-key-0000000001", 2)
	again := order("order-key-0000000001", 2)
	if first.StatusCode() != http.StatusCreated || again.StatusCode() != http.StatusCreated ||
		again.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) ||
		first.HTTPResponse.Header.Get("Idempotency-Key-Expires") == "" || again.HTTPResponse.Header.Get("Idempotency-Key-Expires") == "" {
		t.Fatalf("retry: %d %q then %d %q (replayed %q, expires %q then %q)", first.StatusCode(), first.Body, again.StatusCode(), again.Body, again.HTTPResponse.Header.Get("Idempotent-Replayed"),
			first.HTTPResponse.Header.Get("Idempotency-Key-Expires"), again.HTTPResponse.Header.Get("Idempotency-Key-Expires"))
	}
	if p := order("order-key-0000000001", 3).ApplicationproblemJSON422; p == nil || !strings.HasSuffix(p.Type, "payload-mismatch") || p.Status != 422 {
		t.Errorf("a reused key: %+v, want a typed payload-mismatch problem", p)
	}
	if p := order("short", 2).ApplicationproblemJSON400; p == nil || !strings.HasSuffix(p.Type, "key-invalid") {
		t.Errorf("a key shorter than the spec's minLength 16: %+v, want a typed key-invalid problem", p)
	}
	noKey := func(_ context.Context, r *http.Request) error { r.Header.Del("Idempotency-Key"); return nil }
	missing, err := c.PlaceOrderWithResponse(ctx, 7, &client.PlaceOrderParams{}, client.Order{PetId: 1, Quantity: 2}, noKey)
	if err != nil {
		t.Fatal(err)
	}
	if p := missing.ApplicationproblemJSON400; p == nil || !strings.HasSuffix(p.Type, "key-missing") {
		t.Errorf("no key: %+v, want a typed key-missing problem", p)
	}

	done := make(chan *client.PlaceOrderResponse)
	go func() {
		r, err := c.PlaceOrderWithResponse(ctx, 7, &client.PlaceOrderParams{IdempotencyKey: "order-key-0000000002"}, client.Order{PetId: 1, Quantity: 99})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	<-started
	dup := order("order-key-0000000002", 99)
	close(release)
	if r := <-done; r == nil || r.StatusCode() != http.StatusCreated {
		t.Errorf("the first request: %v", r)
	}
	if p := dup.ApplicationproblemJSON409; p == nil || !strings.HasSuffix(p.Type, "in-flight") || dup.HTTPResponse.Header.Get("Retry-After") == "" {
		t.Errorf("a duplicate in flight: %d %+v (Retry-After %q), want a typed in-flight problem", dup.StatusCode(), p, dup.HTTPResponse.Header.Get("Retry-After"))
	}
}
