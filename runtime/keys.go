package runtime

import (
	"fmt"
	"strings"

	"github.com/idemgen/idemgen/runtime/gen"
)

// keyError is why a present key is refused (400 key-invalid).
type keyError string

func (e keyError) Error() string { return string(e) }

// rawKey is an idempotency key as the request carried it, before validation.
type rawKey struct {
	value   string
	present bool
	// lines counts the key header lines: two or more is 400 key-invalid.
	lines int
}

// checkKey validates a present key under rule and returns its normal form: the RFC 8941
// sf-string `"abc"` (section 3.3.3) is the same key as abc, as the IETF draft
// draft-ietf-httpapi-idempotency-key-header defines the header as a String item; a value that
// starts with '"' must be exactly one such sf-string, without parameters. A key is visible
// ASCII 0x21-0x7E except ',' (so that it fits one header field and one list member), its
// length is within [MinLength, MaxLength] (defaults 16 and 255), and the whole key matches
// Pattern when one is set; match reports whether all of the key matches a pattern.
func checkKey(k rawKey, rule *KeyRule, match func(pattern, s string) bool) (string, error) {
	if k.lines > 1 {
		return "", keyError("the key header appears more than once")
	}
	v, err := UnquoteKey(k.value)
	if err != nil {
		return "", err
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x21 || c > 0x7e || c == ',' {
			return "", keyError(fmt.Sprintf("character %d of the key is not visible ASCII other than ','", i+1))
		}
	}
	lo, hi := rule.MinLength, rule.MaxLength
	if lo <= 0 {
		lo = DefaultKeyMinLength
	}
	if hi <= 0 {
		hi = DefaultKeyMaxLength
	}
	if len(v) < lo || len(v) > hi {
		return "", keyError(fmt.Sprintf("the key has %d characters; it must have %d to %d", len(v), lo, hi))
	}
	if rule.Pattern != "" && !match(rule.Pattern, v) {
		return "", keyError("the key does not match the pattern " + gen.Anchored(rule.Pattern))
	}
	return v, nil
}

// UnquoteKey returns the key that a request whose key header (or field) carries v is served
// under, before validation and Operation.RecordKey: v itself, or, when v starts with '"', the
// RFC 8941 sf-string it is (section 3.3.3: `"abc"` is the key abc; the IETF draft
// draft-ietf-httpapi-idempotency-key-header defines the header as a String item). The serving
// path calls it on every key; support tools (runtime/admin) call it on a key pasted by hand so
// that they read the record that was served. Errors: a quoted v that is not exactly one
// sf-string (an invalid escape, a character outside printable ASCII, no closing quote, or
// anything after it, such as RFC 8941 parameters).
func UnquoteKey(v string) (string, error) {
	if len(v) > 0 && v[0] == '"' {
		return unquoteSFString(v)
	}
	return v, nil
}

// unquoteSFString decodes a header value that starts with DQUOTE as an RFC 8941 sf-string
// (section 3.3.3): DQUOTE *chr DQUOTE where chr is a printable ASCII character other than '"' and
// '\', or one of the escapes \" and \\. Nothing may follow the closing quote: a value that
// starts with DQUOTE is a String Item, and RFC 8941 section 3.1.2 parameters after it
// (`"abc";a=1`) are not part of the key, so keeping them would store a key the client did not
// mean.
func unquoteSFString(s string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i >= len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", keyError("the quoted key has an invalid escape (RFC 8941 section 3.3.3)")
			}
			b.WriteByte(s[i])
		case c == '"':
			if rest := s[i+1:]; rest != "" {
				if strings.HasPrefix(strings.TrimLeft(rest, " "), ";") {
					return "", keyError("the quoted key has RFC 8941 parameters after it; parameters are not part of the key, send the key alone")
				}
				return "", keyError("the quoted key has characters after its closing quote (RFC 8941 section 3.3.3)")
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", keyError("the quoted key has a character outside printable ASCII")
		default:
			b.WriteByte(c)
		}
	}
	return "", keyError("the quoted key has no closing quote (RFC 8941 section 3.3.3)")
}
