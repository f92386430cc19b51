package lease

// Hand-written end-to-end test of the lease-mode code generated for testdata/specs/lease.yaml,
// through Register, a real runtime and PostgreSQL (scripts/with-postgres.sh): the call phase
// runs once per key, the operation table's settings (key pattern, body limit, replay headers
// and statuses) reach the runtime.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

func TestLeaseModeThroughRegister(t *testing.T) {
	pool := pgtest.NewPool(t, 4)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	mux := http.NewServeMux()
	err = Register(mux, rt, Handlers{
		CaptureCharge: func(ctx context.Context, lease *runtime.Lease, p CaptureChargeParams, body CaptureChargeBody) (runtime.CompleteFunc[pgstore.DBTX], error) {
			calls.Add(1)
			ref, err := lease.ProviderKey(ctx, "capture") // what a real handler sends to the provider
			if err != nil {
				return nil, err
			}
			status := 200
			if body.Amount > 1000 {
				status = 402 // a final decline: replay.statuses stores it
			}
			return func(ctx context.Context, tx pgstore.DBTX) (runtime.Response, error) {
				return runtime.Response{Status: status, Header: http.Header{"X-Provider-Reference": {ref}},
					Body: []byte(`{"charge":"` + p.ChargeID + `"}`)}, nil
			}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	send := func(key, body string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/charges/ch_1/capture", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	r1, b1 := send("capture-0001-aaaaaaaaaaaa", `{"amount": 500}`)
	if r1.StatusCode != 200 || b1 != `{"charge":"ch_1"}` || r1.Header.Get("X-Provider-Reference") == "" {
		t.Fatalf("first: %d %s %v", r1.StatusCode, b1, r1.Header)
	}
	r2, b2 := send("capture-0001-aaaaaaaaaaaa", `{ "amount" : 500 }`)
	if r2.Header.Get("Idempotent-Replayed") != "true" || b2 != b1 || r2.Header.Get("X-Provider-Reference") != r1.Header.Get("X-Provider-Reference") {
		t.Fatalf("retry: %d %s %v", r2.StatusCode, b2, r2.Header)
	}
	if r, _ := send("capture-0001-aaaaaaaaaaaa", `{"amount": 501}`); r.StatusCode != 422 {
		t.Errorf("changed amount: %d, want 422", r.StatusCode)
	}
	// 402 is in replay.statuses: the decline is final and replayed.
	if r, _ := send("capture-0002-bbbbbbbbbbbb", `{"amount": 5000}`); r.StatusCode != 402 {
		t.Fatalf("decline: %d", r.StatusCode)
	}
	if r, _ := send("capture-0002-bbbbbbbbbbbb", `{"amount": 5000}`); r.StatusCode != 402 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("declined retry: %d replayed=%q", r.StatusCode, r.Header.Get("Idempotent-Replayed"))
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("call phase ran %d times, want 2", n)
	}
	// The key rule from the operation table: pattern ^[a-z0-9-]+$, at least 20 characters.
	if r, _ := send("CAPTURE-0003-CCCCCCCCCC", `{"amount": 5}`); r.StatusCode != 400 {
		t.Errorf("key outside the pattern: %d, want 400", r.StatusCode)
	}
	if r, _ := send("short-key", `{"amount": 5}`); r.StatusCode != 400 {
		t.Errorf("short key: %d, want 400", r.StatusCode)
	}
	// limits.body 64KiB.
	big := `{"amount": 5, "statement_descriptor": "` + strings.Repeat("x", 70<<10) + `"}`
	if r, _ := send("capture-0004-dddddddddddd", big); r.StatusCode != 413 {
		t.Errorf("body over limits.body: %d, want 413", r.StatusCode)
	}
	// Schema check: maxLength 22 is body-invalid, refused before any key lookup.
	if r, b := send("capture-0005-eeeeeeeeeeee", `{"amount": 5, "statement_descriptor": "`+strings.Repeat("y", 23)+`"}`); r.StatusCode != 400 || !strings.Contains(b, "body-invalid") {
		t.Errorf("maxLength: %d %s", r.StatusCode, b)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("call phase ran %d times, want 2", n)
	}
}
