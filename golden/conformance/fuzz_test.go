package conformance

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/idemgen/idemgen/internal/cases"
	"github.com/idemgen/idemgen/internal/jsonvariant"
	"github.com/idemgen/idemgen/runtime/canonical"
)

// FuzzCreatePaymentBody on the generated decoder, canonicalizer and fingerprint
// of createPayment (fingerprint.exclude: [/client_timestamp]):
//   - the decoder never panics and refuses only with a *canonical.Error located inside the body;
//   - for an accepted body whose amount is exact in a double (beyond 2^53 the typed path stays
//     exact on purpose, docs/design.md section 3), the typed canonical form equals the generic
//     canonicalizer's with /client_timestamp left out, and is already canonical for the RFC 8785
//     oracle gowebpki/jcs (test-only);
//   - the canonical form decodes again to the same canonical form (a fixed point);
//   - an equivalent re-serialisation (other member order, whitespace, escapes and number
//     spellings: internal/jsonvariant, seeded by seed) decodes to the same fingerprint.
//
// Seeds: the bodies below, every request body of the shared cases and the JSON inputs of the
// RFC 8785 test vectors (read at run time: this folder cannot hold a testdata corpus, TestGolden
// compares its files with the generator's output).
//
//	go test ./golden/conformance -run '^$' -fuzz FuzzCreatePaymentBody -fuzztime 60s
func FuzzCreatePaymentBody(f *testing.F) {
	for i, s := range []string{
		`{"amount":1000,"currency":"EUR","to":"acc_9","metadata":{"b":"2","a":"1"}}`,
		"{\n  \"metadata\" : { \"a\":\"1\", \"b\":\"2\" },\n  \"to\" : \"acc_9\", \"currency\":\"EUR\", \"amount\" : 1000\n}",
		`{"amount": 55, "currency": "EUR", "to": "acc_1", "client_timestamp": "2026-11-30T10:00:00Z"}`,
		`{"amount": 9, "currency": "EUR", "to": "acc_1", "description": "caf\u00e9 \/ bar"}`,
		`{"amount": 1, "currency": "EUR", "to": "caf\u00e9", "zz": [1.0, 2e0, {"b": null, "a": true}], "client_timestamp": "t"}`,
		`{"amount":1e3,"currency":"\u20acUR","to":"x","zz":[1,{"b":2,"a":1}],"Amount":5,"\ud83d\ude00":1}`,
		`{"amount":9007199254740993,"currency":"EUR","to":"x","description":"\ud83d\ude00"}`,
		`{"amount":1,"currency":"EUR","to":"x","\u20ac":1,"\ud800\udc00":2,"a":3}`,
		`{"amount": 100, "currency": "EUR", "to": "acc_1", "amount": 999}`,
		`{"amount":1,"currency":"EUR","to":"x","metadata":{"a":"1","a":"2"}}`,
		`{"amount":1,"currency":"EUR","to":"x","zz":{"c":1,"c":2}}`,
		`{"amount":1,"currency":"EUR","to":"x","zz":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
		`{"amount":9223372036854775808,"currency":"EUR","to":"x"}`,
		`{"amount":1,"currency":"EUR","to":"x","zz":[1e308,1e309,-1e400,1e-400,5e-324,-0]}`,
		`{"amount":1,"currency":"EUR","to":"x"} {}`,
		"\xef\xbb\xbf{\"amount\":1,\"currency\":\"EUR\",\"to\":\"x\"}",
		"{\"amount\":1,\"currency\":\"EUR\",\"to\":\"\xff\"}",
		`{"amount":1,"currency":"EUR","to":"\udc00\ud800"}`,
	} {
		f.Add([]byte(s), uint64(i))
	}
	seeds := 0
	if list, err := cases.LoadDir(filepath.Join("..", "..", "testdata", "cases")); err == nil {
		for _, c := range list {
			for _, s := range c.Steps {
				if s.Request.Body != nil {
					f.Add(s.Request.Body, uint64(seeds))
					seeds++
				}
			}
		}
	}
	vectors, _ := filepath.Glob(filepath.Join("..", "..", "runtime", "canonical", "testdata", "jcs", "input", "*.json"))
	for _, v := range vectors {
		if raw, err := os.ReadFile(v); err == nil {
			f.Add(raw, uint64(seeds))
			seeds++
		}
	}
	if seeds < 40 {
		f.Fatalf("only %d seeds from testdata/cases and the RFC 8785 vectors", seeds)
	}
	ex, err := canonical.NewExclusion("/client_timestamp")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		v, fp, err := decodePayment(data)
		if err != nil {
			var e *canonical.Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(data) {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		typed := appendCanonicalPaymentRequestForCreatePayment(nil, &v)
		if v.Amount <= 1<<53 { // the schema's minimum is 1
			generic, err := canonical.AppendCanonicalExcluding(nil, data, ex)
			if err != nil || !bytes.Equal(typed, generic) {
				t.Fatalf("typed %s\ngeneric %s (%v)", typed, generic, err)
			}
			o, err := jcs.Transform(typed)
			if err != nil || !bytes.Equal(o, typed) {
				t.Fatalf("not canonical:\n got %s\njcs %s (%v)", typed, o, err)
			}
		}
		v2, err := decodePaymentBody(typed)
		if err != nil {
			t.Fatalf("canonical form %s refused: %v", typed, err)
		}
		if again := appendCanonicalPaymentRequestForCreatePayment(nil, &v2); !bytes.Equal(again, typed) {
			t.Fatalf("not a fixed point:\n%s\n%s", typed, again)
		}
		variant, ok := jsonvariant.Of(data, seed)
		if !ok {
			return
		}
		_, fp3, err := decodePayment(variant)
		if err != nil {
			t.Fatalf("variant %s refused: %v", variant, err)
		}
		if fp3 != fp {
			t.Fatalf("variant %s of %s has another fingerprint", variant, data)
		}
	})
}
