package form

// Hand-written tests of the code generated for testdata/specs/form.yaml: a form-carried key,
// bracketed names, one operation with JSON and form bodies, and a raw body.

import (
	"github.com/idemgen/idemgen/internal/gentest"
	"testing"
)

func TestFormKeyAndBracketedNames(t *testing.T) {
	body := "email=a%40b.example&metadata%5Border%5D=42&idempotency_key=key-0001-aaaaaaaaaaaa&tax_exempt=none&client_ip=10.0.0.1"
	v, err := decodeCreateCustomerForm([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if v.Email != "a@b.example" || v.MetadataOrder == nil || *v.MetadataOrder != "42" || v.IdempotencyKey == nil {
		t.Fatalf("decoded %+v", v)
	}
	fp := func(body string) [32]byte {
		_, err := decodeCreateCustomerForm([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return gentest.Fingerprint(t, operationCreateCustomer(), decodeCreateCustomer, "", "application/x-www-form-urlencoded", body).Sum
	}
	// The key and the excluded client_ip do not count; field order and encoding do not either.
	other := "client_ip=10.9.9.9&tax_exempt=none&metadata[order]=42&email=a@b.example&idempotency_key=key-0002-bbbbbbbbbbbb"
	if fp(body) != fp(other) {
		t.Error("key, excluded field, order or percent-encoding changed the fingerprint")
	}
	if fp(body) == fp("email=a%40b.example&metadata%5Border%5D=43") {
		t.Error("a bracketed field's value did not count")
	}
	for _, bad := range []string{"tax_exempt=none", "email=x&tax_exempt=maybe", "email=x&balance=1.5", "email=x&email=y"} {
		if _, err := decodeCreateCustomerForm([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestOneOperationTwoMediaTypes(t *testing.T) {
	j, err := decodeCreateNoteJSON([]byte(`{"text":"hi","pinned":true}`))
	if err != nil {
		t.Fatal(err)
	}
	f, err := decodeCreateNoteForm([]byte(`text=hi&pinned=true`))
	if err != nil {
		t.Fatal(err)
	}
	if j.Text != f.Text || *j.Pinned != *f.Pinned {
		t.Errorf("JSON %+v and form %+v decode differently", j, f)
	}
	a := gentest.Fingerprint(t, operationCreateNote(), decodeCreateNote, "", "application/json", `{"text":"hi","pinned":true}`)
	b := gentest.Fingerprint(t, operationCreateNote(), decodeCreateNote, "", "application/x-www-form-urlencoded", `text=hi&pinned=true`)
	if a == b {
		t.Error("the media type is not part of the fingerprint")
	}
	// The body is optional: absent differs from an empty object.
	if gentest.Fingerprint(t, operationCreateNote(), decodeCreateNote, "", "", "") == gentest.Fingerprint(t, operationCreateNote(), decodeCreateNote, "", "application/json", `{"text":""}`) {
		t.Error("absent body fingerprints like a present one")
	}
}

func TestRawBodyIsByteExact(t *testing.T) {
	a := gentest.Fingerprint(t, operationUploadFile(), decodeUploadFile, "", "application/octet-stream", "abc")
	if b := gentest.Fingerprint(t, operationUploadFile(), decodeUploadFile, "", "application/octet-stream", "abd"); a == b {
		t.Error("raw body change kept the fingerprint")
	}
}
