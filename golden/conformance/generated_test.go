package conformance

// Hand-written tests of the generated code (the golden comparison ignores *_test.go files).
// They exercise the decoders, canonicalizers and fingerprints the generator emitted for
// testdata/specs/conformance.yaml, with the request bodies of the shared cases
// (testdata/cases 003, 004, 013-018, copied from the shared request-sequence cases), without a database.

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
)

func paymentFP(t *testing.T, body string) canonical.Fingerprint {
	t.Helper()
	fp, err := fingerprintRequest("POST", "/v1/payments", "application/json", []byte(body))
	if err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return fp
}

func orderFP(t *testing.T, body string) canonical.Fingerprint {
	t.Helper()
	fp, err := fingerprintRequest("POST", "/v1/orders", "application/json", []byte(body))
	if err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return fp
}

func TestFingerprintEquivalences(t *testing.T) {
	tests := []struct {
		name  string
		fp    func(*testing.T, string) canonical.Fingerprint
		a, b  string
		equal bool
	}{
		{"003 member order and whitespace", paymentFP,
			`{"amount":1000,"currency":"EUR","to":"acc_9","metadata":{"b":"2","a":"1"}}`,
			"{\n  \"metadata\" : { \"a\":\"1\", \"b\":\"2\" },\n  \"to\" : \"acc_9\", \"currency\":\"EUR\", \"amount\" : 1000\n}", true},
		{"004 nested member order", orderFP,
			`{"payer":{"name":"J","country":"NL"},"lines":[{"sku":"A","qty":1},{"sku":"B","qty":2}]}`,
			`{"lines":[{"qty":1,"sku":"A"},{"qty":2,"sku":"B"}],"payer":{"country":"NL","name":"J"}}`, true},
		{"004 array order matters", orderFP,
			`{"payer":{"name":"J","country":"NL"},"lines":[{"sku":"A","qty":1},{"sku":"B","qty":2}]}`,
			`{"payer":{"name":"J","country":"NL"},"lines":[{"sku":"B","qty":2},{"sku":"A","qty":1}]}`, false},
		{"013 excluded member ignored", paymentFP,
			`{"amount": 55, "currency": "EUR", "to": "acc_1", "client_timestamp": "2026-11-30T10:00:00Z"}`,
			`{"amount": 55, "currency": "EUR", "to": "acc_1", "client_timestamp": "2026-11-30T10:00:07Z"}`, true},
		{"013 other members still count", paymentFP,
			`{"amount": 55, "currency": "EUR", "to": "acc_1", "client_timestamp": "2026-11-30T10:00:00Z"}`,
			`{"amount": 56, "currency": "EUR", "to": "acc_1", "client_timestamp": "2026-11-30T10:00:07Z"}`, false},
		{"014 number spellings", orderFP,
			`{"payer":{"name":"Q"},"lines":[{"sku":"A","qty":1,"unit_price":10.5}]}`,
			`{"payer":{"name":"Q"},"lines":[{"sku":"A","qty":1,"unit_price":1.05e1}]}`, true},
		{"014 different number", orderFP,
			`{"payer":{"name":"Q"},"lines":[{"sku":"A","qty":1,"unit_price":10.5}]}`,
			`{"payer":{"name":"Q"},"lines":[{"sku":"A","qty":1,"unit_price":10.51}]}`, false},
		{"015 string escapes", paymentFP,
			`{"amount":1,"currency":"EUR","to":"caf\u00e9 \/x"}`,
			`{"amount":1,"currency":"EUR","to":"café /x"}`, true},
		{"excluded map key ignored", orderFP,
			`{"payer":{"name":"J"},"lines":[],"metadata":{"trace_id":"a","k":"v"}}`,
			`{"payer":{"name":"J"},"lines":[],"metadata":{"k":"v","trace_id":"b"}}`, true},
		{"other map keys count", orderFP,
			`{"payer":{"name":"J"},"lines":[],"metadata":{"k":"v"}}`,
			`{"payer":{"name":"J"},"lines":[],"metadata":{"k":"w"}}`, false},
		{"undeclared members are fingerprinted", paymentFP,
			`{"amount":1,"currency":"EUR","to":"x","zzz":{"b":1,"a":2},"aaa":true}`,
			`{"aaa":true,"amount":1,"currency":"EUR","to":"x","zzz":{"a":2,"b":1}}`, true},
		{"undeclared member value counts", paymentFP,
			`{"amount":1,"currency":"EUR","to":"x","zzz":1}`,
			`{"amount":1,"currency":"EUR","to":"x","zzz":2}`, false},
		{"absent and empty map differ", orderFP,
			`{"payer":{"name":"J"},"lines":[]}`,
			`{"payer":{"name":"J"},"lines":[],"metadata":{}}`, false},
		{"exact integers", paymentFP,
			`{"amount":9007199254740993,"currency":"EUR","to":"x"}`,
			`{"amount":9007199254740992,"currency":"EUR","to":"x"}`, false},
		{"integer spellings, escapes and exclusion together", paymentFP,
			`{"amount":9007199254740992,"currency":"EUR","to":"a"}`,
			`{"to":"a","amount":9007199254740992.0,"currency":"\u0045UR","client_timestamp":"now"}`, true},
		{"undeclared member present or absent", paymentFP,
			`{"amount":1,"currency":"EUR","to":"x"}`,
			`{"amount":1,"currency":"EUR","to":"x","x":1}`, false},
		{"absent and empty optional string differ", paymentFP,
			`{"amount":1,"currency":"EUR","to":"x"}`,
			`{"amount":1,"currency":"EUR","to":"x","description":""}`, false},
		{"absent and empty payment metadata differ", paymentFP,
			`{"amount":1,"currency":"EUR","to":"x"}`,
			`{"amount":1,"currency":"EUR","to":"x","metadata":{}}`, false},
		{"string values are case-sensitive", paymentFP,
			`{"amount":1,"currency":"EUR","to":"x"}`,
			`{"amount":1,"currency":"EUr","to":"x"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tt.fp(t, tt.a), tt.fp(t, tt.b)
			if (a == b) != tt.equal {
				t.Errorf("fingerprints equal = %v, want %v\n a: %s\n b: %s", a == b, tt.equal, a, b)
			}
		})
	}
}

// The media type is framed: the same body sent as another media type is another request.
func TestMediaTypeIsFingerprinted(t *testing.T) {
	body := []byte(`{"amount":1,"currency":"EUR","to":"x"}`)
	r := httptest.NewRequest("POST", "/v1/payments", nil)
	_, a, err := fptest.Decode(operationCreatePayment(), decodeCreatePayment, r, "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := fptest.Decode(operationCreatePayment(), decodeCreatePayment, r, "application/merge-patch+json", body)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Error("media type not framed")
	}
}

// The generated canonical form of a typed body equals the generic canonicalizer's output for the
// raw body with the operation's fingerprint.exclude pointers applied, for bodies without
// integers beyond 2^53 (where the typed path deliberately stays exact); the benchmark bodies of
// bench_test.go are among them, so the benchmarks compare like with like.
func TestTypedMatchesGeneric(t *testing.T) {
	payment := func(raw []byte) ([]byte, error) {
		v, err := decodePaymentBody(raw)
		return appendCanonicalPaymentRequestForCreatePayment(nil, &v), err
	}
	order := func(raw []byte) ([]byte, error) {
		v, err := decodeOrderBody(raw)
		return appendCanonicalCreateOrderBodyForCreateOrder(nil, &v), err
	}
	tests := []struct {
		exclude string
		typed   func([]byte) ([]byte, error)
		body    []byte
	}{
		{"/client_timestamp", payment, []byte(`{"amount":1000,"currency":"EUR","to":"acc_9","metadata":{"b":"2","a":"1"}}`)},
		{"/client_timestamp", payment, []byte(`{"to":"x","currency":"EUR","amount":1,"zeta":[1,{"b":2,"a":1}],"AMT":5,"\ud83d\ude00":1,"a":null,"client_timestamp":"t"}`)},
		{"/client_timestamp", payment, []byte(`{"amount":10e2,"currency":"\u20acUR","to":"caf\u00e9","description":"","metadata":{}}`)},
		{"/client_timestamp", payment, readBody(t, "payment.json")},
		{"/metadata/trace_id", order, []byte(`{"payer":{"name":"J","zz":1,"country":"NL"},"lines":[{"unit_price":1.50,"sku":"A","qty":1}],"metadata":{"trace_id":"t","k":"v"},"a":[]}`)},
		{"/metadata/trace_id", order, readBody(t, "order4k.json")},
	}
	for _, tt := range tests {
		got, err := tt.typed(tt.body)
		if err != nil {
			t.Fatalf("%.60s: %v", tt.body, err)
		}
		ex, err := canonical.NewExclusion(tt.exclude)
		if err != nil {
			t.Fatal(err)
		}
		want, err := canonical.AppendCanonicalExcluding(nil, tt.body, ex)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%.60s:\n typed   %s\n generic %s", tt.body, got, want)
		}
	}
}

// The fingerprint of a decoded fixed-shape body costs at most 2 allocations.
// It counts allocations, not time: the count is a property of the code, not of the machine.
func TestFingerprintAllocs(t *testing.T) {
	v, err := decodePaymentBody(readBody(t, "payment.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in gen.Input
	r := httptest.NewRequest("POST", "/v1/payments", nil)
	op := operationCreatePayment()
	// By hand, not runtime.Fingerprint: that reads the body and allocates its exchange, which is not counted here.
	fp := func() {
		in.Reset(r, nil, "application/json", "application/json", nil, nil)
		in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
		in.JSONBody(appendCanonicalPaymentRequestForCreatePayment(in.BodyStart(), &v))
		in.Sum()
	}
	fp() // warm the Framer's buffer pool
	if n := testing.AllocsPerRun(200, fp); n > 2 {
		t.Errorf("%v allocations per fingerprint, want at most 2", n)
	}
}

func TestCanonicalFormOfPayment(t *testing.T) {
	v, err := decodePaymentBody([]byte(`{"to":"acc","metadata":{"b":"2","a":"1"},"amount":10,"currency":"EUR","client_timestamp":"t","description":"d","x":[1.0,2e0]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := string(appendCanonicalPaymentRequestForCreatePayment(nil, &v))
	want := `{"amount":10,"currency":"EUR","description":"d","metadata":{"a":"1","b":"2"},"to":"acc","x":[1,2]}`
	if got != want {
		t.Errorf("canonical form\n got %s\nwant %s", got, want)
	}
}

func TestDecoderRefuses(t *testing.T) {
	tests := []struct {
		name, body, pointer string
	}{
		{"016 duplicate member", `{"amount": 100, "currency": "EUR", "to": "acc_1", "amount": 999}`, "/amount"},
		{"duplicate map key", `{"amount":1,"currency":"EUR","to":"x","metadata":{"a":"1","a":"2"}}`, "/metadata/a"},
		{"missing required", `{"amount":1,"currency":"EUR"}`, ""},
		{"minimum", `{"amount":0,"currency":"EUR","to":"x"}`, "/amount"},
		{"length", `{"amount":1,"currency":"EURO","to":"x"}`, "/currency"},
		{"wrong type", `{"amount":"1","currency":"EUR","to":"x"}`, "/amount"},
		{"fraction for integer", `{"amount":1.5,"currency":"EUR","to":"x"}`, "/amount"},
		{"above int64", `{"amount":9223372036854775808,"currency":"EUR","to":"x"}`, "/amount"},
		{"name differing in case only", `{"amount":1,"Amount":600,"currency":"EUR","to":"x"}`, "/Amount"},
		{"the variant first", `{"Amount":600,"amount":1,"currency":"EUR","to":"x"}`, "/Amount"},
		{"the variant alone", `{"amount":1,"currency":"EUR","TO":"x","to":"y"}`, "/TO"},
		{"long s folds to s", `{"amount":1,"currency":"EUR","to":"x","de\u017fcription":"d"}`, "/de\u017fcription"},
		{"nested objects too", `{"payer":{"name":"a","NAME":"b"},"lines":[]}`, "/payer/NAME"},
		{"trailing bytes", `{"amount":1,"currency":"EUR","to":"x"} {}`, ""},
		{"invalid UTF-8", "{\"amount\":1,\"currency\":\"EUR\",\"to\":\"\xff\"}", "/to"},
		{"lone surrogate", `{"amount":1,"currency":"EUR","to":"\ud800"}`, "/to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodePaymentBody([]byte(tt.body))
			if strings.HasPrefix(tt.body, `{"payer"`) {
				_, err = decodeOrderBody([]byte(tt.body))
			}
			var ce *canonical.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *canonical.Error", err)
			}
			if tt.pointer != "" && ce.Pointer != tt.pointer {
				t.Errorf("pointer = %q, want %q (%v)", ce.Pointer, tt.pointer, err)
			}
		})
	}
}

func TestBodyKeyIsNotRequiredCheckedNorFingerprinted(t *testing.T) {
	// 017: a body without its key decodes (key-missing is the runtime's answer, not body-invalid).
	transfer := func(body string) (CreateTransferRequest, canonical.Fingerprint, error) {
		r := httptest.NewRequest("POST", "/v1/transfers", nil)
		return fptest.Decode(operationCreateTransfer(), decodeCreateTransfer, r, "application/json", []byte(body))
	}
	v, _, err := transfer(`{"amount": 500, "destination": "acc_x"}`)
	if err != nil {
		t.Fatalf("missing body key: %v", err)
	}
	if v.Body.IdempotencyKey != nil {
		t.Fatalf("IdempotencyKey = %q, want nil", *v.Body.IdempotencyKey)
	}
	fp := func(body string) canonical.Fingerprint {
		_, fp, err := transfer(body)
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	a := fp(`{"idempotency_key": "tr-0017-nnnnnn", "amount": 500, "destination": "acc_x"}`)
	b := fp(`{"destination": "acc_x", "amount": 500, "idempotency_key": "another-key-xx"}`)
	if a != b {
		t.Error("the body key changed the fingerprint")
	}
}

func TestFormFingerprint(t *testing.T) {
	// 018: percent-encoding variants and field order do not matter; values do.
	charge := func(body string) (canonical.Fingerprint, error) {
		r := httptest.NewRequest("POST", "/v1/charges", nil)
		_, fp, err := fptest.Decode(operationCreateCharge(), decodeCreateCharge, r, "application/x-www-form-urlencoded", []byte(body))
		return fp, err
	}
	fp := func(body string) canonical.Fingerprint {
		fp, err := charge(body)
		if err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		return fp
	}
	a := fp("amount=2500&currency=usd&description=Order%2042")
	if b := fp("description=Order+42&currency=usd&amount=2500"); a != b {
		t.Error("equivalent forms fingerprint differently")
	}
	if c := fp("amount=2600&currency=usd&description=Order%2042"); a == c {
		t.Error("a changed amount kept the fingerprint")
	}
	for _, bad := range []string{"currency=usd", "amount=x&currency=usd", "amount=1&amount=2&currency=usd", "amount=1&currency=%zz"} {
		if _, err := charge(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestPathParametersAreFingerprinted(t *testing.T) {
	// 019: the same key and body for a refund of another payment is another request.
	fp := func(id string) canonical.Fingerprint {
		r := httptest.NewRequest("POST", "/v1/payments/"+id+"/refunds", nil)
		r.SetPathValue("payment_id", id)
		req, fp, err := fptest.Decode(operationCreateRefund(), decodeCreateRefund, r, "application/json", []byte(`{"amount": 100}`))
		if err != nil {
			t.Fatal(err)
		}
		if req.Params.PaymentID != id {
			t.Fatalf("PaymentID = %q", req.Params.PaymentID)
		}
		return fp
	}
	if fp("pay_1") == fp("pay_2") {
		t.Error("path parameter not part of the fingerprint")
	}
}

func TestOperationsAreDistinct(t *testing.T) {
	// 020: the same body on two operations is two requests (the operationId is framed).
	body := []byte(`{"amount": 800}`)
	r := httptest.NewRequest("POST", "/", nil)
	_, a, err1 := fptest.Decode(operationCreateProviderCharge(), decodeCreateProviderCharge, r, "application/json", body)
	_, b, err2 := fptest.Decode(operationCreateRefund(), decodeCreateRefund, r, "application/json", body)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if a == b {
		t.Error("two operations share a fingerprint")
	}
}

// A bracketed form field whose brackets do not parse is refused, whatever the name before them:
// gin's PostFormMap("metadata") reads "metadata[[]" as metadata's key "[" and "metadata[a]]"
// as its key "a", fiber's binder refuses a body holding "[" or "extra[[]" ("unmatched
// brackets"), so no reading is the one the fingerprint covers. Empty brackets inside an
// object ("metadata[]") are refused too: a key "" to the decoder, none to PostFormMap.
func TestFormBracketsThatDoNotParse(t *testing.T) {
	charge := func(body string) error {
		_, _, err := fptest.Decode(operationCreateCharge(), decodeCreateCharge, httptest.NewRequest("POST", "/v1/charges", nil), "application/x-www-form-urlencoded", []byte(body))
		return err
	}
	for _, bad := range []string{"amount=1&currency=usd&metadata[[]=x", "amount=1&currency=usd&metadata[a]]=x", "amount=1&currency=usd&Metadata[a]]=x", "amount=1&currency=usd&items[0][price]=p&items[0][price[]=q",
		"amount=1&currency=usd&metadata[]=x", "amount=1&currency=usd&metadata[]=&metadata[a]=1",
		"amount=0&currency&[", "amount=1&currency=usd&extra[[]=x&metadata[a]=1", "amount=1&currency=usd&x]y=1"} {
		var ce *canonical.Error
		if err := charge(bad); !errors.As(err, &ce) {
			t.Errorf("%q: %v, want a located refusal", bad, err)
		}
	}
	if err := charge("amount=1&currency=usd&extra[a][b]=x&metadata[a]=1"); err != nil {
		t.Errorf("an undeclared field with brackets that parse: %v", err)
	}
}
