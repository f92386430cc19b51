package twilio

// The fingerprint corpus of the Twilio-like operations (parameters inside path segments): each
// request with the fingerprint the generated code computes for it, recorded from the generator
// before its decode functions were merged (so a change of framing or canonical form fails here).

import (
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

const formType = "application/x-www-form-urlencoded"

var sid = "AC" + strings.Repeat("0", 32)

var corpus = []fptest.Request{
	{Op: "CreateCall", Target: "/2010-04-01/Accounts/" + sid + "/Calls.json", Path: map[string]string{"AccountSid": sid},
		MediaType: formType, Body: "To=%2B1555&From=%2B1666&Url=http%3A%2F%2Fx"},
	{Op: "CreateCall", Target: "/2010-04-01/Accounts/AC1/Calls.json", Path: map[string]string{"AccountSid": "AC1"},
		MediaType: formType, Body: "To=%2B1555&From=%2B1666"},
	{Op: "UpdateCall", Target: "/2010-04-01/Accounts/AC1/Calls/CA9.json", Path: map[string]string{"AccountSid": "AC1", "Sid": "CA9"},
		MediaType: formType, Body: "Status=canceled"},
	{Op: "UpdateRecording", Target: "/2010-04-01/Accounts/AC1/Recordings/RE1.mp3", Path: map[string]string{"AccountSid": "AC1", "Sid": "RE1", "Format": "mp3"}},
	{Op: "UpdateRecording", Target: "/2010-04-01/Accounts/AC1/Recordings/RE1.wav", Path: map[string]string{"AccountSid": "AC1", "Sid": "RE1", "Format": "wav"}},
}

func TestFingerprintCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"CreateCall":      fptest.Run(operationCreateCall(), decodeCreateCall),
		"UpdateCall":      fptest.Run(operationUpdateCall(), decodeUpdateCall),
		"UpdateRecording": fptest.Run(operationUpdateRecording(), decodeUpdateRecording),
	}))
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v1:320cecb9631dca2a3526243325cac23f8ca830a0b93ca8f810909c1cac0bb727",                      // 0 CreateCall
	"refused at \"/path/AccountSid\": path parameter \"AccountSid\": length must be 34",        // 1 CreateCall
	"v1:838a040815c37be658221c35cb49b697b67742b0140af9653a02ec443510d797",                      // 2 UpdateCall
	"v1:588d6a3fee81c4dea4644c8d3a1e8a6dee39f81d0b47dc355d8b2b801bf4b215",                      // 3 UpdateRecording
	"refused at \"/path/Format\": path parameter \"Format\": must be one of \"json\", \"mp3\"", // 4 UpdateRecording
}
