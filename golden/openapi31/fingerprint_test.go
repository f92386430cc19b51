package openapi31

// The fingerprint corpus of postEntry: each request with the fingerprint the generated code
// computes for it, recorded from the generator before its decode functions were merged (so a
// change of framing or canonical form fails here).

import (
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

var corpus = []fptest.Request{
	{Op: "postEntry", Target: "/v2/entries", MediaType: "application/json", Body: `{"amount":1,"account":"a"}`},
	{Op: "postEntry", Target: "/v2/entries", MediaType: "application/json", Body: `{"amount":1,"account":"a","memo":null,"rate":1.5,` +
		`"counterparty":{"iban":"X","b":[1]},"labels":["x"],"extra":{"z":1,"a":2},"priority":2,"ratio":0.5,"confirmed":true,` +
		`"code":"one","ref":7,"tag":null,"reference":"ABC-12","context":{"trace":"t"},"more":true}`},
	{Op: "postEntry", Target: "/v2/entries", MediaType: "application/json", Body: `{"more":true,"amount":1,"account":"a","memo":null,"rate":1.50,` +
		`"counterparty":{"b":[1],"iban":"X"},"labels":["x"],"extra":{"a":2,"z":1},"priority":2,"ratio":5e-1,"confirmed":true,` +
		`"code":"one","ref":7,"tag":null,"reference":"ABC-12","context":{"trace":"other"}}`},
	{Op: "postEntry", Target: "/v2/entries", MediaType: "application/json", Body: `{"amount":1,"account":"a","reference":"abc-1"}`},
	{Op: "postEntry", Target: "/v2/entries", MediaType: "application/json", Body: `{"amount":1,"account":"a","ref":1.5}`},
	{Op: "postEntry", Target: "/v2/entries", MediaType: "application/json", Body: `{"amount":1,"account":"a","priority":3}`},
	{Op: "postEntry", Target: "/v2/entries", MediaType: "application/json", Body: `{"amount":1,"account":"a","code":2}`},
	{Op: "postEntry", Target: "/v2/entries", MediaType: "application/json", Body: `{"amount":1,"account":"a","confirmed":false}`},
}

func TestFingerprintCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"postEntry": fptest.Run(operationPostEntry(), decodePostEntry),
	}))
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v2:bb22bb0c822f03b29e96c7d7687af3537f891cbf015b627f27fe273a8748bdea",                                           // 0 postEntry
	"v2:d6b52adf4b8cf16a2a7bb712d90ca29aae4e4c9f564034326f1e175672e9b788",                                           // 1 postEntry
	"v2:d6b52adf4b8cf16a2a7bb712d90ca29aae4e4c9f564034326f1e175672e9b788",                                           // 2 postEntry
	"refused at \"/reference\": invalid body at /reference (byte 45): must match the pattern \"^[A-Z]{3}-\\\\d+$\"", // 3 postEntry
	"refused at \"/ref\": invalid body at /ref (byte 35): must be of type string or integer",                        // 4 postEntry
	"refused at \"/priority\": invalid body at /priority (byte 38): must be one of 1, 2",                            // 5 postEntry
	"refused at \"/code\": invalid body at /code (byte 34): must be one of 1, \"one\", null",                        // 6 postEntry
	"refused at \"/confirmed\": invalid body at /confirmed (byte 43): must be true",                                 // 7 postEntry
}
