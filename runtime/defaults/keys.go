package defaults

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// The syntax of an idempotency key, as data: which characters a key may have (key.characters)
// and how an RFC 8941 quoted string is read (key.quoted). Together with key.minLength,
// key.maxLength and key.pattern they are an operation's key rule; a contract (idemgen's
// default, Stripe, the Agentic Commerce Protocol, the IETF draft) is one value of each. The
// runtime checks keys with KeyText, the loader reads the settings' names with
// ParseKeyCharacters and ParseKeyQuoting, and `idemgen conform` builds keys that its rule takes.

// KeyCharacters is key.characters: the characters a key may have.
type KeyCharacters uint8

const (
	// KeyVisible (the default, "visible"): visible ASCII, 0x21-0x7E, except ',', so that a key
	// is one header field value and one list member, and never holds a space.
	KeyVisible KeyCharacters = iota
	// KeyOpaque ("opaque"): any Unicode text without control characters (C0, DEL, C1), valid
	// UTF-8: a key is an opaque string, as the Agentic Commerce Protocol's agentic-checkout
	// RFC section 6.1 and delegate-payment RFC section 5.1 define it ("an opaque string, max 255
	// characters"). A header key cannot start or end with a space (HTTP trims them, RFC 9110
	// section 5.5).
	KeyOpaque
)

var keyCharactersNames = [...]string{KeyVisible: "visible", KeyOpaque: "opaque"}

// String names the setting as x-idempotent writes it ("visible", "opaque").
func (c KeyCharacters) String() string {
	if int(c) < len(keyCharactersNames) {
		return keyCharactersNames[c]
	}
	return "KeyCharacters(" + strconv.Itoa(int(c)) + ")"
}

// ParseKeyCharacters reads key.characters' value; ok is false for an unknown name.
func ParseKeyCharacters(s string) (c KeyCharacters, ok bool) {
	for i, n := range keyCharactersNames {
		if n == s {
			return KeyCharacters(i), true
		}
	}
	return 0, false
}

// KeyCharactersNames are key.characters' values, the default first.
func KeyCharactersNames() []string { return append([]string(nil), keyCharactersNames[:]...) }

// KeyQuoting is key.quoted: how a key sent as an RFC 8941 sf-string (section 3.3.3, `"abc"`)
// is read.
type KeyQuoting uint8

const (
	// KeyQuotedAccepted (the default, "accept"): a value that starts with '"' is an sf-string
	// and the key is its content (`"abc"` and abc are the same key), so that clients of the
	// IETF draft draft-ietf-httpapi-idempotency-key-header (section 2.1: the field is an
	// sf-string) and Firefox, which sends `Idempotency-Key: "<uint64>"`, meet clients that send
	// the key bare. A value that starts with '"' but is not exactly one sf-string is refused.
	KeyQuotedAccepted KeyQuoting = iota
	// KeyQuotedRequired ("require"): the key must be sent as an sf-string, the IETF draft's
	// syntax; a bare key is refused.
	KeyQuotedRequired
	// KeyQuotedLiteral ("literal"): quotes are characters of the key like any other (`"abc"` is a
	// key of five characters), for contracts whose keys are opaque strings that may begin with
	// '"'.
	KeyQuotedLiteral
)

var keyQuotingNames = [...]string{KeyQuotedAccepted: "accept", KeyQuotedRequired: "require", KeyQuotedLiteral: "literal"}

// String names the setting as x-idempotent writes it ("accept", "require", "literal").
func (q KeyQuoting) String() string {
	if int(q) < len(keyQuotingNames) {
		return keyQuotingNames[q]
	}
	return "KeyQuoting(" + strconv.Itoa(int(q)) + ")"
}

// ParseKeyQuoting reads key.quoted's value; ok is false for an unknown name.
func ParseKeyQuoting(s string) (q KeyQuoting, ok bool) {
	for i, n := range keyQuotingNames {
		if n == s {
			return KeyQuoting(i), true
		}
	}
	return 0, false
}

