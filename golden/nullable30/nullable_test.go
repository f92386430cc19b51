package nullable30

// Hand-written tests of the code generated for testdata/specs/nullable30.yaml: a $ref written
// with a sibling nullable: true accepts null (the referenced type, optional), and still checks
// a value against the referenced schema.

import (
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

func TestRefWithSiblingNullable(t *testing.T) {
	decode := func(body string) (CreateOrderRequest, error) {
		r := httptest.NewRequest("POST", "/v1/orders", nil)
		v, _, err := fptest.Decode(operationCreateOrder(), decodeCreateOrder, r, "application/json", []byte(body))
		return v, err
	}
	v, err := decode(`{"amount":1,"shipping":null,"status":null}`)
	if err != nil {
		t.Fatalf("null for a nullable $ref must decode: %v", err)
	}
	// shipping is required and nullable (two states: nil is null); status is optional and
	// nullable (three states: nil absent, Null, or a value).
	if v.Body.Shipping != nil || v.Body.Status == nil || !v.Body.Status.Null {
		t.Fatalf("decoded %+v", v.Body)
	}
	v, err = decode(`{"amount":1,"shipping":null}`)
	if err != nil || v.Body.Status != nil {
		t.Fatalf("an absent status decoded as %+v, %v", v.Body, err)
	}
	v, err = decode(`{"amount":1,"shipping":{"line1":"x"},"status":"open"}`)
	if err != nil || v.Body.Shipping == nil || v.Body.Shipping.Line1 == nil || *v.Body.Shipping.Line1 != "x" || v.Body.Status == nil || v.Body.Status.Value != StatusOpen {
		t.Fatalf("decoded %+v, %v", v.Body, err)
	}
	if _, err := decode(`{"amount":1,"shipping":null,"status":"pending"}`); err == nil {
		t.Error("a status outside the enum was accepted")
	}
	if _, err := decode(`{"amount":1}`); err == nil {
		t.Error("shipping is required (nullable, but required): its absence was accepted")
	}
}
