package conformance

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/idemgen/idemgen/internal/cases"
	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/gen"
)

// jsonOperation is one JSON operation of the conformance API, for the differential fuzzer.
type jsonOperation struct {
	op    *runtime.Operation
	check func(t *testing.T, body []byte)
}

// reencodes checks the promise of the Middleware for one operation and body: when the strict
// decoder accepts body, the body the wrapped handler reads (gen.Input.ReencodedBody) decodes
// under encoding/json into the generated request type to the decoded value (undeclared members
// aside: the generated types keep them for the fingerprint only), and decodes strictly again
// to the same value and fingerprint, so every request with one fingerprint gives a handler one
// value whatever the spelling sent.
func reencodes[R any](op *runtime.Operation, decode func(*gen.Input) (R, error), body func(*R) any) func(t *testing.T, data []byte) {
	return func(t *testing.T, data []byte) {
		r := httptest.NewRequest(op.Method, op.Path, nil)
		r.SetPathValue("payment_id", "pay_1")
		v, fp, delivered, ct, err := fptest.Reencoded(op, decode, r, "application/json", data)
		if err != nil {
			return
		}
		if ct != "" {
			t.Fatalf("%s: a JSON body changed its Content-Type to %q", op.ID, ct)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, delivered); err != nil || !bytes.Equal(compact.Bytes(), delivered) {
			t.Fatalf("%s: re-encoding %q of %q is not compact JSON (%v)", op.ID, delivered, data, err)
		}
		want := body(&v)
		got := reflect.New(reflect.TypeOf(want).Elem())
		if err := json.Unmarshal(delivered, got.Interface()); err != nil {
			t.Fatalf("%s: encoding/json refuses the re-encoding %s of %q: %v", op.ID, delivered, data, err)
		}
		fptest.WithoutExtra(want)
		if !reflect.DeepEqual(got.Interface(), want) {
			t.Fatalf("%s: encoding/json reads the re-encoding %s of %q as\n%#v\nthe decoder read\n%#v", op.ID, delivered, data, got.Elem().Interface(), reflect.ValueOf(want).Elem().Interface())
		}
		v2, fp2, again, _, err := fptest.Reencoded(op, decode, r, "application/json", delivered)
		if err != nil || fp2 != fp || !bytes.Equal(again, delivered) {
			t.Fatalf("%s: the re-encoding %s of %q decodes again with %v, fingerprint equal %v, re-encoding %s", op.ID, delivered, data, err, fp2 == fp, again)
		}
		fptest.WithoutExtra(body(&v2))
		if !reflect.DeepEqual(body(&v2), want) {
			t.Fatalf("%s: the re-encoding %s decodes to another value", op.ID, delivered)
		}
	}
}

var jsonOperations = []jsonOperation{
	{operationCreatePayment(), reencodes(operationCreatePayment(), decodeCreatePayment, func(r *CreatePaymentRequest) any { return &r.Body })},
	{operationCreateOrder(), reencodes(operationCreateOrder(), decodeCreateOrder, func(r *CreateOrderRequest) any { return &r.Body })},
	{operationCreateRefund(), reencodes(operationCreateRefund(), decodeCreateRefund, func(r *CreateRefundRequest) any { return &r.Body })},
	{operationCreateTransfer(), reencodes(operationCreateTransfer(), decodeCreateTransfer, func(r *CreateTransferRequest) any { return &r.Body })},
	{operationCreateProviderCharge(), reencodes(operationCreateProviderCharge(), decodeCreateProviderCharge, func(r *CreateProviderChargeRequest) any { return &r.Body })},
}

