package canonical_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// FuzzTypedPayment: the generated-shape decoder never panics, refuses only with a located
// *Error, and for accepted bodies its typed canonical form equals the generic canonical form
// with the excluded /client_timestamp left out (when the amount is exact in a double, the one
// place where the typed path deliberately differs); decoding that canonical form again gives
// the same canonical form; an equivalent re-serialisation (Variant) decodes to the same
// fingerprint.
func FuzzTypedPayment(f *testing.F) {
	for _, s := range []string{
		`{"amount":1000,"currency":"EUR","to":"acc_9","metadata":{"b":"2","a":"1"}}`,
		"{\n  \"metadata\" : { \"a\":\"1\", \"b\":\"2\" },\n  \"to\" : \"acc_9\", \"currency\":\"EUR\", \"amount\" : 1000\n}",
		`{"amount": 55, "currency": "EUR", "to": "acc_1", "client_timestamp": "2026-11-30T10:00:00Z"}`,
		`{"amount": 9, "currency": "EUR", "to": "acc_1", "description": "caf\u00e9 \/ bar"}`,
		`{"amount": 100, "currency": "EUR", "to": "acc_1", "amount": 999}`,
		`{"amount":1e3,"currency":"\u20acUR","to":"x","zz":[1,{"b":2,"a":1}],"Amount":5,"\ud83d\ude00":1}`,
	} {
		f.Add([]byte(s), uint64(len(s)))
	}
	ex, err := canonical.NewExclusion("/client_timestamp")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		v, err := decodeCreatePaymentJSON(data)
		if err != nil {
			var e *canonical.Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(data) {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		typed := appendCanonicalPaymentRequest(nil, &v)
		if v.Amount <= 1<<53 {
			generic, err := canonical.AppendCanonicalExcluding(nil, data, ex)
			if err != nil || !bytes.Equal(typed, generic) {
				t.Fatalf("typed %s\ngeneric %s (%v)", typed, generic, err)
			}
		}
		v2, err := decodeCreatePaymentJSON(typed)
		if err != nil {
			t.Fatalf("canonical form refused: %v", err)
		}
		if again := appendCanonicalPaymentRequest(nil, &v2); !bytes.Equal(again, typed) {
			t.Fatalf("not a fixed point: %s -> %s", typed, again)
		}
		variant, ok := canonical.Variant(data, seed)
		if !ok {
			return
		}
		v3, err := decodeCreatePaymentJSON(variant)
		if err != nil {
			t.Fatalf("variant %s refused: %v", variant, err)
		}
		if fingerprintCreatePayment("application/json", &v3) != fingerprintCreatePayment("application/json", &v) {
			t.Fatalf("variant %s of %s has another fingerprint", variant, data)
		}
	})
}
