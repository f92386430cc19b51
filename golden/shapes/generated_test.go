package shapes

// Hand-written tests of the code generated for testdata/specs/shapes.yaml: top-level array, map
// and oneOf bodies, nested arrays and maps, and exclusions through them with "*".

import (
	"github.com/idemgen/idemgen/internal/gentest"
	"testing"
)

func TestTopLevelBodies(t *testing.T) {
	b, err := decodeBatchJSON([]byte(`[{"sku":"a"},{"sku":"b","qty":2}]`))
	if err != nil || len(b) != 2 || b[1].Qty == nil || *b[1].Qty != 2 {
		t.Fatalf("batch: %+v %v", b, err)
	}
	if _, err := decodeBatchJSON([]byte(`[{"sku":""}]`)); err == nil {
		t.Error("minLength in array items not checked")
	}
	m, err := decodePutSettingsJSON([]byte(`{"a":1,"b":10}`))
	if err != nil || m["b"] != 10 {
		t.Fatalf("settings: %v %v", m, err)
	}
	for _, bad := range []string{`{"a":11}`, `{"a":1,"a":2}`, `[]`} {
		if _, err := decodePutSettingsJSON([]byte(bad)); err == nil {
			t.Errorf("settings %s accepted", bad)
		}
	}
	c, err := decodePatchChoiceJSON([]byte(` { "sku" : "a" , "x" : 1.50 } `))
	if err != nil || string(c) != `{"sku":"a","x":1.5}` {
		t.Fatalf("choice: %s %v", c, err)
	}
}

func TestKitchenSinkExclusions(t *testing.T) {
	fp := func(body string) [32]byte {
		_, err := decodeKitchenSinkJSON([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return gentest.Fingerprint(t, operationKitchenSink(), decodeKitchenSink, "", "application/json", body).Sum
	}
	a := fp(`{"id":"1","maybe":null,"grid":[[{"v":1,"note":"a"}]],"byName":{"k":{"count":1,"stamp":"t1"}},"tags":{"x":"1"}}`)
	b := fp(`{"grid":[[{"note":"b","v":1}]],"id":"1","maybe":null,"byName":{"k":{"stamp":"t2","count":1}},"tags":{"y":"2"}}`)
	if a != b {
		t.Error("excluded members (/grid/*/*/note, /byName/*/stamp, /tags/*) changed the fingerprint")
	}
	if c := fp(`{"id":"1","maybe":null,"grid":[[{"v":2,"note":"a"}]]}`); a == c {
		t.Error("a grid value did not change the fingerprint")
	}
	if fp(`{"id":"1","maybe":null,"grid":[]}`) == fp(`{"id":"1","maybe":7,"grid":[]}`) {
		t.Error("required nullable: null and 7 fingerprint alike")
	}
	if _, err := decodeKitchenSinkJSON([]byte(`{"id":"1","grid":[]}`)); err == nil {
		t.Error("a required nullable member may be null but not absent")
	}
	if _, err := decodeKitchenSinkJSON([]byte(`{"id":"1","maybe":1,"grid":[],"closedEmpty":{"a":1}}`)); err == nil {
		t.Error("closed empty object accepted a member")
	}
	if _, err := decodeKitchenSinkJSON([]byte(`{"id":"1","maybe":1,"grid":[],"colors":[]}`)); err == nil {
		t.Error("minItems not checked")
	}
}

func TestSchemalessJSONIsCanonical(t *testing.T) {
	fp := func(body string) [32]byte {
		return gentest.Fingerprint(t, operationPostFree(), decodePostFree, "", "application/json", body).Sum
	}
	if fp(`{"b":1,"a":[1.0,"x"]}`) != fp(`{ "a" : [1, "x"], "b" : 1e0 }`) {
		t.Error("equivalent JSON fingerprints differently")
	}
	if _, err := decodePostFreeJSON([]byte(`{"a":1,"a":2}`)); err == nil {
		t.Error("duplicate member accepted")
	}
}