// The reproductions of the decoder differential: what encoding/json makes of the body as sent,
// and of the body the Middleware hands the handler.
func TestReencodedBody(t *testing.T) {
	op := operationCreatePayment()
	body := func(data string) (CreatePaymentBody, []byte, error) {
		v, _, delivered, _, err := fptest.Reencoded(op, decodeCreatePayment, httptest.NewRequest("POST", "/v1/payments", nil), "application/json", []byte(data))
		return v.Body, delivered, err
	}
	// A case variant of a declared member: encoding/json takes it for the member (the last
	// one wins), the fingerprint would not. The decoder refuses it, in either order.
	for data, last := range map[string]int64{
		`{"amount":5,"Amount":600,"currency":"EUR","to":"acc_1"}`: 600,
		`{"Amount":600,"amount":5,"currency":"EUR","to":"acc_1"}`: 5,
	} {
		var naive PaymentRequest
		if err := json.Unmarshal([]byte(data), &naive); err != nil || naive.Amount != last {
			t.Fatalf("encoding/json no longer reads %s as the reproduction says (amount %d): %+v %v", data, last, naive, err)
		}
		if _, _, err := body(data); err == nil {
			t.Errorf("%s: accepted", data)
		}
	}
	// An integer in another spelling: 1500 to the decoder, refused by encoding/json as sent.
	const exp = `{"amount":1.5e3,"currency":"EUR","to":"acc_1","client_timestamp":"2026-01-01T00:00:00Z","idempotency_key":"x"}`
	var naive PaymentRequest
	if err := json.Unmarshal([]byte(exp), &naive); err == nil {
		t.Fatalf("encoding/json reads 1.5e3 into an int64 now: %+v", naive)
	}
	v, delivered, err := body(exp)
	if err != nil || v.Amount != 1500 {
		t.Fatalf("%s: %+v %v", exp, v, err)
	}
	// The excluded client_timestamp and the undeclared member are still there for the handler.
	want := `{"amount":1500,"currency":"EUR","to":"acc_1","client_timestamp":"2026-01-01T00:00:00Z","idempotency_key":"x"}`
	if string(delivered) != want {
		t.Errorf("re-encoding\n got %s\nwant %s", delivered, want)
	}
	var handler PaymentRequest
	if err := json.Unmarshal(delivered, &handler); err != nil || handler.Amount != 1500 || handler.ClientTimestamp == nil {
		t.Errorf("encoding/json reads the re-encoding as %+v, %v", handler, err)
	}
	for _, o := range jsonOperations {
		o.check(t, []byte(`{"amount":1e2,"currency":"\u0045UR","to":"caf\u00e9","destination":"d","reason":"r","payer":{"name":"n"},"lines":[{"sku":"s","qty":2.0,"unit_price":10.50}]}`))
	}
}

// FuzzReencodedBody is the differential fuzzer of the JSON bodies of the conformance API
// (createPayment, createOrder, createRefund, createTransfer, createProviderCharge): for every
// body the strict decoder accepts, encoding/json reads the body the Middleware hands the
// handler into the generated type as the decoder read it (reencodes). Seeds: the bodies of the
// shared cases and of FuzzCreatePaymentBody.
//
//	go test ./golden/conformance -run '^$' -fuzz FuzzReencodedBody -fuzztime 60s
func FuzzReencodedBody(f *testing.F) {
	for _, s := range []string{
		`{"amount":5,"Amount":600,"currency":"EUR","to":"acc_1"}`,
		`{"amount":1.5e3,"currency":"EUR","to":"acc_1","client_timestamp":"t","zz":[1.0,{"b":null,"a":true}]}`,
		`{"amount":9007199254740993,"currency":"EUR","to":"x","metadata":{"K":"1","k":"2"},"description":"\ud83d\ude00\u0000\"\\"}`,
		`{"payer":{"name":"J","zz":1e21,"country":"NL"},"lines":[{"unit_price":1.50,"sku":"A","qty":1e0},{"sku":"B","qty":-0}],"metadata":{"trace_id":"t"},"a":[]}`,
		`{"amount":100,"reason":null}`,
		`{"amount":1,"destination":"d","idempotency_key":"k-0001-transfer"}`,
		`{ "amount" : 1E1 }`,
	} {
		f.Add([]byte(s))
	}
	list, err := cases.LoadDir(filepath.Join("..", "..", "testdata", "cases"))
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range list {
		for _, s := range c.Steps {
			if len(s.Request.Body) > 0 && s.Request.Body[0] == '{' {
				f.Add(s.Request.Body)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, o := range jsonOperations {
			o.check(t, data)
		}
	})
}
