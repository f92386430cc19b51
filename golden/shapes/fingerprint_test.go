package shapes

// The fingerprint corpus of the shapes operations: each request with the fingerprint the
// generated code computes for it, recorded from the generator before its decode functions were
// merged, whose fingerprints gen.Input.Begin reproduced (so a change of framing or canonical form
// fails here).

import (
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

const js = "application/json"

var corpus = []fptest.Request{
	{Op: "kitchenSink", Target: "/kitchen", MediaType: js, Body: `{"id":"i","maybe":null,"grid":[]}`},
	{Op: "kitchenSink", Target: "/kitchen", MediaType: js, Body: `{"id":"i","maybe":5,"grid":[[{"v":1,"note":"n","x":1}],[]],` +
		`"matrix":[[1.5,2],[]],"byName":{"b":{"count":2,"stamp":"s","q":[]},"a":{"count":1}},"nestedMaps":{"m":{"t":true,"f":false}},` +
		`"mapOfLists":{"k":["x","y"]},"colors":["red","green"],"nullableList":[1,null,3],"nullableObject":{"a":"x","b":1},` +
		`"closedEmpty":{},"freeForm":{"z":1,"a":[null]},"anything":{"k":{"b":1,"a":2}},"tags":{"t":"v"},"level":"high","zz":1}`},
	{Op: "kitchenSink", Target: "/kitchen", MediaType: js, Body: `{"zz":1,"id":"i","maybe":5,"grid":[[{"v":1,"note":"other","x":1}],[]],` +
		`"matrix":[[1.50,2.0],[]],"byName":{"a":{"count":1,"stamp":"t"},"b":{"q":[],"count":2}},"nestedMaps":{"m":{"f":false,"t":true}},` +
		`"mapOfLists":{"k":["x","y"]},"colors":["red","green"],"nullableList":[1,null,3],"nullableObject":{"b":1,"a":"x"},` +
		`"closedEmpty":{},"freeForm":{"a":[null],"z":1},"anything":{"k":{"a":2,"b":1}},"tags":{"t":"other"},"level":"high"}`},
	{Op: "kitchenSink", Target: "/kitchen", MediaType: js, Body: `{"id":"i","maybe":null,"grid":[],"nullableList":null,"nullableObject":null,"level":null,"colors":[]}`},
	{Op: "kitchenSink", Target: "/kitchen", MediaType: js, Body: `{"id":"i","maybe":null,"grid":[],"closedEmpty":{"a":1}}`},
	{Op: "batch", Target: "/batch", MediaType: js, Body: `[{"sku":"a","qty":2},{"sku":"b","x":null}]`},
	{Op: "batch", Target: "/batch", MediaType: js, Body: `[]`},
	{Op: "batch", Target: "/batch", MediaType: js, Body: `[{"sku":""}]`},
	{Op: "putSettings", Method: "PUT", Target: "/settings", MediaType: js, Body: `{"b":1,"a":10}`},
	{Op: "putSettings", Method: "PUT", Target: "/settings"},
	{Op: "putSettings", Method: "PUT", Target: "/settings", MediaType: js, Body: `{"a":11}`},
	{Op: "patchChoice", Method: "PATCH", Target: "/choice", MediaType: "application/merge-patch+json", Body: `{"sku":"a","qty":1.0}`},
	{Op: "postFree", Target: "/free", MediaType: js, Body: `[1, {"b":"\u00e9","a":1e2}]`},
}

func TestFingerprintCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"kitchenSink": fptest.Run(operationKitchenSink(), decodeKitchenSink),
		"batch":       fptest.Run(operationBatch(), decodeBatch),
		"putSettings": fptest.Run(operationPutSettings(), decodePutSettings),
		"patchChoice": fptest.Run(operationPatchChoice(), decodePatchChoice),
		"postFree":    fptest.Run(operationPostFree(), decodePostFree),
	}))
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v1:59baba7a6759672ee1bf353fe87f6e6be856c3dffd35fac083c164ab06dcdda2",                                       // 0 kitchenSink
	"v1:662c9555caa8294e4d6517b9ccffb6533f03e7538b7d2b7ee5221848abfe7010",                                       // 1 kitchenSink
	"v1:662c9555caa8294e4d6517b9ccffb6533f03e7538b7d2b7ee5221848abfe7010",                                       // 2 kitchenSink
	"refused at \"/colors\": invalid body at /colors (byte 99): must have at least 1 items",                     // 3 kitchenSink
	"refused at \"/closedEmpty/a\": invalid body at /closedEmpty/a (byte 48): member not allowed by the schema", // 4 kitchenSink
	"v1:5251e4506e1fabe07a36d4c4668efee99fc5e13edbcf0e20d2c0b0f69bd53939",                                       // 5 batch
	"v1:6ab3faff52edbe3af930edca71e171b84667c767f1f5ed494b63980703f4bdf2",                                       // 6 batch
	"refused at \"/0/sku\": invalid body at /0/sku (byte 10): length must be at least 1",                        // 7 batch
	"v1:ccff8feb37c630c81900377b3c5a0b9a48570c83aef418e9a3bcaf768e51953e",                                       // 8 putSettings
	"v1:adde6d458db7a021b0db1d1d2e040d291c9a8251b943f4ef9fd89eb2725ff5db",                                       // 9 putSettings
	"refused at \"/a\": invalid body at /a (byte 7): must be at most 10",                                        // 10 putSettings
	"v1:9d943da7c67589a195439d17e3cd2cf7e1ad930f397193785d35ea580ae30feb",                                       // 11 patchChoice
	"v1:642d45d175d752e47a1a865f9058ab68fd884d5b9f61c96d631e3cd93c957546",                                       // 12 postFree
}
