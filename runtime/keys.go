package runtime

import (
	"fmt"

	"github.com/idemgen/idemgen/runtime/defaults"
	"github.com/idemgen/idemgen/runtime/gen"
)

// keyError is why a present key is refused (400 key-invalid).
type keyError string

func (e keyError) Error() string { return string(e) }

// rawKey is an idempotency key as the request carried it, before validation.
type rawKey struct {
	value   string
	present bool
	// lines counts the key header lines (or query parameter values): two or more is 400
	// key-invalid.
	lines int
}

// checkKey validates a present key under rule and returns its normal form (defaults.KeyText):
// under key.quoted "accept" (the default) the RFC 8941 sf-string `"abc"` (section 3.3.3) is the
// same key as abc, as the IETF draft draft-ietf-httpapi-idempotency-key-header defines the header
// as a String item; a value that starts with '"' must then be exactly one such sf-string, without
// parameters. Its characters are key.characters' (visible ASCII 0x21-0x7E except ',' by default;
// opaque: any text without control characters), its length in characters is within [MinLength,
// MaxLength] (defaults 16 and 255), and the whole key matches Pattern when one is set; match
// reports whether all of the key matches a pattern. quoted reports that the key was sent as an
// sf-string (a browser's key is), also when it is refused for its length or pattern.
func checkKey(k rawKey, rule *KeyRule, match func(pattern, s string) bool) (key string, quoted bool, err error) {
	if k.lines > 1 {
		return "", false, keyError("the key is given more than once")
	}
	v, quoted, err := defaults.KeyText(k.value, rule.Quoted, rule.Characters)
	if err != nil {
		return "", quoted, keyError(err.Error())
	}
	lo, hi := rule.MinLength, rule.MaxLength
	if lo <= 0 {
		lo = DefaultKeyMinLength
	}
	if hi <= 0 {
		hi = DefaultKeyMaxLength
	}
	if n := defaults.KeyLength(v); n < lo || n > hi {
		return "", quoted, keyError(fmt.Sprintf("the key has %d characters; it must have %d to %d", n, lo, hi))
	}
	if rule.Pattern != "" && !match(rule.Pattern, v) {
		return "", quoted, keyError("the key does not match the pattern " + gen.Anchored(rule.Pattern))
	}
	return v, quoted, nil
}

// UnquoteKey returns the key that a request whose key header (or field) carries v is served
// under by an operation with the default key.quoted ("accept"), before validation and
// Operation.RecordKey: v itself, or, when v starts with '"', the RFC 8941 sf-string it is
// (section 3.3.3: `"abc"` is the key abc; the IETF draft draft-ietf-httpapi-idempotency-key-header
// defines the header as a String item). Support tools (runtime/admin) call it on a key pasted
// by hand so that they read the record that was served; Operation.ServedKey applies an
// operation's own key.quoted. Errors: a quoted v that is not exactly one sf-string (an invalid
// escape, a character outside printable ASCII, no closing quote, or anything after it, such as
// RFC 8941 parameters).
func UnquoteKey(v string) (string, error) {
	if len(v) > 0 && v[0] == '"' {
		k, err := defaults.UnquoteSFString(v)
		if err != nil {
			return "", keyError(err.Error())
		}
		return k, nil
	}
	return v, nil
}

// ServedKey returns the key that a request to op whose key header (or field) carries sent is
// served under, before Operation.RecordKey: sent read under op's key.quoted (UnquoteKey for
// "accept" and "require"; sent itself for "literal"). Its errors are those of UnquoteKey, and,
// under "require", a key that is not an sf-string.
func (op *Operation) ServedKey(sent string) (string, error) {
	k, _, err := defaults.KeyText(sent, op.Key.Quoted, KeyOpaque)
	if err != nil {
		return "", keyError(err.Error())
	}
	return k, nil
}
