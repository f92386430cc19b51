package bodykey

// The fingerprint corpus of createPayout: each request with the fingerprint the generated code
// computes for it, recorded from the generator before its decode functions were merged (so a
// change of framing or canonical form fails here).

import (
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

const jsonAPI = "application/vnd.api+json"

var corpus = []fptest.Request{
	{Op: "createPayout", Target: "/payouts", MediaType: jsonAPI, Body: `{"data":{"type":"payout","attributes":{"idempotencyKey":"k1","amount":5,"currency":"EUR"}}}`},
	{Op: "createPayout", Target: "/payouts", MediaType: jsonAPI, Body: `{"data":{"attributes":{"currency":"EUR","amount":5,"idempotencyKey":"k2"},"type":"payout"}}`},
	{Op: "createPayout", Target: "/payouts", MediaType: jsonAPI, Body: `{"data":{"attributes":{"amount":5}}}`},
	{Op: "createPayout", Target: "/payouts", MediaType: jsonAPI, Body: `{"data":{"attributes":{"idempotencyKey":"k"}}}`},
}

func TestFingerprintCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"createPayout": fptest.Run(operationCreatePayout(), decodeCreatePayout),
	}))
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v1:52ad59515de1971d1e29ac90c5b6584b18f33d1c10a9f7ad6bc2d289b0aff712",                                             // 0 createPayout
	"v1:52ad59515de1971d1e29ac90c5b6584b18f33d1c10a9f7ad6bc2d289b0aff712",                                             // 1 createPayout
	"v1:0986faef7825ba3d4074aa8a445de385084ecc01ee09d14e5be3023943e689e2",                                             // 2 createPayout
	"refused at \"/data/attributes\": invalid body at /data/attributes (byte 44): missing required member \"amount\"", // 3 createPayout
}
