package spec

import "testing"

// Go names write initialisms in one case, their plurals with a lower-case s (Effective Go; the
// naming of net/http, staticcheck ST1003): TaxIDs, not TaxIds.
func TestExportedName(t *testing.T) {
	for in, want := range map[string]string{
		"create_payment":  "CreatePayment",
		"payment_id":      "PaymentID",
		"account_tax_ids": "AccountTaxIDs",
		"taxIds":          "TaxIDs",
		"taxIDs":          "TaxIDs",
		"ids":             "IDs",
		"callback_urls":   "CallbackURLs",
		"uuids":           "UUIDs",
		"https":           "HTTPS", // an initialism of its own, not HTTP's plural
		"tls":             "TLS",
		"is":              "Is", // a word, not I's plural
		"ideas":           "Ideas",
		"3ds":             "X3ds",
		"":                "X",
	} {
		if got := exportedName(in); got != want {
			t.Errorf("exportedName(%q) = %q, want %q", in, got, want)
		}
	}
}
