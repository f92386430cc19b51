package form

// Hand-written tests of the code generated for testdata/specs/form.yaml: a form-carried key,
// bracketed names, one operation with JSON and form bodies, and a raw body.

import (
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/internal/fptest"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
)

func TestFormKeyAndBracketedNames(t *testing.T) {
	decode := func(body string) (CreateCustomerRequest, canonical.Fingerprint, error) {
		return fptest.Decode(operationCreateCustomer(), decodeCreateCustomer, httptest.NewRequest("POST", "/v1/customers", nil), formType, []byte(body))
	}
	body := "email=a%40b.example&metadata%5Border%5D=42&idempotency_key=key-0001-aaaaaaaaaaaa&tax_exempt=none&client_ip=10.0.0.1"
	v, _, err := decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if v.Body.Email != "a@b.example" || v.Body.MetadataOrder == nil || *v.Body.MetadataOrder != "42" || v.Body.IdempotencyKey == nil {
		t.Fatalf("decoded %+v", v)
	}
	fp := func(body string) canonical.Fingerprint {
		_, fp, err := decode(body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return fp
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
		if _, _, err := decode(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// The form-carried key reaches the runtime.
	var in gen.Input
	in.Reset(httptest.NewRequest("POST", "/v1/customers", nil), []byte(body), formType, formType, nil, nil)
	if _, err := decodeCreateCustomer(&in); err != nil {
		t.Fatal(err)
	}
	if k, ok := in.BodyKey(); k != "key-0001-aaaaaaaaaaaa" || !ok {
		t.Errorf("body key %q, %v", k, ok)
	}
}

func TestOneOperationTwoMediaTypes(t *testing.T) {
	decode := func(mt, body string) (CreateNoteRequest, canonical.Fingerprint) {
		v, fp, err := fptest.Decode(operationCreateNote(), decodeCreateNote, httptest.NewRequest("POST", "/v1/notes", nil), mt, []byte(body))
		if err != nil {
			t.Fatalf("%s %s: %v", mt, body, err)
		}
		return v, fp
	}
	j, a := decode("application/json", `{"text":"hi","pinned":true}`)
	f, b := decode(formType, `text=hi&pinned=true`)
	if j.Body.Text != f.Body.Text || *j.Body.Pinned != *f.Body.Pinned {
		t.Errorf("JSON %+v and form %+v decode differently", j, f)
	}
	if a == b {
		t.Error("the media type is not part of the fingerprint")
	}
	// The body is optional: absent differs from an empty object.
	if _, absent := decode("", ""); absent == func() canonical.Fingerprint { _, fp := decode("application/json", `{"text":""}`); return fp }() {
		t.Error("absent body fingerprints like a present one")
	}
	// A media type the operation admits (here by a range) but has no decoder for is refused.
	var in gen.Input
	in.Reset(httptest.NewRequest("POST", "/v1/notes", nil), []byte("x"), "text/plain", "text/*", nil, nil)
	if _, err := decodeCreateNote(&in); err == nil || err.Error() != "no decoder for media type text/plain" {
		t.Errorf("undeclared media type: %v", err)
	}
}

func TestRawBodyIsByteExact(t *testing.T) {
	fp := func(body string) canonical.Fingerprint {
		v, fp, err := fptest.Decode(operationUploadFile(), decodeUploadFile, httptest.NewRequest("POST", "/v1/files", nil), "application/octet-stream", []byte(body))
		if err != nil || string(v.Body) != body {
			t.Fatalf("%q: body %q, %v", body, v.Body, err)
		}
		return fp
	}
	if fp("abc") == fp("abd") {
		t.Error("raw body change kept the fingerprint")
	}
}
