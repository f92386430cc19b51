package bodykey

// Hand-written tests of the code generated for testdata/specs/body-key.yaml: a key nested at
// /data/attributes/idempotencyKey is not required-checked and not fingerprinted.

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime"
)

func TestNestedBodyKey(t *testing.T) {
	v, err := decodeCreatePayoutJSON([]byte(`{"data":{"attributes":{"amount":5}}}`))
	if err != nil {
		t.Fatalf("a missing body key must decode (the runtime answers key-missing): %v", err)
	}
	if v.Data.Attributes.IdempotencyKey != nil {
		t.Fatal("key present")
	}
	if _, err := decodeCreatePayoutJSON([]byte(`{"data":{"attributes":{"idempotencyKey":"k"}}}`)); err == nil {
		t.Error("missing amount accepted")
	}
	fp := func(body string) [32]byte {
		r := httptest.NewRequest("POST", "/payouts", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/vnd.api+json")
		_, fp, err := runtime.Fingerprint(operationCreatePayout(), decodeCreatePayout, r)
		if err != nil {
			t.Fatal(err)
		}
		return fp.Sum
	}
	a := fp(`{"data":{"attributes":{"idempotencyKey":"key-aaaaaaaaaaaaaaaa","amount":5}}}`)
	if b := fp(`{"data":{"attributes":{"amount":5,"idempotencyKey":"key-bbbbbbbbbbbbbbbb"}}}`); a != b {
		t.Error("the key changed the fingerprint")
	}
	if c := fp(`{"data":{"attributes":{"idempotencyKey":"key-aaaaaaaaaaaaaaaa","amount":6}}}`); a == c {
		t.Error("the amount did not change the fingerprint")
	}
}
