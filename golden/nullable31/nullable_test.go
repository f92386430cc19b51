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
	v, fpValue, err := decode(t, `{"amount":5,"memo":"rent","tags":["a"],"address":{"line1":"1 Main St","city":null},"origin":"web","fee":0.5}`)
	if err != nil {
		t.Fatal(err)
	}
	b := v.Body
	if b.Memo == nil || b.Memo.Null || b.Memo.Value != "rent" || b.Tags == nil || len(b.Tags.Value) != 1 ||
		b.Address == nil || b.Address.Null || b.Address.Value.Line1 != "1 Main St" ||
		b.Address.Value.City == nil || !b.Address.Value.City.Null ||
		b.Origin == nil || b.Origin.Value != OriginWeb || b.Fee == nil || b.Fee.Value != 0.5 {
		t.Fatalf("decoded %+v", b)
	}
	nulls, fpNull, err := decode(t, `{"amount":5,"memo":null,"tags":null,"address":null,"origin":null,"fee":null}`)
	if err != nil {
		t.Fatalf("null members must decode: %v", err)
	}
	for name, n := range map[string]bool{"memo": nulls.Body.Memo != nil && nulls.Body.Memo.Null,
		"tags": nulls.Body.Tags != nil && nulls.Body.Tags.Null, "address": nulls.Body.Address != nil && nulls.Body.Address.Null,
		"origin": nulls.Body.Origin != nil && nulls.Body.Origin.Null, "fee": nulls.Body.Fee != nil && nulls.Body.Fee.Null} {
		if !n {
			t.Errorf("%s: null decoded as %+v, want Null", name, nulls.Body)
		}
	}
	absent, fpAbsent, err := decode(t, `{"amount":5}`)
	if err != nil {
		t.Fatal(err)
	}
	if ab := absent.Body; ab.Memo != nil || ab.Tags != nil || ab.Address != nil || ab.Origin != nil || ab.Fee != nil {
		t.Fatalf("absent members decoded as %+v, want nil", ab)
	}
	if fpNull == fpAbsent || fpNull == fpValue {
		t.Errorf("null, absent and a value are three requests to the handler, but fingerprint alike: %s, %s, %s", fpNull, fpAbsent, fpValue)
	}
	// One member at a time: {"memo": null} is not {}, nor {"memo": ""}.
	_, fpMemoNull, _ := decode(t, `{"amount":5,"memo":null}`)
	_, fpMemoEmpty, _ := decode(t, `{"amount":5,"memo":""}`)
	if fpMemoNull == fpAbsent || fpMemoNull == fpMemoEmpty {
		t.Errorf("memo null fingerprints as absent or as the empty string: %s, %s, %s", fpMemoNull, fpAbsent, fpMemoEmpty)
	}
	// Nested: the address's city null is not its city absent.
	_, fpCityNull, _ := decode(t, `{"amount":5,"address":{"line1":"x","city":null}}`)
	_, fpCityAbsent, _ := decode(t, `{"amount":5,"address":{"line1":"x"}}`)
	if fpCityNull == fpCityAbsent {
		t.Errorf("a nested null member fingerprints as absent: %s", fpCityNull)
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
