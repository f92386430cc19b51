package openapi31

// Hand-written tests of the code generated for testdata/specs/openapi31.yaml: 3.1 type arrays
// with "null", oneOf and schema-less members kept as canonical JSON, x-idempotency-ignore.

import (
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

// decodeBody decodes a JSON body of postEntry through the generated decode function and returns
// the body and the request's fingerprint.
func decodeBody(body string) (PostEntryBody, [32]byte, error) {
	r, fp, err := fptest.Decode(operationPostEntry(), decodePostEntry, httptest.NewRequest("POST", "/v2/entries", nil), "application/json", []byte(body))
	return r.Body, fp.Sum, err
}

func TestNullableOneOfAndIgnore(t *testing.T) {
	v, _, err := decodeBody(`{"amount":1,"account":"a","memo":null,"rate":null,"labels":null,"counterparty":{"iban":"X", "a": [1.0]},"extra":"1e2"}`)
	if err != nil {
		t.Fatal(err)
	}
	if v.Memo == nil || !v.Memo.Null || v.Rate == nil || !v.Rate.Null || v.Labels == nil || !v.Labels.Null {
		t.Errorf("nulls decoded as values or as absent: %+v", v)
	}
	if got := string(v.Counterparty); got != `{"a":[1],"iban":"X"}` {
		t.Errorf("oneOf member kept as %s, want its canonical form", got)
	}
	if _, _, err := decodeBody(`{"amount":1,"account":null}`); err == nil {
		t.Error("null for a non-nullable string accepted")
	}
	fp := func(body string) [32]byte {
		_, fp, err := decodeBody(body)
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	a := fp(`{"amount":1,"account":"a","counterparty":{"iban":"X","b":2},"context":{"trace":"t1"}}`)
	if b := fp(`{"account":"a","amount":1,"counterparty":{"b":2.0,"iban":"X"},"context":{"trace":"t2"}}`); a != b {
		t.Error("canonical-equal oneOf values or an ignored member changed the fingerprint")
	}
	if c := fp(`{"amount":1,"account":"a","counterparty":"X"}`); a == c {
		t.Error("a different oneOf value kept the fingerprint")
	}
	// Absent and null are different requests to the handler (nil and Null), so to the
	// fingerprint too.
	if fp(`{"amount":1,"account":"a"}`) == fp(`{"amount":1,"account":"a","memo":null}`) {
		t.Error("absent and null memo fingerprint alike")
	}
}

// TestEnumsTypesAndPatterns: integer, number, boolean and mixed enums, the JSON types of a
// multi-type value and a string pattern are checked by the decoder (400 body-invalid), not
// just string enums.
func TestEnumsTypesAndPatterns(t *testing.T) {
	for _, tt := range []struct {
		member string
		ok     bool
	}{
		{`"priority":2`, true},
		{`"priority":3`, false},
		{`"ratio":0.5`, true},
		{`"ratio":1.0`, true},
		{`"ratio":0.25`, false},
		{`"confirmed":true`, true},
		{`"confirmed":false`, false},
		{`"code":1`, true},
		{`"code":"one"`, true},
		{`"code":null`, true},
		{`"code":"two"`, false},
		{`"code":true`, false},
		{`"ref":"x"`, true},
		{`"ref":-12`, true},
		{`"ref":1.0`, true}, // JSON Schema counts 1.0 as an integer
		{`"ref":1.5`, false},
		{`"ref":true`, false},
		{`"ref":null`, false},
		{`"ref":{}`, false},
		{`"tag":null`, true},
		{`"tag":[1]`, false},
		{`"reference":"ABC-12"`, true},
		{`"reference":"abc-12"`, false},
	} {
		_, _, err := decodeBody(`{"amount":1,"account":"a",` + tt.member + `}`)
		if (err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok=%v", tt.member, err, tt.ok)
		}
	}
}
