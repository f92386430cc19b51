package conformance

import (
	"bytes"
	"testing"

	"github.com/gowebpki/jcs"
)

// FuzzCreatePaymentBody: the generated decoder never panics; on every body it accepts, the
// generated canonical form is a fixed point (decoding and canonicalizing it again gives the same
// bytes) and, while the integer amount is within ±2^53, is already canonical for the RFC 8785
// oracle (gowebpki/jcs, test-only).
//
//	go test ./golden/conformance -run x -fuzz FuzzCreatePaymentBody -fuzztime 60s
func FuzzCreatePaymentBody(f *testing.F) {
	for _, s := range []string{
		`{"amount":1000,"currency":"EUR","to":"acc_9","metadata":{"b":"2","a":"1"}}`,
		`{"amount": 1, "currency": "EUR", "to": "caf\u00e9", "zz": [1.0, 2e0, {"b": null, "a": true}], "client_timestamp": "t"}`,
		`{"amount":9007199254740993,"currency":"EUR","to":"x","description":"\ud83d\ude00"}`,
		`{"amount":1,"currency":"EUR","to":"x","\u20ac":1,"\ud800\udc00":2,"a":3}`,
		`{"amount": 100, "currency": "EUR", "to": "acc_1", "amount": 999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := decodeCreatePaymentJSON(body)
		if err != nil {
			return
		}
		c := appendCanonicalPaymentRequestForCreatePayment(nil, &v)
		v2, err := decodeCreatePaymentJSON(c)
		if err != nil {
			t.Fatalf("canonical form %s does not decode: %v", c, err)
		}
		if c2 := appendCanonicalPaymentRequestForCreatePayment(nil, &v2); !bytes.Equal(c, c2) {
			t.Fatalf("not a fixed point:\n%s\n%s", c, c2)
		}
		if v.Amount > 1<<53 || v.Amount < -(1<<53) {
			return // schema integers stay exact on purpose (issue 3 item 3); jcs would round them
		}
		o, err := jcs.Transform(c)
		if err != nil {
			t.Fatalf("oracle refuses %s: %v", c, err)
		}
		if !bytes.Equal(o, c) {
			t.Fatalf("not canonical:\n got %s\njcs %s", c, o)
		}
	})
}
