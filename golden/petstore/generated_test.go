package petstore

// Hand-written tests of the code generated for testdata/specs/petstore.yaml: parameters of
// every location, schema checks, closed objects and wildcard exclusions.

import (
	"errors"
	"github.com/idemgen/idemgen/runtime/gen"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime/canonical"
)

const order = `{"petId":1,"quantity":1}`

// createPet decodes a createPet request with the X-Store-Id header store through the generated
// decode function, and returns it with its fingerprint.
func createPet(body, store string) (CreatePetRequest, canonical.Fingerprint, error) {
	r := httptest.NewRequest("POST", "/pets", nil)
	if store != "" {
		r.Header.Set("X-Store-Id", store)
	}
	return fptest.Decode(operationCreatePet(), decodeCreatePet, r, "application/json", []byte(body))
}

func TestPlaceOrderParams(t *testing.T) {
	r := httptest.NewRequest("POST", "/stores/42/orders?include=pet,store&limit=7&ids=3%7C5", nil)
	r.SetPathValue("storeId", "42")
	req, _, err := fptest.Decode(operationPlaceOrder(), decodePlaceOrder, r, "application/json", []byte(order))
	if err != nil {
		t.Fatal(err)
	}
	p := req.Params
	if p.StoreID != 42 || len(p.Include) != 2 || p.Include[1] != PlaceOrderParamsIncludeItemStore || p.Limit == nil || *p.Limit != 7 ||
		len(p.IDs) != 2 || p.IDs[1] != 5 {
		t.Fatalf("params = %+v", p)
	}
	// A bad parameter is 400 body-invalid whose pointer is /<in>/<name> and whose detail names
	// the parameter (not "invalid body at document root (byte 0)").
	for _, tt := range []struct{ store, query, at, detail string }{
		{"x", "", "/path/storeId", `path parameter "storeId": must be an integer`},
		{"0", "", "/path/storeId", `path parameter "storeId": must be at least 1`},
		{"1", "include=pet,owner", "/query/include", `query parameter "include": must be one of`},
		{"1", "limit=101", "/query/limit", `query parameter "limit": must be at most 100`},
		{"1", "limit=1&limit=2", "/query/limit", `query parameter "limit": given more than once`},
		{"1", "limit=9999999999999", "/query/limit", `query parameter "limit": must be an integer`},
		{"1", "ids=1,2", "/query/ids", `query parameter "ids": must be an integer`}, // pipeDelimited: "1,2" is one item
	} {
		r := httptest.NewRequest("POST", "/stores/"+tt.store+"/orders?"+tt.query, nil)
		r.SetPathValue("storeId", tt.store)
		var be *gen.BodyError
		_, _, err := fptest.Decode(operationPlaceOrder(), decodePlaceOrder, r, "application/json", []byte(order))
		if !errors.As(err, &be) || be.Pointer() != tt.at || !strings.HasPrefix(err.Error(), tt.detail) {
			t.Errorf("%s ?%s: err = %v, want *gen.BodyError at %s starting %q", tt.store, tt.query, err, tt.at, tt.detail)
		}
	}
}

func TestCreatePetChecks(t *testing.T) {
	ok := `{"name":"Rex","species":"dog","age":3,"weight_kg":12.5,"owner":{"email":"a@b","phone":null}}`
	if _, _, err := createPet(ok, "s1"); err != nil {
		t.Fatalf("valid pet: %v", err)
	}
	for _, body := range []string{
		`{"name":"Rex","species":"cow"}`,                             // enum
		`{"name":"","species":"dog"}`,                                // minLength
		`{"name":"Rex","species":"dog","age":201}`,                   // maximum
		`{"name":"Rex","species":"dog","age":2147483648}`,            // int32
		`{"name":"Rex","species":"dog","weight_kg":0}`,               // exclusive minimum
		`{"name":"Rex","species":"dog","owner":{"email":"a","x":1}}`, // closed object
		`{"name":"Rex","species":"dog","owner":{}}`,                  // required in nested object
		`{"name":"Rex","species":"dog","tags":[{}]}`,                 // required in array items
		`{"name":"Rex","species":"dog","attributes":{"a":"1"}}`,      // map value type
	} {
		if _, _, err := createPet(body, "s1"); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
}

func TestCreatePetFingerprint(t *testing.T) {
	fp := func(body, store string) canonical.Fingerprint {
		_, fp, err := createPet(body, store)
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	a := fp(`{"name":"Rex","species":"dog","tags":[{"label":"a","note":"x"}]}`, "s1")
	if b := fp(`{"name":"Rex","species":"dog","tags":[{"label":"a","note":"y"}]}`, "s1"); a != b {
		t.Error("/tags/*/note is excluded but changed the fingerprint")
	}
	if c := fp(`{"name":"Rex","species":"dog","tags":[{"label":"b","note":"x"}]}`, "s1"); a == c {
		t.Error("a tag label change kept the fingerprint")
	}
	if d := fp(`{"name":"Rex","species":"dog","tags":[{"label":"a","note":"x"}]}`, "s2"); a == d {
		t.Error("fingerprint.headers X-Store-Id is not part of the fingerprint")
	}
}

func TestTypedAdditionalProperties(t *testing.T) {
	base := `{"name":"Rex","species":"dog","preferences":`
	req, _, err := createPet(base+`{"food":"fish","walks":2,"naps":5}}`, "s1")
	if err != nil {
		t.Fatal(err)
	}
	v := req.Body
	if v.Preferences == nil || v.Preferences.AdditionalProperties["naps"] != 5 {
		t.Fatalf("preferences = %+v", v.Preferences)
	}
	for _, bad := range []string{`{"food":"fish","walks":-1}}`, `{"food":"fish","walks":"2"}}`, `{"food":"fish","walks":1,"walks":2}}`} {
		if _, _, err := createPet(base+bad, "s1"); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	fp := func(body string) canonical.Fingerprint {
		_, fp, err := createPet(body, "s1")
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	got := string(appendCanonicalPreferences(nil, v.Preferences))
	if want := `{"food":"fish","naps":5,"walks":2}`; got != want {
		t.Errorf("canonical form %s, want %s", got, want)
	}
	if fp(base+`{"walks":2,"food":"fish","naps":5}}`) != fp(base+`{"naps":5,"food":"fish","walks":2}}`) {
		t.Error("member order changed the fingerprint")
	}
	if fp(base+`{"food":"fish","naps":5}}`) == fp(base+`{"food":"fish","naps":6}}`) {
		t.Error("an additional member's value did not change the fingerprint")
	}
}
