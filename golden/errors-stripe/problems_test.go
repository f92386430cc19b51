package errorsstripe

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/gentest"
	"github.com/idemgen/idemgen/runtime"
)

// The errors mapping of the Stripe-shaped spec answers every problem as runtime.StripeErrors,
// the built-in writer stripe-go is tested against, does: the same status, Stripe-Should-Retry,
// Retry-After and document; and every document is one of the spec's `error`.
func TestProblemsAsStripeErrors(t *testing.T) {
	schema, err := spec.LoadSchema("../../testdata/specs/errors-stripe.yaml", "#/components/schemas/error")
	if err != nil {
		t.Fatal(err)
	}
	w := operationPostCustomers().Profile.Problems
	for _, p := range gentest.Problems() {
		got, want := gentest.WriteProblem(w, p), gentest.WriteProblem(runtime.StripeErrors, p)
		if err := schema.Validate(got.Body.Bytes(), true); err != nil {
			t.Errorf("%s: %v in %s", p.Name, err, got.Body)
		}
		var g, w any
		if json.Unmarshal(got.Body.Bytes(), &g) != nil || json.Unmarshal(want.Body.Bytes(), &w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: the mapping writes %s, StripeErrors %s", p.Name, got.Body, want.Body)
		}
		for _, h := range []string{"Stripe-Should-Retry", "Retry-After", "Content-Type", "Cache-Control"} {
			if got.Header().Get(h) != want.Header().Get(h) {
				t.Errorf("%s: %s %q, StripeErrors %q", p.Name, h, got.Header().Get(h), want.Header().Get(h))
			}
		}
		if got.Code != want.Code {
			t.Errorf("%s: status %d, StripeErrors %d", p.Name, got.Code, want.Code)
		}
	}
}
