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
	"v1:174c10af474fb1fcd6b10a90c8398f6f878117a53341c23897aa300c3d8f1518", // 0 closeAccount
	"v1:b8909800b84074f4f17020242c487bb7cb346946e1b2b1f04d2fcc2af6131118", // 1 acmeThing
	"v1:75dfc1ada0dd3f76c9c11f48beb2f9b63c5d11828b8f53aea6d0d1b84b36071e", // 2 closeTenantAccounts
	"v1:7bc626660884dabcc79514288f6b222f105cfce19861746e76d04cc1e410d696", // 3 exportCSV
}
