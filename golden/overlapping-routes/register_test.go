package overlappingroutes

// Hand-written test of the route groups generated for testdata/specs/overlapping-routes.yaml:
// operations whose ServeMux patterns overlap share one route, and each request reaches the most
// specific operation that matches it (real runtime and PostgreSQL, scripts/with-postgres.sh).

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

func TestOverlappingRoutes(t *testing.T) {
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
		CloseAccount: func(_ context.Context, _ pgstore.DBTX, p CloseAccountParams) (runtime.Response, error) {
			return reply("closeAccount " + p.ID)
		},
		CloseTenantAccounts: func(_ context.Context, _ pgstore.DBTX, p CloseTenantAccountsParams) (runtime.Response, error) {
			return reply("closeTenantAccounts " + p.Tenant)
		},
		AcmeThing: func(_ context.Context, _ pgstore.DBTX, p AcmeThingParams) (runtime.Response, error) {
			return reply("acmeThing " + p.Kind + " " + p.Name)
		},
		ExportCSV: func(_ context.Context, _ pgstore.DBTX, p ExportCSVParams) (runtime.Response, error) {
			return reply("exportCSV " + p.Tenant + " " + p.File)
		},
		ExportAccounts: func(_ context.Context, _ pgstore.DBTX, p ExportAccountsParams) (runtime.Response, error) {
			return reply("exportAccounts " + p.Tenant + " " + p.Report)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for i, tt := range []struct{ path, want string }{
		{"/accounts/a1/close", "closeAccount a1"},
		{"/t9/accounts/close", "closeTenantAccounts t9"},
		{"/acme/widget/w1", "acmeThing widget w1"},
		{"/acme/accounts/close", "closeTenantAccounts acme"}, // two literals beat one
		{"/t9/exports/june.csv", "exportCSV t9 june"},
		{"/t9/other/close", "404"},
		{"/t9/exports/june.txt", "404"},
		{"/t9/accounts/june.csv", "exportAccounts t9 june"}, // a mixed segment inside the group
		{"/t9/accounts/%6Aune.csv", "exportAccounts t9 june"},
		{"/t9/accounts/june.txt", "404"},
		{"/t9/accounts/.csv", "404"},
		{"/acme/exports/june", "acmeThing exports june"}, // not taken by exportCSV, which shares the route
	} {
		req, _ := http.NewRequest("POST", srv.URL+tt.path, nil)
		req.Header.Set("Idempotency-Key", "route-key-000000000"+string(rune('a'+i)))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := string(b)
		if resp.StatusCode == 404 {
			got = "404"
		}
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: got %d %q, want %q", tt.path, resp.StatusCode, got, tt.want)
		}
	}
}
