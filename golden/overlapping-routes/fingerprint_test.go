package overlappingroutes

// The fingerprint corpus of the overlapping routes: each request with the fingerprint the
// generated code computes for it, recorded from the generator before its decode functions were
// merged (so a change of framing or canonical form fails here).

import (
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/internal/fptest"
	"github.com/idemgen/idemgen/runtime/canonical"
)

var corpus = []fptest.Request{
	{Op: "closeAccount", Target: "/accounts/a1/close", Path: map[string]string{"id": "a1"}},
	{Op: "acmeThing", Target: "/acme/k/n", Path: map[string]string{"kind": "k", "name": "n"}},
	{Op: "closeTenantAccounts", Target: "/t1/accounts/close", Path: map[string]string{"tenant": "t1"}},
	{Op: "exportCSV", Target: "/t1/exports/f.csv", Path: map[string]string{"tenant": "t1", "file": "f"}},
}

func TestFingerprintCorpus(t *testing.T) {
	closeAccount := fptest.NoBody("closeAccount", "/accounts/{id}/close", nil, nil, parseCloseAccountParams, fingerprintCloseAccount)
	acme := fptest.NoBody("acmeThing", "/acme/{kind}/{name}", nil, nil, parseAcmeThingParams, fingerprintAcmeThing)
	tenant := fptest.NoBody("closeTenantAccounts", "/{tenant}/accounts/close", nil, nil, parseCloseTenantAccountsParams, fingerprintCloseTenantAccounts)
	export := fptest.NoBody("exportCSV", "/{tenant}/exports/{file}.csv", nil, nil, parseExportCSVParams, fingerprintExportCSV)
	for name, m := range map[string]map[string]fptest.Fingerprinter{
		"old": {"closeAccount": closeAccount.OldFingerprint, "acmeThing": acme.OldFingerprint,
			"closeTenantAccounts": tenant.OldFingerprint, "exportCSV": export.OldFingerprint},
		"begin": {"closeAccount": closeAccount.Begin, "acmeThing": acme.Begin, "closeTenantAccounts": tenant.Begin, "exportCSV": export.Begin},
	} {
		t.Run(name, func(t *testing.T) {
			fptest.Check(t, corpus, want, func(c fptest.Request, r *http.Request) (canonical.Fingerprint, error) { return m[c.Op](c, r) })
		})
	}
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v1:174c10af474fb1fcd6b10a90c8398f6f878117a53341c23897aa300c3d8f1518", // 0 closeAccount
	"v1:b8909800b84074f4f17020242c487bb7cb346946e1b2b1f04d2fcc2af6131118", // 1 acmeThing
	"v1:75dfc1ada0dd3f76c9c11f48beb2f9b63c5d11828b8f53aea6d0d1b84b36071e", // 2 closeTenantAccounts
	"v1:7bc626660884dabcc79514288f6b222f105cfce19861746e76d04cc1e410d696", // 3 exportCSV
}
