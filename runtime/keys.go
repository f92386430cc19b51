package runtime

import (
	"fmt"
	"strings"

	"github.com/idemgen/idemgen/runtime/gen"
)

// Default key bounds of DESIGN section 2 (key.minLength, key.maxLength), in bytes.
const (
	DefaultKeyMinLength = 16
	DefaultKeyMaxLength = 255
)

// keyError is why a present key is refused (400 key-invalid).
type keyError string

func (e keyError) Error() string { return string(e) }

// checkKey validates a present key under rule and returns its normal form: the RFC 8941 sf-string
// `"abc"` (section 3.3.3) is the same key as abc, as the IETF draft
// draft-ietf-httpapi-idempotency-key-header defines the header as a String item; a value that
// starts with '"' must be exactly one such sf-string, without parameters. The rules are
// DESIGN section 2: visible ASCII 0x21-0x7E except ',', length within [MinLength, MaxLength]
// (defaults 16 and 255), and the whole key matching Pattern when one is set (through m).
func checkKey(k Key, rule *KeyRule, m *gen.Matcher) (string, error) {
	if k.lines > 1 {
		return "", keyError("the key header appears more than once")
	}
	v := k.Value
	if len(v) > 0 && v[0] == '"' {
		u, err := unquoteSFString(v)
		if err != nil {
			return "", err
		}
		v = u
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
	if rule.Pattern != "" && !m.MatchWhole(rule.Pattern, v) {
		return "", keyError("the key does not match the pattern " + gen.Anchored(rule.Pattern))
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

// storedKey is the key column's value: the key itself for scope tenant, or the operation ID, one
// space and the key for scope operation. A key never contains a space, so the forms never meet.
func storedKey(op *Operation, key string) string {
	if op.Scope == ScopeOperation {
		return op.ID + " " + key
	}
	return key
}
