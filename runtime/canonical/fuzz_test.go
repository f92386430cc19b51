package canonical

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Seeds beyond the committed corpus in testdata/fuzz.
var fuzzSeeds = []string{
	`{"amount":1000,"currency":"EUR","to":"acc_9","metadata":{"b":"2","a":"1"}}`,
	`{"payer":{"name":"J","country":"NL"},"lines":[{"sku":"A","qty":1,"unit_price":10.50},{"sku":"B","qty":2}]}`,
	`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6}`,
	`[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001, -0, 1e21, 9007199254740993]`,
	`"\u0000\u001f\u007f\/\"\\ caf\u00e9"`,
	`{"a":{"a":{"a":[[],{},null,true,false]}}}`,
}

// FuzzCanonical: the generic canonicalizer never panics, refuses only with a located *Error,
// produces a fixed point, and agrees with gowebpki/jcs on inputs both accept (issue 3, item 8).
func FuzzCanonical(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := AppendCanonical(nil, data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(data) || e.Reason == "" {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		again, err := AppendCanonical(nil, out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point:\n%s\n%s (%v)", out, again, err)
		}
		if !utf8.Valid(out) {
			t.Fatalf("invalid UTF-8 output %q", out)
		}
		want, err := jcs.Transform(data)
		if err == nil && !bytes.Equal(out, want) {
			t.Fatalf("differs from jcs:\n got %s\nwant %s", out, want)
		}
	})
}

// FuzzVariants: re-serialising an accepted document with other member order, whitespace,
// string escapes and number spellings gives the same canonical form and fingerprint.
func FuzzVariants(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), uint64(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		want, err := AppendCanonical(nil, data)
		if err != nil {
			return
		}
		variant, ok := Variant(data, seed)
		if !ok {
			t.Skip("encoding/json refuses what the canonicalizer accepts")
		}
		got, err := AppendCanonical(nil, variant)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("variant %s\n got %s (%v)\nwant %s", variant, got, err, want)
		}
		fp := func(body []byte) Fingerprint {
			var fr Framer
			fr.Begin("op", "POST", "/x")
			fr.MediaType("application/json")
			if err := fr.JSONBody(body, nil); err != nil {
				t.Fatal(err)
			}
			return fr.Sum()
		}
		if fp(data) != fp(variant) {
			t.Fatalf("fingerprints differ for %s and %s", data, variant)
		}
	})
}

// Variant re-serialises a JSON document with random but equivalent member order, whitespace,
// escapes and number spellings (seeded by seed). It reports false when encoding/json cannot
// read data. Exported for the external test package (FuzzTypedPayment).
func Variant(data []byte, seed uint64) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return writeVariant(nil, v, r), true
}

// writeVariant writes v (from encoding/json with UseNumber) with random but equivalent
// spelling.
func writeVariant(b []byte, v any, r *rand.Rand) []byte {
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
		slices.Sort(keys)
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			ws()
			b = writeStringVariant(b, k, r)
			ws()
			b = append(b, ':')
			b = writeVariant(b, v[k], r)
		}
		ws()
		b = append(b, '}')
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = writeVariant(b, e, r)
		}
		ws()
		b = append(b, ']')
	case string:
		b = writeStringVariant(b, v, r)
	case json.Number:
		b = append(b, numberVariant(string(v), r)...)
	case bool:
		b = AppendBool(b, v)
	case nil:
		b = append(b, "null"...)
	}
	ws()
	return b
}

func writeStringVariant(b []byte, s string, r *rand.Rand) []byte {
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

// numberVariant spells the same decimal value differently: the decimal point moved with a
// compensating exponent, trailing zeros, 'E', an explicit '+'.
func numberVariant(num string, r *rand.Rand) string {
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
		out += mark + itoa(e)
	}
	return sign + out
}

func itoa(n int) string { return string(appendUint(nil, uint64(n))) }

// FuzzForm: the form canonicalizer never panics and its output is a fixed point.
func FuzzForm(f *testing.F) {
	for _, s := range []string{"amount=2500&currency=usd&description=Order%2042", "description=Order+42&currency=usd&amount=2500", "metadata[order]=1&a&&b=%E2%82%AC", "a=%zz"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := AppendCanonicalForm(nil, data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := AppendCanonicalForm(nil, out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q -> %q (%v)", out, again, err)
		}
	})
}
