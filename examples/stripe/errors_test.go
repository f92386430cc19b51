package main

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/idemgen/idemgen/examples/stripe/api"
	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/gentest"
	"github.com/idemgen/idemgen/runtime"
)

// The writer generated from idemgen.yaml's errors mapping answers every problem of every
// operation as runtime.StripeErrors, the built-in envelope, does: the same status, headers and
// document; and every document is one of Stripe's spec's `error` (no member it does not
// declare). So the stripe-go scenarios, which run against the generated writer, hold for the
// profile's built-in one too.
func TestErrorsAsStripe(t *testing.T) {
	for _, op := range api.Operations() {
		if op.Profile == nil || op.Profile.Problems == nil {
			t.Fatalf("%s has no generated error writer", op.ID)
		}
	}
	schema, err := spec.LoadSchema("../../testdata/specs/vendor/stripe-spec3.yaml", "#/components/schemas/error")
	if err != nil {
		t.Fatal(err)
	}
	w := api.Operations()[0].Profile.Problems
	for _, p := range gentest.Problems() {
		got, want := gentest.WriteProblem(w, p), gentest.WriteProblem(runtime.StripeErrors, p)
		if err := schema.Validate(got.Body.Bytes(), true); err != nil {
			t.Errorf("%s: %v in %s", p.Name, err, got.Body)
		}
		var g, s any
		if json.Unmarshal(got.Body.Bytes(), &g) != nil || json.Unmarshal(want.Body.Bytes(), &s) != nil || !reflect.DeepEqual(g, s) {
			t.Errorf("%s: the mapping writes %s, StripeErrors %s", p.Name, got.Body, want.Body)
		}
		if got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) {
			t.Errorf("%s: %d %v, StripeErrors %d %v", p.Name, got.Code, got.Header(), want.Code, want.Header())
		}
	}
}
