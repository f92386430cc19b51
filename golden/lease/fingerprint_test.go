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
	"v1:db9c8253fab8fe9139288a68d5d86b4aec7a87fb893edd5becda5de78907dac4",                                              // 0 captureCharge
	"v1:5c028507dd85b76005897afb2462c7ee95d4e55e1a11b39515d28ee86afbf717",                                              // 1 captureCharge
	"refused at \"/statement_descriptor\": invalid body at /statement_descriptor (byte 62): length must be at most 22", // 2 captureCharge
}
