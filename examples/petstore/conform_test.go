package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/conform"
	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
)

// TestConform runs idemgen conform against the petstore as the README shows it (two api_key
// tenants, the faults in short mode), with an effects oracle counting the store's rows and an
// order for a pet that exists: every check passes or says why it skips (the petstore has no
// test knob to fail a handler, so the 5xx checks skip).
func TestConform(t *testing.T) {
	srv, pool := petstore(t, options{})
	// Judged by the spec as `idemgen spec` declares it to clients: Idempotency-Key-Expires on
	// every stored answer and replay, the answers the runtime gives.
	res := conformancetest.Annotated(t, spec.Options{Path: "petstore.yaml"})
	a, err := post(t, srv.Client(), srv.URL+"/pet", "conform-test-setup-pet", `{"name":"rex","photoUrls":[]}`)
	if err != nil || a.status != http.StatusCreated {
		t.Fatalf("add a pet: %v %+v", err, a)
	}
	var pet struct{ ID int64 }
	if err := json.Unmarshal(a.body, &pet); err != nil {
		t.Fatal(err)
	}
	effects := func(ctx context.Context) (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pets) + (SELECT count(*) FROM orders) + (SELECT count(*) FROM adoptions)`).Scan(&n)
		return n, err
	}
	rep, err := conform.Run(context.Background(), res.Doc, conform.Options{
		BaseURL:      srv.URL,
		Header:       http.Header{"Api_key": {"conform-me"}},
		TenantHeader: http.Header{"Api_key": {"conform-you"}},
		Bodies:       map[string][]byte{"placeOrder": fmt.Appendf(nil, `{"petId":%d,"quantity":1}`, pet.ID)},
		Effects:      effects,
		Faults:       true,
		Short:        true,
		Seed:         24,
	})
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
