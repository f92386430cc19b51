package conformance

// Test helpers that call the generated decode functions the way the generated handlers do.

import (
	"net/http/httptest"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime/canonical"
)

// decodePayment decodes a createPayment JSON body through the generated decode function, and
// returns its body and fingerprint.
func decodePayment(body []byte) (CreatePaymentBody, canonical.Fingerprint, error) {
	r, fp, err := fptest.Decode(operationCreatePayment(), decodeCreatePayment, httptest.NewRequest("POST", "/v1/payments", nil), "application/json", body)
	return r.Body, fp, err
}

// decodePaymentBody decodes a createPayment JSON body through the generated decode function.
func decodePaymentBody(body []byte) (CreatePaymentBody, error) {
	v, _, err := decodePayment(body)
	return v, err
}

// decodeOrderBody decodes a createOrder JSON body through the generated decode function.
func decodeOrderBody(body []byte) (CreateOrderBody, error) {
	r, _, err := fptest.Decode(operationCreateOrder(), decodeCreateOrder, httptest.NewRequest("POST", "/v1/orders", nil), "application/json", body)
	return r.Body, err
}
