package nullable31

// Hand-written tests of the code generated for testdata/specs/nullable31.yaml: OpenAPI 3.1's
// nullable unions (anyOf/oneOf of one schema and {type: 'null'}) are typed optional values.
// Null and absent both leave the field nil, a value is checked against the member's schema,
// and the optional header parameters of that form are plain string and enum parameters.

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

func decode(t *testing.T, body string, header ...string) (CreateTransferRequest, string, error) {
	t.Helper()
	r := httptest.NewRequest("POST", "/v1/transfers", nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	v, fp, err := fptest.Decode(operationCreateTransfer(), decodeCreateTransfer, r, "application/json", []byte(body))
	return v, fp.String(), err
}

func TestNullableMembersAreTypedOptionals(t *testing.T) {
	v, _, err := decode(t, `{"amount":5,"memo":"rent","tags":["a"],"address":{"line1":"1 Main St","city":null},"origin":"web","fee":0.5}`)
	if err != nil {
		t.Fatal(err)
	}
	b := v.Body
	if b.Memo == nil || *b.Memo != "rent" || len(b.Tags) != 1 || b.Address == nil || b.Address.Line1 != "1 Main St" ||
		b.Address.City != nil || b.Origin == nil || *b.Origin != OriginWeb || b.Fee == nil || *b.Fee != 0.5 {
		t.Fatalf("decoded %+v", b)
	}
	nulls, fpNull, err := decode(t, `{"amount":5,"memo":null,"tags":null,"address":null,"origin":null,"fee":null}`)
	if err != nil {
		t.Fatalf("null members must decode: %v", err)
	}
	if nb := nulls.Body; nb.Memo != nil || nb.Tags != nil || nb.Address != nil || nb.Origin != nil || nb.Fee != nil {
		t.Fatalf("null members decoded as %+v", nb)
	}
	_, fpAbsent, err := decode(t, `{"amount":5}`)
	if err != nil {
		t.Fatal(err)
	}
	if fpNull != fpAbsent {
		t.Errorf("null and absent members are the same request to the handler, but fingerprint apart: %s, %s", fpNull, fpAbsent)
	}
}

func TestNullableMembersKeepTheirSchema(t *testing.T) {
	for body, want := range map[string]string{
		`{"amount":5,"memo":"` + strings.Repeat("x", 141) + `"}`: "/memo",
		`{"amount":5,"origin":"fax"}`:                            "/origin",
		`{"amount":5,"fee":-1}`:                                  "/fee",
		`{"amount":5,"address":{"city":"x"}}`:                    "line1",
		`{"amount":5,"memo":7}`:                                  "/memo",
	} {
		if _, _, err := decode(t, body); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal naming %s", body, err, want)
		}
	}
}

func TestNullableHeaderParameters(t *testing.T) {
	v, _, err := decode(t, `{"amount":5}`, "X-Trace-Id", "t-1", "X-Request-Origin", "mobile")
	if err != nil {
		t.Fatal(err)
	}
	if v.Params.XTraceID == nil || *v.Params.XTraceID != "t-1" || v.Params.XRequestOrigin == nil || *v.Params.XRequestOrigin != OriginMobile {
		t.Fatalf("params %+v", v.Params)
	}
	if _, _, err := decode(t, `{"amount":5}`, "X-Request-Origin", "fax"); err == nil {
		t.Error("an origin outside the enum was accepted")
	}
}
