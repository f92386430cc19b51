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
	"v1:6e79023f6a963db6115d0d4b7de127bff7db9c086f512259f06a2016d7571894",                           // 0 createPet
	"v1:b0565ebb763cd8a42c59b7441412299a6f01df1f904bef7e00cbeb466f103c22",                           // 1 createPet
	"v1:54e95800bcfafc9120bbf07b70258851ecac7bcebc19e9aa3e8b43c1bae79f86",                           // 2 createPet
	"v1:3d8b67830507ec21ee3f44fb95f672f188d8a193d5acd25a00b4e51555e2ac3c",                           // 3 createPet
	"refused at \"/header/X-Store-Id\": header parameter \"X-Store-Id\": missing",                   // 4 createPet
	"refused at \"\": invalid body at document root (byte 14): missing required member \"species\"", // 5 createPet
	"v1:c3bc0d873295ef94b19a6a1dcd98141ff66769721dda1b17df6e23e4a0a0248b",                           // 6 placeOrder
	"v1:c80d3d19de2699b4e166e261091f7736adbe90c0694e97353875491042c69e90",                           // 7 placeOrder
	"refused at \"/query/include\": query parameter \"include\": must be one of \"pet\", \"store\"", // 8 placeOrder
	"refused at \"/query/limit\": query parameter \"limit\": must be at most 100",                   // 9 placeOrder
}
