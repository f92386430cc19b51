package canonical

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// FormField is one name=value pair of an application/x-www-form-urlencoded body, decoded.
type FormField struct {
	Name, Value string
}

// ParseForm decodes an application/x-www-form-urlencoded body (WHATWG URL Standard,
// "application/x-www-form-urlencoded parsing") strictly and returns its fields in body order:
// pairs are separated by '&' (empty pairs are skipped), a pair without '=' has the value "",
// '+' is a space, and percent escapes are decoded. Bracketed names such as metadata[order]
// (Stripe's style) are plain names. A '%' not followed by two hex digits, or a decoded name or
// value that is not valid UTF-8, is an *Error whose Pointer is "/" + the field name (as far as
// it decoded) and Offset the byte in data.
func ParseForm(data []byte) ([]FormField, error) {
	var fields []FormField
	var buf []byte
	for i := 0; i <= len(data); {
		j := i
		for j < len(data) && data[j] != '&' {
			j++
		}
		if j > i {
			pair := data[i:j]
			eq := len(pair)
			for k, c := range pair {
				if c == '=' {
					eq = k
					break
				}
			}
			var f FormField
			var err *Error
			buf, err = formUnescape(buf[:0], pair[:eq], i, "")
			if err != nil {
				return nil, err
			}
			f.Name = string(buf)
			if eq < len(pair) {
				buf, err = formUnescape(buf[:0], pair[eq+1:], i+eq+1, f.Name)
				if err != nil {
					return nil, err
				}
				f.Value = string(buf)
			}
			fields = append(fields, f)
		}
		i = j + 1
	}
	return fields, nil
}

// formUnescape appends the decoded text of s, which starts at offset off in the body.
func formUnescape(b, s []byte, off int, name string) ([]byte, *Error) {
	start := len(b)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			b = append(b, ' ')
		case '%':
			hi, ok1 := unhex(s, i+1)
			lo, ok2 := unhex(s, i+2)
			if !ok1 || !ok2 {
				return b, formError(name, b[start:], off+i, "'%' not followed by two hex digits")
			}
			b = append(b, hi<<4|lo)
			i += 2
		default:
			b = append(b, c)
		}
	}
	if !utf8.Valid(b[start:]) {
		return b, formError(name, b[start:], off, "invalid UTF-8 after percent-decoding")
	}
	return b, nil
}

func formError(name string, partial []byte, off int, reason string) *Error {
	if name == "" {
		name = string(partial)
	}
	p := strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
	return &Error{Pointer: "/" + p, Offset: off, Reason: reason}
}

func unhex(s []byte, i int) (byte, bool) {
	if i >= len(s) {
		return 0, false
	}
	switch c := s[i]; {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// AppendCanonicalForm appends the canonical form of a form body to b: the
// fields of ParseForm, without those whose name is in exclude (fingerprint.exclude for form
// bodies, and a form-carried idempotency key), stably sorted by name in byte order (so
// repeated fields keep their relative order), written as name=value pairs joined by '&' with
// every byte outside A-Z a-z 0-9 - . _ ~ percent-encoded in upper-case hex. Different
// percent-encodings of the same text ("Order%2042", "Order+42") therefore give equal output.
func AppendCanonicalForm(b, data []byte, exclude ...string) ([]byte, error) {
	fields, err := ParseForm(data)
	if err != nil {
		return b, err
	}
	return AppendFormFields(b, fields, exclude...), nil
}

// AppendFormFields is AppendCanonicalForm for fields already parsed. It sorts fields in
// place.
func AppendFormFields(b []byte, fields []FormField, exclude ...string) []byte {
	slices.SortStableFunc(fields, func(x, y FormField) int { return strings.Compare(x.Name, y.Name) })
	first := true
	for _, f := range fields {
		if slices.Contains(exclude, f.Name) {
			continue
		}
		if !first {
			b = append(b, '&')
		}
		first = false
		b = appendFormEscaped(b, f.Name)
		b = append(b, '=')
		b = appendFormEscaped(b, f.Value)
	}
	return b
}

func appendFormEscaped(b []byte, s string) []byte {
	const upperHex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperHex[c>>4], upperHex[c&15])
	}
	return b
}
