package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/cases"
	"github.com/idemgen/idemgen/internal/conform"
	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/pgtest"
)

// acpSpecs are ACP's OpenAPI documents the merchant is generated from.
var acpSpecs = []string{
	filepath.Join("..", "..", "testdata", "specs", "vendor", "acp", "openapi.agentic_checkout.yaml"),
	filepath.Join("..", "..", "testdata", "specs", "vendor", "acp", "openapi.delegate_payment.yaml"),
}

// merchantServer serves the merchant with its test knobs on a fresh database, and GET
// /_effects, the counters of the request-sequence cases (testdata/cases/README.md), for the
// caller that the request's bearer token names.
func merchantServer(t *testing.T, conns int32) (*httptest.Server, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.NewPool(t, conns)
	if err := migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	h, err := newServer(pool, options{testKnobs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/_effects" {
			h.ServeHTTP(w, r)
			return
		}
		tenant, _ := callerOf(r)
		counts := map[string]int64{}
		for name, table := range effectTables {
			var n int64
			if err := pool.QueryRow(r.Context(), `SELECT count(*) FROM `+table+` WHERE tenant = $1`, tenant).Scan(&n); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			counts[name] = n
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(counts)
	}))
	t.Cleanup(srv.Close)
	return srv, pool
}

// effectTables are the cases' effect counters (testdata/cases-acp/README.md) and the tables
// they count.
var effectTables = map[string]string{
	"checkout_sessions":  "checkout_sessions",
	"session_updates":    "session_updates",
	"orders":             "orders",
	"cancellations":      "cancellations",
	"delegated_payments": "delegated_payments",
}

// TestCases runs every case of testdata/cases-acp, one per normative idempotency requirement
// of ACP (cited by section in each case's about), against the merchant, then all of them again
// in reverse order on the database the first pass filled.
func TestCases(t *testing.T) {
	list, err := cases.LoadDir(filepath.Join("..", "..", "testdata", "cases-acp"))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) < 20 {
		t.Fatalf("%d cases in testdata/cases-acp, want the 20 requirements", len(list))
	}
	srv, _ := merchantServer(t, 40)
	runner := &cases.Runner{BaseURL: srv.URL, Client: srv.Client()}
	for _, c := range list {
		t.Run(c.Name, func(t *testing.T) {
			if err := runner.Run(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("again-in-reverse-on-used-database", func(t *testing.T) {
		for i := len(list) - 1; i >= 0; i-- {
			if err := runner.Run(context.Background(), list[i]); err != nil {
				t.Error(err)
			}
		}
	})
}

// TestConform judges the merchant by ACP's contract from outside, as anyone would judge an ACP
// merchant: `idemgen conform` on ACP's unedited documents, with --infer and --profile acp (the
// row's key syntax, scope, body rules, codes and echoed key; nothing of the merchant's own
// configuration), the supported API-Version given as a parameter, two callers, the test knobs,
// an effects oracle and the fault checks in short mode. Every check must pass or say why it
// skips, and no operation may be left unchecked.
func TestConform(t *testing.T) {
	srv, pool := merchantServer(t, 40)
	ctx := context.Background()
	tenants := []string{"conform-agent-a", "conform-agent-b"}
	effects := func(ctx context.Context) (int64, error) {
		var total int64
		for _, table := range effectTables {
			var n int64
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE tenant = ANY($1)`, tenants).Scan(&n); err != nil {
				return 0, err
			}
			total += n
		}
		return total, nil
	}
	// Complete and cancel close the session they are sent to: each key gets a new one.
	fresh := map[string]conform.FreshFunc{"checkout_session_id": func(ctx context.Context) (string, error) {
		return createForConform(ctx, srv, tenants[0])
	}}
	for _, path := range acpSpecs {
		t.Run(filepath.Base(path), func(t *testing.T) {
			res, err := spec.Load(ctx, spec.Options{Path: path, Infer: true, Profile: "acp"})
			if err != nil || res.Diags.HasErrors() {
				t.Fatalf("%s: %v %v", path, err, res.Diags.Sorted())
			}
			rep, err := conform.Run(ctx, res.Doc, conform.Options{
				BaseURL:      srv.URL,
				Profile:      "acp",
				Header:       http.Header{"Authorization": {"Bearer " + tenants[0]}},
				TenantHeader: http.Header{"Authorization": {"Bearer " + tenants[1]}},
				FailHeader:   http.Header{"X-Test-Fail": {"500"}},
				DelayHeader:  http.Header{"X-Test-Delay": {"300ms"}},
				Params:       map[string]string{"API-Version": "2026-04-17"},
				FreshParams:  fresh,
				Effects:      effects,
				Faults:       true,
				Short:        true,
				Seed:         35,
			})
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			conform.WriteText(&text, rep)
			if rep.Failed() || len(rep.Unchecked) > 0 {
				t.Fatalf("idemgen conform --profile acp failed:\n%s", text.String())
			}
			t.Log(text.String())
		})
	}
}

// createForConform creates a session of tenant for conform's requests to the session
// endpoints, and returns its id.
func createForConform(ctx context.Context, srv *httptest.Server, tenant string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/checkout_sessions", strings.NewReader(`{"line_items":[{"id":"item_1"}],"currency":"usd","capabilities":{}}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+tenant)
	req.Header.Set("Idempotency-Key", "conform-setup-"+newID(""))
	req.Header.Set("API-Version", "2026-04-17")
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var s struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("create a session: %d %v", resp.StatusCode, err)
	}
	return s.ID, nil
}
