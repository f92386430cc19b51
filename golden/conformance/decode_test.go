package conformance

// Test helpers that call the generated decode functions the way the generated handlers do.

import (
	"net/http/httptest"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
)

// decodePaymentBody decodes a createPayment JSON body through the generated decode function.
func decodePaymentBody(body []byte) (CreatePaymentBody, error) {
	r, _, err := fptest.Decode(operationCreatePayment(), decodeCreatePayment, httptest.NewRequest("POST", "/v1/payments", nil), "application/json", body)
	return r.Body, err
}

// decodeOrderBody decodes a createOrder JSON body through the generated decode function.
func decodeOrderBody(body []byte) (CreateOrderBody, error) {
	r, _, err := fptest.Decode(operationCreateOrder(), decodeCreateOrder, httptest.NewRequest("POST", "/v1/orders", nil), "application/json", body)
	return r.Body, err
}

// paymentFingerprint is the fingerprint of a createPayment request whose body decoded to v, sent
// as mediaType: the framing of gen.Input.Begin and the generated canonical form, as
// decodeCreatePayment adds it. in is reused, as the generated handler reuses its inputs.
func paymentFingerprint(in *gen.Input, mediaType string, v *CreatePaymentBody) canonical.Fingerprint {
	op := operationCreatePayment()
	in.Reset(httptest.NewRequest("POST", "/v1/payments", nil), nil, mediaType, mediaType, nil, nil)
	in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
	in.JSONBody(appendCanonicalPaymentRequestForCreatePayment(in.BodyStart(), v))
	return in.Sum()
}
