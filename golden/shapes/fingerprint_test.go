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
	"v2:6a111d487617b5fb95fc6b0d786a6fde7135361e5b671e85b7760a5500756bbb",                                       // 0 kitchenSink
	"v2:32bf471bd297732cbdc74d500acc5eddfae52cd1658bd9f2eb4595767fff6ca6",                                       // 1 kitchenSink
	"v2:32bf471bd297732cbdc74d500acc5eddfae52cd1658bd9f2eb4595767fff6ca6",                                       // 2 kitchenSink
	"refused at \"/colors\": invalid body at /colors (byte 99): must have at least 1 items",                     // 3 kitchenSink
	"refused at \"/closedEmpty/a\": invalid body at /closedEmpty/a (byte 48): member not allowed by the schema", // 4 kitchenSink
	"v2:921164e33b7b4b300e5019aefa5feedbb896f77ac9971d95e65a147a1fb3af5d",                                       // 5 batch
	"v2:10e20c76a3b1c354be1352cd4adb703ff3ed04dfd142529dfee14174336b98a3",                                       // 6 batch
	"refused at \"/0/sku\": invalid body at /0/sku (byte 10): length must be at least 1",                        // 7 batch
	"v2:de7f9f2a907929a57f5b0972d85d376615f663f17978fe567c31ae82e589b37d",                                       // 8 putSettings
	"v2:9ff527089a80e78602217c615e83f46a2a27226d7a384b29d7b195b191116e6c",                                       // 9 putSettings
	"refused at \"/a\": invalid body at /a (byte 7): must be at most 10",                                        // 10 putSettings
	"v2:f942c406181549e7a3c6ff771da748e49a87e85896afe4ee1262940ff18f016b",                                       // 11 patchChoice
	"v2:8ad5629a51b3bbe6c810ced56377d7d297e7c93e346a8a0ab7f0dd8d17abc482",                                       // 12 postFree
}
