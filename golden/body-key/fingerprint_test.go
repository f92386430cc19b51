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
	"v2:999ddc3407567cf35582abcdfe6f8b407362d51455c1c357b77bb538ce27ed95",                                             // 0 createPayout
	"v2:999ddc3407567cf35582abcdfe6f8b407362d51455c1c357b77bb538ce27ed95",                                             // 1 createPayout
	"v2:cad3258396995c6c5aa86f66797bf06453dd400161f10dc77f3ddd2b40f926b5",                                             // 2 createPayout
	"refused at \"/data/attributes\": invalid body at /data/attributes (byte 44): missing required member \"amount\"", // 3 createPayout
}
