package runtime

import (
	"strings"
	"testing"
)

// A value starting with DQUOTE is an RFC 8941 String Item; parameters after it are not part of
// the key and must not be stored as if they were (newcomer report: `"k0123456789abcdef";a=1`
// was kept literally).
func TestCheckKeyQuotedWithParameters(t *testing.T) {
	rule := &KeyRule{Header: "Idempotency-Key", Required: true}
	for _, in := range []string{
		`"k0123456789abcdef";a=1`,
		`"k0123456789abcdef"; a=1`,
		`"k0123456789abcdef";a`,
	} {
		got, err := checkKey(Key{Value: in, Present: true, lines: 1}, rule, nil)
		if err == nil {
			t.Errorf("%q accepted as key %q", in, got)
			continue
		}
		if !strings.Contains(err.Error(), "parameters are not part of the key") {
			t.Errorf("%q: reason %q does not say parameters are not part of the key", in, err)
		}
	}
	for _, in := range []string{
		`"k0123456789abcdef"x`,  // trailing characters
		`"k0123456789abcdef`,    // no closing quote
		`"k0123456789abcdef\"`,  // the closing quote is escaped
		`"k0123456789abcdef"""`, // two strings
	} {
		if got, err := checkKey(Key{Value: in, Present: true, lines: 1}, rule, nil); err == nil {
			t.Errorf("%q accepted as key %q", in, got)
		}
	}
	// The plain quoted form stays the same key as the bare one.
	got, err := checkKey(Key{Value: `"k0123456789abcdef"`, Present: true, lines: 1}, rule, nil)
	if err != nil || got != "k0123456789abcdef" {
		t.Errorf(`"k0123456789abcdef": %q %v`, got, err)
	}
}
