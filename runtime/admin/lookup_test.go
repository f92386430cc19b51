package admin_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/admin"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// A key that support staff look up is the key the runtime served: the header value as the
// client sent it (an RFC 8941 sf-string, section 3.3.3, or a bare token), through
// runtime.UnquoteKey and Operation.RecordKey, names the row that the request stored, on
// PostgreSQL, for an operation declared `scope: operation` (whose stored key is qualified).
func TestUnquoteKeyIsTheServedKey(t *testing.T) {
	pool := pgtest.NewPool(t, 4)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	st := pgstore.New(pool, pgstore.Options{})
	rt, err := runtime.New(runtime.Config{
		Store:  st,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Scope:  func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	op := &runtime.Operation{
		ID: "refundCharge", Method: "POST", Path: "/v1/refunds", Scope: runtime.ScopeOperation,
		Key:       runtime.KeyRule{Header: "Idempotency-Key", Required: true},
		Retention: time.Hour, MediaTypes: []string{"application/json"},
	}
	srv := httptest.NewServer(runtime.AtomicHandler(rt, op, runtime.BindAtomic(decode,
		func(context.Context, pgstore.DBTX, *body) (runtime.Response, error) {
			return runtime.Response{Status: http.StatusCreated, Body: []byte(`{}`)}, nil
		})))
	defer srv.Close()

	for _, tc := range []struct{ sent, key string }{
		{`"refund-quoted-0000000001"`, "refund-quoted-0000000001"},
		{`"refund-\"escaped\"-\\-0002"`, `refund-"escaped"-\-0002`},
		{`refund-bare-"token"-000003`, `refund-bare-"token"-000003`},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tenant", tenant)
		req.Header.Set("Idempotency-Key", tc.sent)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: served %d", tc.sent, resp.StatusCode)
		}

		k, err := runtime.UnquoteKey(tc.sent)
		if err != nil || k != tc.key {
			t.Errorf("UnquoteKey(%s) = %q, %v; want %q", tc.sent, k, err, tc.key)
		}
		snaps, err := st.Inspect(ctx, tenant, []string{op.RecordKey(k)}, false)
		if err != nil || len(snaps) != 1 || snaps[0].Operation != op.ID {
			t.Errorf("%s: no row under RecordKey(UnquoteKey(sent)) = %q: %v %v", tc.sent, op.RecordKey(k), snaps, err)
		}
		for _, pasted := range []string{tc.sent, "  " + tc.sent + "\n"} {
			recs, err := admin.Lookup(ctx, st, tenant, pasted, admin.LookupOptions{Operations: []*runtime.Operation{op}})
			if err != nil || len(recs) != 1 || recs[0].Key != tc.key || !recs[0].PerOperation || recs[0].Status != http.StatusCreated {
				t.Errorf("Lookup(%q) = %+v, %v; want the served record of %q", pasted, recs, err, tc.key)
			}
		}
	}
	// What serving refuses, the lookup refuses: an sf-string with parameters is no key.
	if _, err := admin.Lookup(ctx, st, tenant, `"refund-quoted-0000000001";a=1`, admin.LookupOptions{}); !errors.Is(err, admin.ErrLookupInvalid) {
		t.Errorf("a key with RFC 8941 parameters: %v, want ErrLookupInvalid", err)
	}
	if _, err := runtime.UnquoteKey(`"refund-quoted-0000000001";a=1`); err == nil {
		t.Error("UnquoteKey accepted RFC 8941 parameters")
	}
}
