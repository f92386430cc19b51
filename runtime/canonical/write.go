package canonical

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendString appends s as an RFC 8785 string (section 3.2.2.2): quoted, with '"', '\' and
// the control characters U+0000–U+001F escaped (\b \t \n \f \r, else \u00xx in lower-case
// hex) and everything else, including U+007F and U+2028, written as UTF-8. Strings read by a
// Decoder are valid UTF-8; a byte of s that is not is written as U+FFFD.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	// Skip plain ASCII eight bytes at a time.
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if !plain8(x) {
			break
		}
	}
	start := 0
	for i < len(s) {
		c := s[i]
		if strPlain[c] {
			i++
			continue
		}
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		b = appendEscapedASCII(b, c)
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plain8 reports whether the eight bytes in x are all printable ASCII other than '"' and '\'
// (the bit tricks find a byte below 0x20, equal to '"' or '\', or with the high bit set).
func plain8(x uint64) bool {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	below20 := (x - 0x20*lsb) &^ x & msb
	q := x ^ ('"' * lsb)
	quote := (q - lsb) &^ q & msb
	bs := x ^ ('\\' * lsb)
	backslash := (bs - lsb) &^ bs & msb
	return (below20 | quote | backslash | x&msb) == 0
}

// appendQuotedValid is AppendString for text already known to be valid UTF-8.
func appendQuotedValid(b, s []byte) []byte {
	b = append(b, '"')
	start := 0
	for i, c := range s {
		if strPlain[c] || c >= 0x80 {
			continue
		}
		b = append(b, s[start:i]...)
		b = appendEscapedASCII(b, c)
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendEscapedASCII appends the RFC 8785 form of an ASCII byte that is not plain.
func appendEscapedASCII(b []byte, c byte) []byte {
	switch c {
	case '"':
		return append(b, '\\', '"')
	case '\\':
		return append(b, '\\', '\\')
	case '\b':
		return append(b, '\\', 'b')
	case '\t':
		return append(b, '\\', 't')
	case '\n':
		return append(b, '\\', 'n')
	case '\f':
		return append(b, '\\', 'f')
	case '\r':
		return append(b, '\\', 'r')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
}

// appendCanonicalRaw appends the canonical form of checked raw string content.
func appendCanonicalRaw(b, raw []byte, escaped bool) []byte {
	b = append(b, '"')
	if !escaped {
		b = append(b, raw...)
		return append(b, '"')
	}
	for i := 0; i < len(raw); {
		j := i
		for j < len(raw) && raw[j] != '\\' {
			j++
		}
		b = append(b, raw[i:j]...)
		if j == len(raw) {
			break
		}
		r, n := unescape(raw, j)
		if r < 0x80 && !strPlain[r] {
			b = appendEscapedASCII(b, byte(r))
		} else {
			b = utf8.AppendRune(b, r)
		}
		i = j + n
	}
	return append(b, '"')
}

// AppendName appends s as a member name followed by ':'. Generated code writes declared names
// as pre-escaped literals instead; AppendName serves run-time names (map keys).
func AppendName(b []byte, s string) []byte {
	return append(AppendString(b, s), ':')
}

// AppendInt appends v in decimal: the exact digits of a schema integer (docs/design.md section 3:
// integers kept exact, no float64 round trip above 2^53).
func AppendInt(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) }

func appendUint(b []byte, v uint64) []byte { return strconv.AppendUint(b, v, 10) }

// AppendBool appends true or false.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// AppendNull appends null.
func AppendNull(b []byte) []byte { return append(b, "null"...) }

// Comma appends ',' when the object or array that started at offset start (just after its
// '{' or '[') already has content. Generated code uses it before a member whose predecessors
// are all optional.
func Comma(b []byte, start int) []byte {
	if len(b) > start {
		return append(b, ',')
	}
	return b
}

// Compare orders two member names by their UTF-16 code units, as RFC 8785 section 3.2.3
// requires: it returns -1, 0 or +1. The order differs from byte (code point) order only
// between U+E000–U+FFFF and supplementary characters, which sort first in UTF-16.
func Compare(a, b string) int { return compare16(a, b) }

func compare16[T string | []byte](a, b T) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		switch {
		case len(a) < len(b):
			return -1
		case len(a) > len(b):
			return 1
		}
		return 0
	}
	ca, cb := a[i], b[i]
	// The first difference is at a lead byte whenever the two characters differ in length, so
	// only these lead bytes need the UTF-16 correction: 0xEE/0xEF start U+E000–U+FFFF (one
	// code unit ≥ 0xE000), 0xF0–0xF4 start supplementary characters (a surrogate pair
	// starting with 0xD800–0xDBFF).
	if ca >= 0xEE && ca <= 0xEF && cb >= 0xF0 {
		return 1
	}
	if cb >= 0xEE && cb <= 0xEF && ca >= 0xF0 {
		return -1
	}
	if ca < cb {
		return -1
	}
	return 1
}

// Member is an object member that the schema does not declare, kept so that the fingerprint
// still covers it (docs/design.md section 4: the fingerprint covers exactly what the handler sees).
type Member struct {
	// Name is the member's name, unescaped.
	Name string
	// Value is the member value's canonical form (RFC 8785).
	Value []byte
}

// Members are the undeclared members of one object, sorted by Name in UTF-16 order and free
// of duplicates ([Decoder.Unknown] keeps them so). The canonicalizer merges them between the
// declared members with AppendBefore and AppendAll.
type Members []Member

// AppendBefore appends, as "name":value members, the leading members of m whose names sort
// before name, each preceded by a comma when the object (whose content starts at offset start)
// already has content. It returns the extended buffer and the members not yet written.
func (m Members) AppendBefore(b []byte, start int, name string) ([]byte, Members) {
	for len(m) > 0 && compare16(m[0].Name, name) < 0 {
		b = Comma(b, start)
		b = AppendName(b, m[0].Name)
		b = append(b, m[0].Value...)
		m = m[1:]
	}
	return b, m
}

// AppendAll appends all of m as "name":value members, like AppendBefore.
func (m Members) AppendAll(b []byte, start int) []byte {
	for i := range m {
		b = Comma(b, start)
		b = AppendName(b, m[i].Name)
		b = append(b, m[i].Value...)
	}
	return b
}

// AppendMap appends m as a canonical object: keys sorted in UTF-16 order, each value written
// by value (AppendString, AppendInt, AppendFloat, AppendBool or a generated function), and
// the keys listed in exclude (fingerprint.exclude pointers through map keys, e.g.
// /metadata/trace_id) left out. A nil map is written as {}; generated code tests for nil
// itself when absence must differ from {}.
func AppendMap[V any](b []byte, m map[string]V, value func([]byte, V) []byte, exclude ...string) []byte {
	// One pass over the map into (key, value) pairs, on the stack for the usual small map.
	type pair struct {
		k string
		v V
	}
	var stack [8]pair
	pairs := stack[:0]
	for k, v := range m {
		if len(exclude) == 0 || !slices.Contains(exclude, k) {
			pairs = append(pairs, pair{k, v})
		}
	}
	if len(pairs) > 12 {
		slices.SortFunc(pairs, func(x, y pair) int { return compare16(x.k, y.k) })
	} else {
		for i := 1; i < len(pairs); i++ {
			for j := i; j > 0 && compare16(pairs[j].k, pairs[j-1].k) < 0; j-- {
				pairs[j], pairs[j-1] = pairs[j-1], pairs[j]
			}
		}
	}
	b = append(b, '{')
	for i := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendName(b, pairs[i].k)
		b = value(b, pairs[i].v)
	}
	return append(b, '}')
}

// AppendArray appends s as a canonical array, each element written by value.
func AppendArray[V any](b []byte, s []V, value func([]byte, V) []byte) []byte {
	b = append(b, '[')
	for i := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = value(b, s[i])
	}
	return append(b, ']')
}
