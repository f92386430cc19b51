package canonical

// The lexical layer shared by the Decoder and the generic canonicalizer: the RFC 8259 number
// and string grammars, checked strictly, and exact conversions of number text.

import (
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// scanNumber checks the RFC 8259 number grammar at data[i:] and returns the end offset and
// whether the number has a fraction or exponent.
func scanNumber(data []byte, i int) (end int, frac bool, ok bool) {
	n := len(data)
	if i < n && data[i] == '-' {
		i++
	}
	if i >= n {
		return i, false, false
	}
	switch c := data[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i++
		for i < n && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		return i, false, false
	}
	if i < n && data[i] == '.' {
		frac = true
		i++
		j := i
		for i < n && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == j {
			return i, frac, false
		}
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		frac = true
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := i
		for i < n && data[i] >= '0' && data[i] <= '9' {
			i++
		}
		if i == j {
			return i, frac, false
		}
	}
	return i, frac, true
}

// parseFloat converts a grammar-checked number; ok is false outside the float64 range.
// Values closer to zero than the smallest subnormal become 0, as ECMAScript's Number() does.
func parseFloat(num []byte) (float64, bool) {
	// The string shares num's memory only for the duration of the call: ParseFloat keeps its
	// argument only in a *NumError, which copies it.
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(num), len(num)), 64)
	if err != nil && math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// parseInt64 converts a grammar-checked number that must be an integer, exactly.
func parseInt64(num []byte) (int64, string) {
	neg := false
	i := 0
	if num[0] == '-' {
		neg = true
		i = 1
	}
	// Split into significant digits and a decimal exponent: value = digits × 10^exp.
	var digits [40]byte
	nd := 0
	exp := 0
	fracDigits := false // non-zero fraction digits beyond the buffer
	for ; i < len(num) && num[i] >= '0' && num[i] <= '9'; i++ {
		if nd == 0 && num[i] == '0' {
			continue
		}
		if nd < len(digits) {
			digits[nd] = num[i]
			nd++
		} else {
			exp++ // digits beyond the buffer only make the value larger: a range error below
		}
	}
	if i < len(num) && num[i] == '.' {
		for i++; i < len(num) && num[i] >= '0' && num[i] <= '9'; i++ {
			if nd == 0 && num[i] == '0' {
				exp--
				continue
			}
			if nd < len(digits) {
				digits[nd] = num[i]
				nd++
				exp--
			} else if num[i] != '0' {
				fracDigits = true
			}
		}
	}
	if i < len(num) && (num[i] == 'e' || num[i] == 'E') {
		i++
		eneg := false
		if num[i] == '+' || num[i] == '-' {
			eneg = num[i] == '-'
			i++
		}
		e := 0
		for ; i < len(num); i++ {
			if e < 100000 {
				e = e*10 + int(num[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	// Trailing zeros of the significand make a negative exponent harmless.
	for nd > 0 && digits[nd-1] == '0' && exp < 0 {
		nd--
		exp++
	}
	if nd == 0 {
		return 0, ""
	}
	if exp < 0 || fracDigits {
		return 0, "not an integer"
	}
	if nd+exp > 19 {
		return 0, "integer outside the int64 range"
	}
	var u uint64
	for _, c := range digits[:nd] {
		u = u*10 + uint64(c-'0')
	}
	for ; exp > 0; exp-- {
		u *= 10
	}
	if neg {
		if u > 1<<63 {
			return 0, "integer outside the int64 range"
		}
		return int64(-u), ""
	}
	if u > math.MaxInt64 {
		return 0, "integer outside the int64 range"
	}
	return int64(u), ""
}

// strPlain[c] is true for bytes that stand for themselves inside a JSON string and need no
// escaping in canonical output: printable ASCII other than '"' and '\'.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString checks the string starting at d.pos (at '"') and moves past it. It returns the
// span of the raw content between the quotes and whether it contains escapes.
func (d *Decoder) scanString() (s, e int, escaped bool) {
	data := d.data
	i := d.pos + 1
	s = i
	for {
		for i+8 <= len(data) && plain8(binary.LittleEndian.Uint64(data[i:])) {
			i += 8
		}
		for i < len(data) && strPlain[data[i]] {
			i++
		}
		if i >= len(data) {
			d.fail(len(data), "unterminated string")
			return s, s, false
		}
		switch c := data[i]; {
		case c == '"':
			d.pos = i + 1
			return s, i, escaped
		case c == '\\':
			escaped = true
			n, reason := checkEscape(data, i)
			if reason != "" {
				d.fail(i, reason)
				return s, s, false
			}
			i += n
		case c < 0x20:
			d.fail(i, "control character in string")
			return s, s, false
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				d.fail(i, "invalid UTF-8")
				return s, s, false
			}
			i += size
		}
	}
}

// checkEscape checks the escape sequence at data[i] ('\') and returns its length.
func checkEscape(data []byte, i int) (int, string) {
	if i+1 >= len(data) {
		return 0, "unterminated string"
	}
	switch data[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, ""
	case 'u':
	default:
		return 0, "invalid escape sequence"
	}
	r, ok := hex4(data, i+2)
	if !ok {
		return 0, "invalid \\u escape"
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, "lone low surrogate escape"
	case r >= 0xD800 && r <= 0xDBFF:
		if i+11 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
			if lo, ok := hex4(data, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				return 12, ""
			}
		}
		return 0, "lone high surrogate escape"
	}
	return 6, ""
}

func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unescape returns the code point of the checked escape at raw[i] and its length.
func unescape(raw []byte, i int) (rune, int) {
	switch raw[i+1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, _ := hex4(raw, i+2)
		if r >= 0xD800 && r <= 0xDBFF {
			lo, _ := hex4(raw, i+8)
			return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12
		}
		return r, 6
	}
	return rune(raw[i+1]), 2
}

// appendUnescaped appends the text of a checked raw string content.
func appendUnescaped(b, raw []byte) []byte {
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
		b = utf8.AppendRune(b, r)
		i = j + n
	}
	return b
}
