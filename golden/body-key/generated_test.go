package bodykey

// Hand-written tests of the code generated for testdata/specs/body-key.yaml: a key nested at
// /data/attributes/idempotencyKey is not required-checked and not fingerprinted, and the decode
// function reports it.

import (
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

func TestNestedBodyKey(t *testing.T) {
	decode := func(body string) (CreatePayoutRequest, [32]byte, error) {
		r := httptest.NewRequest("POST", "/payouts", nil)
		v, fp, err := fptest.Decode(operationCreatePayout(), decodeCreatePayout, r, "application/vnd.api+json", []byte(body))
		return v, fp.Sum, err
	}
	v, _, err := decode(`{"data":{"attributes":{"amount":5}}}`)
	if err != nil {
		t.Fatalf("a missing body key must decode (the runtime answers key-missing): %v", err)
	}
	if v.Body.Data.Attributes.IdempotencyKey != nil {
		t.Fatal("key present")
	}
	if _, _, err := decode(`{"data":{"attributes":{"idempotencyKey":"k"}}}`); err == nil {
		t.Error("missing amount accepted")
	}
	fp := func(body string) [32]byte {
		_, fp, err := decode(body)
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	a := fp(`{"data":{"attributes":{"idempotencyKey":"key-aaaaaaaaaaaaaaaa","amount":5}}}`)
	if b := fp(`{"data":{"attributes":{"amount":5,"idempotencyKey":"key-bbbbbbbbbbbbbbbb"}}}`); a != b {
		t.Error("the key changed the fingerprint")
	}
	if c := fp(`{"data":{"attributes":{"idempotencyKey":"key-aaaaaaaaaaaaaaaa","amount":6}}}`); a == c {
		t.Error("the amount did not change the fingerprint")
	}
	// The decode function reports the key to the runtime, present or not.
	for body, want := range map[string]string{
		`{"data":{"attributes":{"idempotencyKey":"key-aaaaaaaaaaaaaaaa","amount":5}}}`: "key-aaaaaaaaaaaaaaaa",
		`{"data":{"attributes":{"amount":5}}}`:                                         "",
	} {
		_, k, ok, err := fptest.BodyKey(operationCreatePayout(), decodeCreatePayout, httptest.NewRequest("POST", "/payouts", nil), "application/vnd.api+json", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if k != want || ok != (want != "") {
			t.Errorf("%s: body key %q, %v", body, k, ok)
		}
	}
}
