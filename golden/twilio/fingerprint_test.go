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
	"v2:30d485d0c9f7c7ad9fbb57dcbc97dae800f59c0ecea2322970cc8f626351e8a4",                      // 0 CreateCall
	"refused at \"/path/AccountSid\": path parameter \"AccountSid\": length must be 34",        // 1 CreateCall
	"v2:6c2dcc9852f23dd423ad1a0d65f4222ab53fe126f9e494094157649c4bf1f32d",                      // 2 UpdateCall
	"v2:682e9b7712adad7278d7a935c3d24eb97d188e1dd08a3b7f0dfc566aba8b6e5e",                      // 3 UpdateRecording
	"refused at \"/path/Format\": path parameter \"Format\": must be one of \"json\", \"mp3\"", // 4 UpdateRecording
}
