package shapes

// Hand-written tests of the code generated for testdata/specs/shapes.yaml: top-level array, map
// and oneOf bodies, nested arrays and maps, and exclusions through them with "*".

import (
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/gen"
)

// decodeBody decodes a JSON body through an operation's generated decode function and returns
// the body and the request's fingerprint.
func decodeBody[B any](op *runtime.Operation, decode func(*gen.Input) (B, error), body string) (B, [32]byte, error) {
	r, fp, err := fptest.Decode(op, decode, httptest.NewRequest(op.Method, op.Path, nil), "application/json", []byte(body))
	return r, fp.Sum, err
}

func TestTopLevelBodies(t *testing.T) {
	r, _, err := decodeBody(operationBatch(), decodeBatch, `[{"sku":"a"},{"sku":"b","qty":2}]`)
	b := r.Body
	if err != nil || len(b) != 2 || b[1].Qty == nil || *b[1].Qty != 2 {
		t.Fatalf("batch: %+v %v", b, err)
	}
	if _, _, err := decodeBody(operationBatch(), decodeBatch, `[{"sku":""}]`); err == nil {
		t.Error("minLength in array items not checked")
	}
	s, _, err := decodeBody(operationPutSettings(), decodePutSettings, `{"a":1,"b":10}`)
	m := s.Body
	if err != nil || m["b"] != 10 {
		t.Fatalf("settings: %v %v", m, err)
	}
	for _, bad := range []string{`{"a":11}`, `{"a":1,"a":2}`, `[]`} {
		if _, _, err := decodeBody(operationPutSettings(), decodePutSettings, bad); err == nil {
			t.Errorf("settings %s accepted", bad)
		}
	}
	ch, _, err := decodeBody(operationPatchChoice(), decodePatchChoice, ` { "sku" : "a" , "x" : 1.50 } `)
	c := ch.Body
	if err != nil || string(c) != `{"sku":"a","x":1.5}` {
		t.Fatalf("choice: %s %v", c, err)
	}
}

func TestKitchenSinkExclusions(t *testing.T) {
	fp := func(body string) [32]byte {
		_, fp, err := decodeBody(operationKitchenSink(), decodeKitchenSink, body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return fp
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
	if _, _, err := decodeBody(operationKitchenSink(), decodeKitchenSink, `{"id":"1","grid":[]}`); err == nil {
		t.Error("a required nullable member may be null but not absent")
	}
	if _, _, err := decodeBody(operationKitchenSink(), decodeKitchenSink, `{"id":"1","maybe":1,"grid":[],"closedEmpty":{"a":1}}`); err == nil {
		t.Error("closed empty object accepted a member")
	}
	if _, _, err := decodeBody(operationKitchenSink(), decodeKitchenSink, `{"id":"1","maybe":1,"grid":[],"colors":[]}`); err == nil {
		t.Error("minItems not checked")
	}
}

func TestSchemalessJSONIsCanonical(t *testing.T) {
	fp := func(body string) [32]byte {
		_, fp, err := decodeBody(operationPostFree(), decodePostFree, body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return fp
	}
	if fp(`{"b":1,"a":[1.0,"x"]}`) != fp(`{ "a" : [1, "x"], "b" : 1e0 }`) {
		t.Error("equivalent JSON fingerprints differently")
	}
	if _, _, err := decodeBody(operationPostFree(), decodePostFree, `{"a":1,"a":2}`); err == nil {
		t.Error("duplicate member accepted")
	}
}