// KeyQuotingNames are key.quoted's values, the default first.
func KeyQuotingNames() []string { return append([]string(nil), keyQuotingNames[:]...) }

// KeyError is why a key is refused (400 key-invalid), in lower case without a final period.
type KeyError string

func (e KeyError) Error() string { return string(e) }

// KeyText reads a key as its header (or body member) carried it, sent, under quoting q and
// characters c, and returns the key: sent itself, or the content of an sf-string. Its length
// and pattern are the caller's to check (KeyLength counts it). quoted reports that sent was an
// sf-string (under KeyQuotedAccepted and KeyQuotedRequired), which a browser's key is.
//
// Errors (KeyError): a value that starts with '"' and is not exactly one sf-string (an invalid
// escape, a character outside printable ASCII, no closing quote, or anything after it, such as
// RFC 8941 parameters `"abc";a=1`, which are not part of the key); a bare key under
// KeyQuotedRequired; a character outside c.
func KeyText(sent string, q KeyQuoting, c KeyCharacters) (key string, quoted bool, err error) {
	key = sent
	if q != KeyQuotedLiteral && strings.HasPrefix(sent, `"`) {
		if key, err = UnquoteSFString(sent); err != nil {
			return "", false, err
		}
		quoted = true
	} else if q == KeyQuotedRequired {
		return "", false, KeyError(`the key must be sent as an RFC 8941 quoted string ("...", section 3.3.3), as draft-ietf-httpapi-idempotency-key-header defines the header`)
	}
	if err := checkKeyCharacters(key, c); err != nil {
		return "", quoted, err
	}
	return key, quoted, nil
}

// KeyLength is a key's length as key.minLength and key.maxLength count it: in characters
// (Unicode code points), which is bytes for a visible ASCII key, as JSON Schema's maxLength
// counts a string.
func KeyLength(key string) int { return utf8.RuneCountInString(key) }

// checkKeyCharacters refuses a key with a character outside c.
func checkKeyCharacters(key string, c KeyCharacters) error {
	if c == KeyOpaque {
		for i, r := range key {
			switch {
			case r == utf8.RuneError && !strings.HasPrefix(key[i:], "\uFFFD"):
				return KeyError("byte " + strconv.Itoa(i+1) + " of the key is not UTF-8")
			case r < 0x20 || (r >= 0x7f && r <= 0x9f):
				return KeyError("character " + strconv.Itoa(utf8.RuneCountInString(key[:i])+1) + " of the key is a control character")
			}
		}
		return nil
	}
	for i := 0; i < len(key); i++ {
		if b := key[i]; b < 0x21 || b > 0x7e || b == ',' {
			return KeyError("character " + strconv.Itoa(i+1) + " of the key is not visible ASCII other than ','")
		}
	}
	return nil
}

// UnquoteSFString decodes a value that starts with DQUOTE as an RFC 8941 sf-string (section
// 3.3.3): DQUOTE *chr DQUOTE where chr is a printable ASCII character other than '"' and '\',
// or one of the escapes \" and \\. Nothing may follow the closing quote: a value that starts
// with DQUOTE is a String Item, and RFC 8941 section 3.1.2 parameters after it (`"abc";a=1`) are
// not part of the key, so keeping them would store a key the client did not mean.
func UnquoteSFString(s string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i >= len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", KeyError("the quoted key has an invalid escape (RFC 8941 section 3.3.3)")
			}
			b.WriteByte(s[i])
		case c == '"':
			if rest := s[i+1:]; rest != "" {
				if strings.HasPrefix(strings.TrimLeft(rest, " "), ";") {
					return "", KeyError("the quoted key has RFC 8941 parameters after it; parameters are not part of the key, send the key alone")
				}
				return "", KeyError("the quoted key has characters after its closing quote (RFC 8941 section 3.3.3)")
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", KeyError("the quoted key has a character outside printable ASCII")
		default:
			b.WriteByte(c)
		}
	}
	return "", KeyError("the quoted key has no closing quote (RFC 8941 section 3.3.3)")
}
