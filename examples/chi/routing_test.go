package chiexample

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	api "github.com/idemgen/idemgen/golden/conformance"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// In front of chi, the middleware guards every request chi routes to a marked operation, in
// chi's own reading of the path (as sent, not cleaned, a parameter that may be empty), and
// stores only what the operation's handler answered: chi's 404 for a spelling http.ServeMux
// would have routed ("/v1/%70ayments/...") is delivered, not stored, and the key stays free.
// Both placements: r.Use on chi's root router (chi names its route in Request.Pattern) and
// the middleware around the whole chi router (the handler's TxFrom says it ran).
func TestMiddlewareRoutesAsChiDoes(t *testing.T) {
	for _, outside := range []bool{false, true} {
		name := map[bool]string{false: "Use", true: "around-the-router"}[outside]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			mw, err := runtime.Middleware[pgstore.DBTX](e.rt, api.Routes(), runtime.MiddlewareOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			ran := map[string][]bool{} // by path: whether each run had the transaction
			refund := func(w http.ResponseWriter, r *http.Request) {
				_, guarded := runtime.TxFrom[pgstore.DBTX](r.Context())
				mu.Lock()
				ran[r.URL.RawPath+r.URL.Path] = append(ran[r.URL.RawPath+r.URL.Path], guarded)
				mu.Unlock()
				w.WriteHeader(http.StatusCreated)
			}
			r := chi.NewRouter()
			var h http.Handler = r
			if outside {
				h = mw(r)
			} else {
				r.Use(mw)
			}
			r.Post("/v1/payments/{payment_id}/refunds", refund)
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			const tenant = "t-chi-routing"
			for i, tt := range []struct {
				path   string
				routed bool // chi routes it to the refunds handler
			}{
				{"/v1/payments/pay_1/refunds", true},
				{"/v1/payments//refunds", true},  // payment_id ""
				{"/v1/payments/./refunds", true}, // payment_id "."
				{"/v1/payments/a%2Fb/refunds", true},
				{"/v1/%70ayments/pay_1/refunds", false}, // chi compares the path as sent
				{"/v1/payments/pay_1/refunds/", false},
				{"/v1/payments/pay_1/Refunds", false},
				{"/v1/payments/pay_1/refunds;x", false},
			} {
				path := tt.path
				key := "k-chi-routing-" + string(rune('a'+i)) + "-0000000"
				first := send(t, srv, "POST", path, tenant, key, `{"amount": 10}`)
				again := send(t, srv, "POST", path, tenant, key, `{"amount": 10}`)
				mu.Lock()
				runs := ran[pathKey(path)]
				mu.Unlock()
				switch {
				case tt.routed:
					// Guarded, once.
					if len(runs) != 1 || !runs[0] || first.status != 201 || again.header.Get(runtime.HeaderReplayed) != "true" {
						t.Errorf("%s: chi routes it; handler runs %v, first %d, retry %s", path, runs, first.status, again)
					}
				case len(runs) > 0 || first.status != http.StatusNotFound || again.status != http.StatusNotFound || again.header.Get(runtime.HeaderReplayed) != "":
					t.Errorf("%s: chi does not route it; handler runs %v, got %d then %s, want chi's 404 twice, never replayed", path, runs, first.status, again)
				}
			}
			// The key of the 404 is free: the request to the right path runs under it.
			if w := send(t, srv, "POST", "/v1/payments/pay_1/refunds", tenant, "k-chi-routing-e-0000000", `{"amount": 10}`); w.status != 201 || w.header.Get(runtime.HeaderReplayed) != "" {
				t.Errorf("the right path under the 404's key: %s, want a first execution", w)
			}
		})
	}
}

// pathKey is how refund files a request path: URL.RawPath (when the path has escapes the
// default encoding would not write) followed by URL.Path.
func pathKey(p string) string {
	r := httptest.NewRequest("POST", p, nil)
	return r.URL.RawPath + r.URL.Path
}
