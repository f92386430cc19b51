package openapi31

// Hand-written tests of the code generated for testdata/specs/openapi31.yaml: 3.1 type arrays
// with "null", oneOf and schema-less members kept as canonical JSON, x-idempotency-ignore.

import (
	"net/http/httptest"
	"testing"
)

func TestNullableOneOfAndIgnore(t *testing.T) {
	v, err := decodePostEntryJSON([]byte(`{"amount":1,"account":"a","memo":null,"rate":null,"labels":null,"counterparty":{"iban":"X", "a": [1.0]},"extra":"1e2"}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Memo != nil || v.Rate != nil || v.Labels != nil {
		t.Errorf("nulls decoded as values: %+v", v)
	}
	if got := string(v.Counterparty); got != `{"a":[1],"iban":"X"}` {
		t.Errorf("oneOf member kept as %s, want its canonical form", got)
	}
	if _, err := decodePostEntryJSON([]byte(`{"amount":1,"account":null}`)); err == nil {
		t.Error("null for a non-nullable string accepted")
	}
	fp := func(body string) [32]byte {
		v, err := decodePostEntryJSON([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/v2/entries", nil)
		return fingerprintPostEntry(r, "application/json", []byte(body), &PostEntryParams{}, &v).Sum
	}
	a := fp(`{"amount":1,"account":"a","counterparty":{"iban":"X","b":2},"context":{"trace":"t1"}}`)
	if b := fp(`{"account":"a","amount":1,"counterparty":{"b":2.0,"iban":"X"},"context":{"trace":"t2"}}`); a != b {
		t.Error("canonical-equal oneOf values or an ignored member changed the fingerprint")
	}
	if c := fp(`{"amount":1,"account":"a","counterparty":"X"}`); a == c {
		t.Error("a different oneOf value kept the fingerprint")
	}
	// Absent and null are the same to the handler (both nil), so the same to the fingerprint.
	if fp(`{"amount":1,"account":"a"}`) != fp(`{"amount":1,"account":"a","memo":null}`) {
		t.Error("absent and null memo differ")
	}
}
