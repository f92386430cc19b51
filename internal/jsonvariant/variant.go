// Package jsonvariant re-serialises a JSON document with another, equivalent spelling: member
// order, whitespace, string escapes and number spellings chosen at random from a seed. Fuzz
// tests use it to check that equivalent requests get equal fingerprints: the generic
// canonicalizer's (runtime/canonical) and the generated typed ones' (golden/conformance);
// idemgen conform sends its variants to a live service, which must replay them. It is test
// support and has no place on a request path.
package jsonvariant

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Of re-serialises data with random but equivalent member order, whitespace, escapes and
// number spellings, the same for the same seed. It reports false when encoding/json cannot read
// data (the variant is then undefined). Member names are kept as encoding/json reads them, so a
// document with duplicate member names has no faithful variant; callers refuse those first.
func Of(data []byte, seed uint64) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return writeValue(nil, v, r), true
}

// writeValue writes v (from encoding/json with UseNumber) with random but equivalent spelling.
func writeValue(b []byte, v any, r *rand.Rand) []byte {
	ws := func() {
		for range r.IntN(3) {
			b = append(b, " \t\n\r"[r.IntN(4)])
		}
	}
	ws()
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // map order is random beyond the seed's control
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			ws()
			b = writeString(b, k, r)
			ws()
			b = append(b, ':')
			b = writeValue(b, v[k], r)
		}
		ws()
		b = append(b, '}')
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = writeValue(b, e, r)
		}
		ws()
		b = append(b, ']')
	case string:
		b = writeString(b, v, r)
	case json.Number:
		b = append(b, number(string(v), r)...)
	case bool:
		b = strconv.AppendBool(b, v)
	case nil:
		b = append(b, "null"...)
	}
	ws()
	return b
}

// writeString writes s as a JSON string, escaping a random quarter of its characters as \u
// sequences (surrogate pairs above U+FFFF, either hex case) and some solidi as \/.
func writeString(b []byte, s string, r *rand.Rand) []byte {
	const hex = "0123456789abcdefABCDEF"
	u := func(c rune) {
		b = append(b, '\\', 'u')
		for shift := 12; shift >= 0; shift -= 4 {
			d := int(c>>shift) & 15
			if d >= 10 && r.IntN(2) == 0 {
				d += 6 // upper-case hex digit
			}
			b = append(b, hex[d])
		}
	}
	b = append(b, '"')
	for _, c := range s {
		switch {
		case r.IntN(4) == 0:
			if c >= 0x10000 {
				c -= 0x10000
				u(0xD800 + c>>10)
				u(0xDC00 + c&0x3FF)
			} else {
				u(c)
			}
		case c == '"' || c == '\\':
			b = append(b, '\\', byte(c))
		case c == '/' && r.IntN(2) == 0:
			b = append(b, '\\', '/')
		case c < 0x20:
			u(c)
		default:
			b = utf8.AppendRune(b, c)
		}
	}
	return append(b, '"')
}

// number spells the same decimal value differently: the decimal point moved with a
// compensating exponent, trailing zeros, 'E', an explicit '+'.
func number(num string, r *rand.Rand) string {
	sign := ""
	if strings.HasPrefix(num, "-") {
		sign, num = "-", num[1:]
	}
	mant, exp := num, 0
	if i := strings.IndexAny(num, "eE"); i >= 0 {
		mant = num[:i]
		e := strings.TrimLeft(num[i+1:], "+-")
		if len(e) > 6 {
			return sign + num // a huge exponent: keep it
		}
		for _, c := range e {
			exp = exp*10 + int(c-'0')
		}
		if strings.Contains(num[i+1:], "-") {
			exp = -exp
		}
	}
	// value = digits × 10^exp
	digits := mant
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		digits = mant[:i] + mant[i+1:]
		exp -= len(mant) - i - 1
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		digits = "0"
	}
	k := r.IntN(3)
	digits += strings.Repeat("0", k)
	exp -= k
	// Put the point after p digits: digits × 10^exp = d[:p].d[p:] × 10^(exp+len-p).
	p := 1 + r.IntN(len(digits))
	if digits[0] == '0' {
		p = 1 // zero: no leading zeros
	}
	out := digits[:p]
	if p < len(digits) {
		out += "." + digits[p:]
	}
	if e := exp + len(digits) - p; e != 0 || r.IntN(2) == 0 {
		mark := []string{"e", "E", "e+", "E+"}[r.IntN(4)]
		if e < 0 {
			mark = mark[:1] + "-"
			e = -e
		}
		out += mark + strconv.Itoa(e)
	}
	return sign + out
}
