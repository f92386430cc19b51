package lease

// The fingerprint corpus of captureCharge: each request with the fingerprint the generated code
// computes for it, recorded from the generator before its decode functions were merged (so a
// change of framing or canonical form fails here).

import (
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

var corpus = []fptest.Request{
	{Op: "captureCharge", Target: "/charges/ch_1/capture", Path: map[string]string{"chargeId": "ch_1"}, MediaType: "application/json",
		Body: `{"amount":100,"statement_descriptor":"SHOP"}`},
	{Op: "captureCharge", Target: "/charges/ch_2/capture", Path: map[string]string{"chargeId": "ch_2"}, MediaType: "application/json",
		Body: `{"statement_descriptor":"SHOP","amount":100}`},
	{Op: "captureCharge", Target: "/charges/ch_2/capture", Path: map[string]string{"chargeId": "ch_2"}, MediaType: "application/json",
		Body: `{"amount":100,"statement_descriptor":"A DESCRIPTOR TOO LONG!!"}`},
}

func TestFingerprintCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"captureCharge": fptest.Run(operationCaptureCharge(), decodeCaptureCharge),
	}))
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v2:ec55e456365d2b3db05763852b99988f73b24e3ffab69cd6d2be34e06093fe75",                                              // 0 captureCharge
	"v2:33a79f32e386eb6a577317f53fcc340f43c5f3ceeb69b0589356502602a51300",                                              // 1 captureCharge
	"refused at \"/statement_descriptor\": invalid body at /statement_descriptor (byte 62): length must be at most 22", // 2 captureCharge
}
