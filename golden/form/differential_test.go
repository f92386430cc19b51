package form

import (
	"bytes"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
)

// reencodesForm checks the promise of the Middleware for a form body: when the strict decoder
// accepts it, the body the wrapped handler reads parses under url.ParseQuery (what
// http.Request.ParseForm and the binders built on it use) to exactly the fields the decoder read,
// and decodes strictly again to the same value and fingerprint.
func reencodesForm[R any](op *runtime.Operation, decode func(*gen.Input) (R, error)) func(t *testing.T, data []byte) {
	return func(t *testing.T, data []byte) {
		r := httptest.NewRequest(op.Method, op.Path, nil)
		v, fp, delivered, ct, err := fptest.Reencoded(op, decode, r, formType, data)
		if err != nil {
			return
		}
		if ct != "" {
			t.Fatalf("%s: a form changed its Content-Type to %q", op.ID, ct)
		}
		fields, err := canonical.ParseForm(data)
		if err != nil {
			t.Fatalf("%s: the decoder accepted %q, which ParseForm refuses: %v", op.ID, data, err)
		}
		want := url.Values{}
		for _, f := range fields {
			want[f.Name] = append(want[f.Name], f.Value)
		}
		got, err := url.ParseQuery(string(delivered))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: url.ParseQuery reads the re-encoding %q of %q as\n%v (%v)\nthe decoder read\n%v", op.ID, delivered, data, got, err, want)
		}
		v2, fp2, again, _, err := fptest.Reencoded(op, decode, r, formType, delivered)
		if err != nil || fp2 != fp || !bytes.Equal(again, delivered) || !reflect.DeepEqual(v2, v) {
			t.Fatalf("%s: the re-encoding %q of %q decodes again with %v, fingerprint equal %v, value equal %v, re-encoding %q",
				op.ID, delivered, data, err, fp2 == fp, reflect.DeepEqual(v2, v), again)
		}
	}
}

var formOperations = []func(t *testing.T, data []byte){
	reencodesForm(operationCreateCustomer(), decodeCreateCustomer),
	reencodesForm(operationCreatePaymentIntent(), decodeCreatePaymentIntent),
	reencodesForm(operationCreateNote(), decodeCreateNote),
}

// A pair that ParseForm reads and url.ParseQuery drops ("a;b": Go refuses ';' as a separator
// since 1.17 and skips the whole pair) reaches the handler, and a case variant of a declared
// field, which echo's binder takes for it, is refused.
func TestReencodedForm(t *testing.T) {
	op := operationCreateCustomer()
	const body = "email=a%40b.example&metadata[order]=a;b&balance=%2B5"
	naive, _ := url.ParseQuery(body)
	if _, ok := naive["metadata[order]"]; ok {
		t.Fatalf("url.ParseQuery now reads %q: %v", body, naive)
	}
	v, _, delivered, _, err := fptest.Reencoded(op, decodeCreateCustomer, httptest.NewRequest("POST", "/v1/customers", nil), formType, []byte(body))
	if err != nil || *v.Body.MetadataOrder != "a;b" || *v.Body.Balance != 5 {
		t.Fatalf("%+v %v", v, err)
	}
	handler, err := url.ParseQuery(string(delivered))
	if err != nil || handler.Get("metadata[order]") != "a;b" || handler.Get("balance") != "+5" {
		t.Errorf("the handler reads %q as %v (%v)", delivered, handler, err)
	}
	for _, variant := range []string{"email=a%40b.example&EMAIL=c", "email=a%40b.example&Preferred_Locales=x", "email=a%40b.example&Metadata[order]=1"} {
		if _, _, _, _, err := fptest.Reencoded(op, decodeCreateCustomer, httptest.NewRequest("POST", "/v1/customers", nil), formType, []byte(variant)); err == nil {
			t.Errorf("%s: accepted", variant)
		}
	}
	intent := "amount=1&currency=eur&Currency=usd"
	if _, _, _, _, err := fptest.Reencoded(operationCreatePaymentIntent(), decodeCreatePaymentIntent, httptest.NewRequest("POST", "/v1/payment_intents", nil), formType, []byte(intent)); err == nil {
		t.Errorf("%s: accepted", intent)
	}
	for _, f := range formOperations {
		f(t, []byte("email=x&amount=1&currency=eur&text=t&items[0][price]=p&metadata[k]=v&expand[]=a&expand[]=b&x=%3B"))
	}
}

// FuzzReencodedForm is the differential fuzzer of form bodies, flat (createCustomer,
// createNote) and bracketed (createPaymentIntent: nested objects, maps, arrays, Stripe's
// empty-value sentinel): for every body the strict decoder accepts, url.ParseQuery reads the body the
// Middleware hands the handler as the decoder read it (reencodesForm).
//
//	go test ./golden/form -run '^$' -fuzz FuzzReencodedForm -fuzztime 60s
func FuzzReencodedForm(f *testing.F) {
	for _, s := range []string{
		"email=a%40b.example&metadata%5Border%5D=42&idempotency_key=key-0001-aaaaaaaaaaaa&tax_exempt=none&client_ip=10.0.0.1",
		"email=x&preferred_locales[1]=b&preferred_locales[0]=a&note=a;b&x=+&&y",
		"amount=100&currency=eur&metadata[order]=42&items[0][price]=p_1&items[0][quantity]=2&items[1][price]=p_2&shipping[name]=A&shipping[address][city]=Paris&expand[]=a&expand[]=b",
		"amount=1&currency=eur&description=&metadata=&shipping=&levels[0][0]=1&levels[1][0]=2&payment_method_data[type]=card&options[x]=%7B%7D",
		"text=hello&pinned=true&Pinned=false",
		"amount=1&currency=eur&billing_address[city]=%C3%A9&capture_method=manual&confirm=false",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, check := range formOperations {
			check(t, data)
		}
	})
}
