package trailingslash

// Hand-written test of the routes generated for testdata/specs/trailing-slash.yaml: a path
// that ends in "/" is served at exactly that path (pattern "/payments/{$}"), never at the
// subtree below it, and apart from the path without the slash (real runtime and PostgreSQL,
// scripts/with-postgres.sh).

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

func TestTrailingSlashRoutes(t *testing.T) {
	pool := pgtest.NewPool(t, 4)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	reply := func(s string) (runtime.Response, error) {
		return runtime.Response{Status: 200, Body: []byte(s)}, nil
	}
	mux := http.NewServeMux()
	err = Register(mux, rt, Handlers{
		CreatePaymentSlash: func(_ context.Context, _ pgstore.DBTX, _ CreatePaymentSlashParams, b CreatePaymentSlashBody) (runtime.Response, error) {
			return reply("createPaymentSlash")
		},
		CreatePayment: func(_ context.Context, _ pgstore.DBTX, _ CreatePaymentParams) (runtime.Response, error) {
			return reply("createPayment")
		},
		CreateRoot: func(_ context.Context, _ pgstore.DBTX, _ CreateRootParams) (runtime.Response, error) {
			return reply("createRoot")
		},
		CloseAccount: func(_ context.Context, _ pgstore.DBTX, p CloseAccountParams) (runtime.Response, error) {
			return reply("closeAccount " + p.ID)
		},
		CreateTenantRefund: func(_ context.Context, _ pgstore.DBTX, p CreateTenantRefundParams) (runtime.Response, error) {
			return reply("createTenantRefund " + p.Tenant)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for i, tt := range []struct{ path, want string }{
		{"/payments/", "createPaymentSlash"},
		{"/payments", "createPayment"},
		{"/", "createRoot"},
		{"/accounts/a1/", "closeAccount a1"},
		{"/t9/refunds/", "createTenantRefund t9"},
		{"/accounts/refunds/", "closeAccount refunds"}, // one literal each: model order
		{"/payments/p1/x", "404"},                      // not the subtree
		{"/accounts/a1/x", "404"},                      // not the subtree
		{"/t9/refunds", "307"},                         // ServeMux redirects to the path with the slash
		{"/t9/other/", "404"},                          // neither member's literal
		{"/payments/p1/refunds/", "404"},
	} {
		req, _ := http.NewRequest("POST", srv.URL+tt.path, strings.NewReader(`{"amount": 1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "trailing-key-00000"+string(rune('a'+i)))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := string(b)
		switch resp.StatusCode {
		case 404:
			got = "404"
		case 307:
			got = "307"
		}
		if got != tt.want {
			t.Errorf("%s: got %d %q, want %q", tt.path, resp.StatusCode, got, tt.want)
		}
	}
}
