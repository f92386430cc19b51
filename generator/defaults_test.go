package generator

import (
	"context"
	"slices"
	"testing"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/runtime"
)

// `profile: stripe` in a spec gives an operation the settings of runtime.StripeProfile(): the
// loader's copy of the profile's settings and the runtime's value are one contract.
func TestProfileSettings(t *testing.T) {
	res, err := spec.Load(context.Background(), spec.Options{Path: "../testdata/specs/stripe-profile.yaml"})
	if err != nil || res.Diags.HasErrors() {
		t.Fatal(err, res.Diags.Err())
	}
	p := runtime.StripeProfile()
	if profileConstructor(model.ProfileStripe) != "StripeProfile" || p.Name != string(model.ProfileStripe) {
		t.Fatalf("the stripe profile's constructor or name differ: %q", p.Name)
	}
	for _, op := range res.Doc.Operations {
		if op.ID != "PostCustomers" { // the operation without settings of its own
			continue
		}
		s := op.Settings
		if s.Key.MinLength != p.KeyMinLength || s.Key.MaxLength != p.KeyMaxLength || s.Wait != p.Wait ||
			!slices.Equal(s.ScopeHeaders, p.ScopeHeaders) {
			t.Errorf("profile: stripe gives %+v (wait %s, scope headers %v); runtime.StripeProfile() is %+v", s.Key, s.Wait, s.ScopeHeaders, p)
		}
		return
	}
	t.Fatal("PostCustomers not found")
}
