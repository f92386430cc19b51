package canonical

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/idemgen/idemgen/internal/jsonvariant"
)

// Seeds beyond the committed corpus in testdata/fuzz.
var fuzzSeeds = []string{
	`{"amount":1000,"currency":"EUR","to":"acc_9","metadata":{"b":"2","a":"1"}}`,
	`{"payer":{"name":"J","country":"NL"},"lines":[{"sku":"A","qty":1,"unit_price":10.50},{"sku":"B","qty":2}]}`,
	`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6}`,
	`[333333333.3333333, 1E30, 4.50, 2e-3, 0.000000000000000000000000001, -0, 1e21, 9007199254740992, 5e-324]`,
	// Refused: not exactly a double (jcs rounds them, so only the refusal path is exercised).
	`[333333333.33333329]`,
	`{"meta":{"n":123456789012345678901234567890}}`,
	`[0.30000000000000001, 9007199254740993, 1e-400]`,
	`"\u0000\u001f\u007f\/\"\\ caf\u00e9"`,
	`{"a":{"a":{"a":[[],{},null,true,false]}}}`,
}

// FuzzCanonical: the generic canonicalizer never panics, refuses only with a located *Error,
// produces a fixed point, and agrees with gowebpki/jcs (RFC 8785) on inputs both accept.
// jcs accepts more: it rounds numbers a double does not hold exactly, which idemgen refuses
// (see "Numbers" in the package doc), so those inputs end at the refusal check.
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
		variant, ok := jsonvariant.Of(data, seed)
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
