package overlappingroutes

// The fingerprint corpus of the overlapping routes: each request with the fingerprint the
// generated code computes for it, recorded from the generator before its decode functions were
// merged, whose fingerprints gen.Input.Begin reproduced (so a change of framing or canonical form
// fails here).

import (
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

var corpus = []fptest.Request{
	{Op: "closeAccount", Target: "/accounts/a1/close", Path: map[string]string{"id": "a1"}},
	{Op: "acmeThing", Target: "/acme/k/n", Path: map[string]string{"kind": "k", "name": "n"}},
	{Op: "closeTenantAccounts", Target: "/t1/accounts/close", Path: map[string]string{"tenant": "t1"}},
	{Op: "exportCSV", Target: "/t1/exports/f.csv", Path: map[string]string{"tenant": "t1", "file": "f"}},
}

func TestFingerprintCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"closeAccount":        fptest.Run(operationCloseAccount(), decodeCloseAccount),
		"acmeThing":           fptest.Run(operationAcmeThing(), decodeAcmeThing),
		"closeTenantAccounts": fptest.Run(operationCloseTenantAccounts(), decodeCloseTenantAccounts),
		"exportCSV":           fptest.Run(operationExportCSV(), decodeExportCSV),
	}))
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v2:a87727dd7b2e4281a2f69563e147b7d3b84f74aed52f1e46db8618a7cf15e1eb", // 0 closeAccount
	"v2:b5728cd3253ddc2491cdb67ce5fa45886312d8a8942746592505cac9ad3bfde2", // 1 acmeThing
	"v2:607fe12ec7fe535101b0d67f5b8880a47c56094ff47892eba6bb2bdca8b4ec83", // 2 closeTenantAccounts
	"v2:6b74e881e1886131943d39f97abee114a1c7a73f05cd7cc5d913e40c915123e8", // 3 exportCSV
}
