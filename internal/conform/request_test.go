package conform

import (
	"net/http"
	"slices"
	"testing"

	"github.com/idemgen/idemgen/internal/model"
)

// TestCredentialsReplaceADeclaredHeader: a header the spec declares as a parameter and the
// credentials (--header, --tenant-header) also set is sent once, with the credential's value;
// the idempotency key header is never replaced. Two copies of Authorization are a 400 at most
// services, which made the tenant-isolation check unrunnable against them.
func TestCredentialsReplaceADeclaredHeader(t *testing.T) {
	op := &model.Operation{ID: "createCharge", Method: http.MethodPost, Path: "/v1/charges", Params: []*model.Param{
		{Name: "Authorization", In: model.InHeader, Required: true, Schema: &model.Schema{Type: model.TypeString}},
		{Name: "X-Request-Source", In: model.InHeader, Required: true, Schema: &model.Schema{Type: model.TypeString, Enum: []string{"web"}}},
	}}
	op.Settings.Key = model.KeySettings{Carrier: model.CarrierHeader, Header: "Idempotency-Key"}
	r, err := buildRequest(op, newValues(1), &Options{})
	if err != nil {
		t.Fatal(err)
	}
	keyed := r.keyed("k-credentials-000000001")
	for _, tc := range []struct {
		name  string
		extra http.Header
		want  map[string][]string
	}{
		{"no credentials", nil, map[string][]string{"Authorization": {"(generated)"}, "X-Request-Source": {"web"}, "Idempotency-Key": {"k-credentials-000000001"}}},
		{"tenant b", http.Header{"Authorization": {"Bearer b"}}, map[string][]string{"Authorization": {"Bearer b"}, "X-Request-Source": {"web"}}},
		{"a credential named like the key header", http.Header{"Idempotency-Key": {"other"}}, map[string][]string{"Idempotency-Key": {"other", "k-credentials-000000001"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string][]string{}
			for _, f := range keyed.wire(spellCanonical, tc.extra).header {
				got[http.CanonicalHeaderKey(f.name)] = append(got[http.CanonicalHeaderKey(f.name)], f.value)
			}
			for name, want := range tc.want {
				g := got[name]
				if want[0] == "(generated)" {
					if len(g) != 1 || g[0] == "" {
						t.Errorf("%s: %q, want one generated value", name, g)
					}
					continue
				}
				if !slices.Equal(g, want) {
					t.Errorf("%s: %q, want %q", name, g, want)
				}
			}
		})
	}
}

// TestMismatchChangesTheFieldItNames: under a key carried in a form field (Twilio's
// IdempotencyKey), the mismatch check's change lands on the field it names, not on the key:
// placing the key moves the key field to the end of the form, which made an index picked
// before point at the key.
func TestMismatchChangesTheFieldItNames(t *testing.T) {
	form := &model.Schema{Type: model.TypeObject, Properties: []*model.Property{
		{Name: "IdempotencyKey", Required: true, Schema: &model.Schema{Type: model.TypeString}},
		{Name: "Total", Required: true, Schema: &model.Schema{Type: model.TypeInteger, Minimum: ptr(1.0), Maximum: ptr(1000.0)}},
	}}
	op := &model.Operation{ID: "CreatePayments", Method: http.MethodPost, Path: "/v1/Payments",
		Body: &model.RequestBody{Contents: []*model.Content{{MediaType: "application/x-www-form-urlencoded", Kind: model.ContentForm, Schema: form}}}}
	op.Settings.Key = model.KeySettings{Carrier: model.CarrierForm, Field: "IdempotencyKey"}
	g := newValues(1)
	req, err := buildRequest(op, g, &Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch, ok := pickChange(&opRun{op: op, g: g, req: req}, req)
	if !ok {
		t.Fatal("no change found")
	}
	keyed := req.keyed("k-form-key-0000000001")
	changed := keyed.clone()
	ch.apply(changed)
	values := func(r *request) map[string]string {
		m := map[string]string{}
		for _, f := range r.form {
			m[f.name] = f.value
		}
		return m
	}
	before, after := values(keyed), values(changed)
	if after["IdempotencyKey"] != "k-form-key-0000000001" {
		t.Errorf("the change %q overwrote the key: %v", ch.what, after)
	}
	diff := 0
	for name := range before {
		if before[name] != after[name] {
			diff++
			if "form field "+name != ch.what {
				t.Errorf("the change %q changed %s", ch.what, name)
			}
		}
	}
	if diff != 1 {
		t.Errorf("%d fields changed by %q, want 1: %v → %v", diff, ch.what, before, after)
	}
}
