package petstore

// The fingerprint corpus of the petstore operations: each request with the fingerprint the
// generated code computes for it, recorded from the generator before its decode functions were
// merged, whose fingerprints gen.Input.Begin reproduced (so a change of framing or canonical form
// fails here).

import (
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

var corpus = []fptest.Request{
	{Op: "createPet", Target: "/pets", Header: []string{"X-Store-Id", "s1"}, MediaType: "application/json",
		Body: `{"name":"Rex","species":"dog"}`},
	{Op: "createPet", Target: "/pets?dry_run=true&other=1", Header: []string{"X-Store-Id", "s1", "X-Other", "y"}, MediaType: "application/json",
		Body: `{"zz":[1,{"b":2,"a":1.50}],"name":"R\u00e9x \"the\" dog","species":"guinea-pig","age":3,"weight_kg":12.5,"vaccinated":true,` +
			`"tags":[{"label":"a","note":"x","q":1},{"label":"b"}],"owner":{"email":"a@b","phone":null},"attributes":{"b":2,"a":-1},` +
			`"preferences":{"walks":2,"food":"fish","naps":5},"aa":null}`},
	{Op: "createPet", Target: "/pets?dry_run=true&other=2", Header: []string{"X-Store-Id", "s1"}, MediaType: "application/json",
		Body: `{"aa":null,"zz":[1,{"a":1.5,"b":2}],"name":"R\u00e9x \"the\" dog","species":"guinea-pig","age":3,"weight_kg":12.50,"vaccinated":true,` +
			`"tags":[{"label":"a","note":"changed","q":1},{"label":"b","note":"new"}],"owner":{"email":"a@b"},"attributes":{"a":-1,"b":2},` +
			`"preferences":{"food":"fish","naps":5,"walks":2}}`},
	{Op: "createPet", Target: "/pets?dry_run=false", Header: []string{"X-Store-Id", "s2"}, MediaType: "application/json",
		Body: `{"name":"Rex","species":"cat","tags":[],"attributes":{}}`},
	{Op: "createPet", Target: "/pets", MediaType: "application/json", Body: `{"name":"Rex","species":"dog"}`},
	{Op: "createPet", Target: "/pets", Header: []string{"X-Store-Id", "s1"}, MediaType: "application/json", Body: `{"name":"Rex"}`},
	{Op: "placeOrder", Target: "/stores/42/orders?ids=3|5&include=pet,store&limit=7", Path: map[string]string{"storeId": "42"},
		MediaType: "application/json", Body: `{"petId":1,"quantity":2}`},
	{Op: "placeOrder", Target: "/stores/7/orders?ids=1&ids=2|3&include=pet&x=1", Path: map[string]string{"storeId": "7"},
		MediaType: "application/json", Body: `{"status":"placed","petId":9007199254740993,"quantity":2,"shipDate":"2026-01-01","complete":false,"more":{}}`},
	{Op: "placeOrder", Target: "/stores/7/orders?include=", Path: map[string]string{"storeId": "7"},
		MediaType: "application/json", Body: `{"petId":1,"quantity":2}`},
	{Op: "placeOrder", Target: "/stores/7/orders?limit=101", Path: map[string]string{"storeId": "7"},
		MediaType: "application/json", Body: `{"petId":1,"quantity":2}`},
}

func TestFingerprintCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"createPet":  fptest.Run(operationCreatePet(), decodeCreatePet),
		"placeOrder": fptest.Run(operationPlaceOrder(), decodePlaceOrder),
	}))
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v2:e92d3ea4edddf44accc0a047afd249a9c000494867db0b8df12a558731b3fddb",                           // 0 createPet
	"v2:e6bbe81d4d227fa97f5cd96cb2ae0e25ae07d03e7dd4cb0fcf84e4474f827487",                           // 1 createPet
	"v2:1ed7e00db84402b413910d39525f708b1d34da71f0e691fcf74a330809fb4a31",                           // 2 createPet
	"v2:9cdbb3e079144ca4004e50b5617c123d01d4d61bfe78457fb4365dc362127dbe",                           // 3 createPet
	"refused at \"/header/X-Store-Id\": header parameter \"X-Store-Id\": missing",                   // 4 createPet
	"refused at \"\": invalid body at document root (byte 14): missing required member \"species\"", // 5 createPet
	"v2:ff00e54ffd8482f80487f39ff1301cfae494c8836fde12ab2284f1120795f9b0",                           // 6 placeOrder
	"v2:cfd220960dcac53f1a330673657e351de2a3909fcdd51bcd6a710aa8e6083314",                           // 7 placeOrder
	"refused at \"/query/include\": query parameter \"include\": must be one of \"pet\", \"store\"", // 8 placeOrder
	"refused at \"/query/limit\": query parameter \"limit\": must be at most 100",                   // 9 placeOrder
}
