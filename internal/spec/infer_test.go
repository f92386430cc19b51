package spec

import (
	"testing"

	"github.com/idemgen/idemgen/internal/model"
)

// TestInferenceRules pins what --infer takes as a key in testdata/specs/infer/rules.yaml (the
// rules and their evidence are in docs/cli.md): the OASIS and AIP-155 standards, vendor header
// spellings; not a request_id without evidence, nor a field that names another request's key;
// other spellings are a warning only.
func TestInferenceRules(t *testing.T) {
	res := load(t, Options{Path: "../../testdata/specs/infer/rules.yaml", Infer: true})
	if errs := errorsOf(res.Diags); len(errs) > 0 {
		t.Fatal(errs)
	}
	type key struct {
		carrier         model.Carrier
		name, firstSent string
		std             model.Standard
	}
	want := map[string]key{
		"createCall":   {model.CarrierHeader, "Repeatability-Request-ID", "Repeatability-First-Sent", model.StandardRepeatable},
		"createBook":   {model.CarrierBody, "/request_id", "", model.StandardAIP155},
		"ckoPayment":   {model.CarrierHeader, "Cko-Idempotency-Key", "", model.StandardIdempotencyKey},
		"wiseTransfer": {model.CarrierHeader, "X-idempotence-uuid", "", model.StandardIdempotencyKey},
		"deleteSpoke":  {model.CarrierQuery, "requestId", "", model.StandardAIP155},
		"createLetter": {model.CarrierQuery, "idempotency_key", "", model.StandardIdempotencyKey},
	}
	got := map[string]key{}
	for _, op := range res.Doc.Operations {
		k := op.Settings.Key
		name := k.Header
		switch k.Carrier {
		case model.CarrierBody:
			name = k.Pointer
		case model.CarrierQuery:
			name = k.Query
		}
		got[op.ID] = key{k.Carrier, name, k.FirstSent, k.Standard}
	}
	if len(got) != len(want) {
		t.Errorf("inferred %v, want %v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %+v, want %+v", id, got[id], w)
		}
	}
	warned := map[string]string{}
	for _, d := range res.Diags.Sorted() {
		warned[d.Loc.Pointer] = d.Code
	}
	for ptr, code := range map[string]string{"/paths/~1orders/post": "possible-idempotency-key", "/paths/~1tokens/post": "possible-idempotency-key"} {
		if warned[ptr] != code {
			t.Errorf("%s: %q, want %s", ptr, warned[ptr], code)
		}
	}
	for _, ptr := range []string{"/paths/~1payments~1cancel/post", "/paths/~1webhooks~1replay/post", "/paths/~1v1~1spokes~1{spoke}/patch"} {
		if c, ok := warned[ptr]; ok {
			t.Errorf("%s: unexpected %s", ptr, c)
		}
	}
}
