package conformance

import (
	"crypto/sha256"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/gowebpki/jcs"
)

// The whole path a request body takes in generated code (strict decode with schema checks, then
// the fingerprint) against the usual baseline, in the same run: encoding/json into an
// equivalent struct, gowebpki/jcs of the raw bytes, SHA-256.
//
//	go test ./golden/conformance -run x -bench . -benchmem -count 10 | benchstat
var paymentBody = []byte(`{"amount": 1000, "currency": "EUR", "to": "acc_9", "description": "order 42",
 "metadata": {"order": "42", "customer": "c_7"}, "client_timestamp": "2026-11-30T10:00:00Z"}`)

func BenchmarkCreatePayment(b *testing.B) {
	r := httptest.NewRequest("POST", "/v1/payments", nil)
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := decodeCreatePaymentJSON(paymentBody)
			if err != nil {
				b.Fatal(err)
			}
			_ = fingerprintCreatePayment(r, "application/json", paymentBody, &CreatePaymentParams{}, &v)
		}
	})
	b.Run("encoding-json+jcs", func(b *testing.B) {
		type payment struct {
			Amount          int64             `json:"amount"`
			Currency        string            `json:"currency"`
			To              string            `json:"to"`
			Description     *string           `json:"description"`
			Metadata        map[string]string `json:"metadata"`
			ClientTimestamp *string           `json:"client_timestamp"`
		}
		b.ReportAllocs()
		for b.Loop() {
			var v payment
			if err := json.Unmarshal(paymentBody, &v); err != nil {
				b.Fatal(err)
			}
			c, err := jcs.Transform(paymentBody)
			if err != nil {
				b.Fatal(err)
			}
			_ = sha256.Sum256(c)
		}
	})
}
