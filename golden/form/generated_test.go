package form

// Hand-written tests of the code generated for testdata/specs/form.yaml: a form-carried key,
// bracketed names, one operation with JSON and form bodies, and a raw body.

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime/canonical"
)

func TestFormKeyAndBracketedNames(t *testing.T) {
	decode := func(body string) (CreateCustomerRequest, canonical.Fingerprint, error) {
		return fptest.Decode(operationCreateCustomer(), decodeCreateCustomer, httptest.NewRequest("POST", "/v1/customers", nil), formType, []byte(body))
	}
	body := "email=a%40b.example&metadata%5Border%5D=42&idempotency_key=key-0001-aaaaaaaaaaaa&tax_exempt=none&client_ip=10.0.0.1"
	v, _, err := decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if v.Body.Email != "a@b.example" || v.Body.MetadataOrder == nil || *v.Body.MetadataOrder != "42" || v.Body.IdempotencyKey == nil {
		t.Fatalf("decoded %+v", v)
	}
	fp := func(body string) canonical.Fingerprint {
		_, fp, err := decode(body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return fp
	}
	// The key and the excluded client_ip do not count; field order and encoding do not either.
	other := "client_ip=10.9.9.9&tax_exempt=none&metadata[order]=42&email=a@b.example&idempotency_key=key-0002-bbbbbbbbbbbb"
	if fp(body) != fp(other) {
		t.Error("key, excluded field, order or percent-encoding changed the fingerprint")
	}
	if fp(body) == fp("email=a%40b.example&metadata%5Border%5D=43") {
		t.Error("a bracketed field's value did not count")
	}
	for _, bad := range []string{"tax_exempt=none", "email=x&tax_exempt=maybe", "email=x&balance=1.5", "email=x&email=y"} {
		if _, _, err := decode(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// The form-carried key reaches the runtime.
	_, k, ok, err := fptest.BodyKey(operationCreateCustomer(), decodeCreateCustomer, httptest.NewRequest("POST", "/v1/customers", nil), formType, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if k != "key-0001-aaaaaaaaaaaa" || !ok {
		t.Errorf("body key %q, %v", k, ok)
	}
}

func TestOneOperationTwoMediaTypes(t *testing.T) {
	decode := func(mt, body string) (CreateNoteRequest, canonical.Fingerprint) {
		v, fp, err := fptest.Decode(operationCreateNote(), decodeCreateNote, httptest.NewRequest("POST", "/v1/notes", nil), mt, []byte(body))
		if err != nil {
			t.Fatalf("%s %s: %v", mt, body, err)
		}
		return v, fp
	}
	j, a := decode("application/json", `{"text":"hi","pinned":true}`)
	f, b := decode(formType, `text=hi&pinned=true`)
	if j.Body.Text != f.Body.Text || *j.Body.Pinned != *f.Body.Pinned {
		t.Errorf("JSON %+v and form %+v decode differently", j, f)
	}
	if a == b {
		t.Error("the media type is not part of the fingerprint")
	}
	// The body is optional: absent differs from an empty object.
	if _, absent := decode("", ""); absent == func() canonical.Fingerprint { _, fp := decode("application/json", `{"text":""}`); return fp }() {
		t.Error("absent body fingerprints like a present one")
	}
	// A media type the operation admits (here by a range) but has no decoder for is refused.
	if _, _, err := fptest.Decode(operationCreateNote(), decodeCreateNote, httptest.NewRequest("POST", "/v1/notes", nil), "text/plain", []byte("x")); err == nil || err.Error() != "no decoder for media type text/plain" {
		t.Errorf("undeclared media type: %v", err)
	}
}

func TestRawBodyIsByteExact(t *testing.T) {
	fp := func(body string) canonical.Fingerprint {
		v, fp, err := fptest.Decode(operationUploadFile(), decodeUploadFile, httptest.NewRequest("POST", "/v1/files", nil), "application/octet-stream", []byte(body))
		if err != nil || string(v.Body) != body {
			t.Fatalf("%q: body %q, %v", body, v.Body, err)
		}
		return fp
	}
	if fp("abc") == fp("abd") {
		t.Error("raw body change kept the fingerprint")
	}
}

// TestFlatArrayIndexOrder: a flat form's array field is read in the order of its indices
// ([1]=b&[0]=a reaches the handler as [a b]); its fingerprint is still that of the fields sorted
// by name (canonical.AppendCanonicalForm), so the order they arrive in does not change it.
func TestFlatArrayIndexOrder(t *testing.T) {
	decode := func(body string) (CreateCustomerRequest, canonical.Fingerprint, error) {
		return fptest.Decode(operationCreateCustomer(), decodeCreateCustomer, httptest.NewRequest("POST", "/v1/customers", nil), formType, []byte(body))
	}
	a, fa, err := decode("email=x&preferred_locales[1]=fr&preferred_locales[0]=en")
	if err != nil || len(a.Body.PreferredLocales) != 2 || a.Body.PreferredLocales[0] != "en" {
		t.Fatalf("%v (%v)", a.Body.PreferredLocales, err)
	}
	if _, fb, _ := decode("email=x&preferred_locales%5B0%5D=en&preferred_locales%5B1%5D=fr"); fa != fb {
		t.Error("the order of indexed fields changed the fingerprint")
	}
	for body, at := range map[string]string{
		"email=x&preferred_locales[0]=en&preferred_locales[2]=fr":                                 "/preferred_locales[1]",
		"email=x&preferred_locales[0]=en&preferred_locales[0]=fr":                                 "/preferred_locales[0]",
		"email=x&preferred_locales[]=en&preferred_locales[1]=fr":                                  "/preferred_locales[1]",
		"email=x&preferred_locales=a&preferred_locales=b&preferred_locales=c&preferred_locales=d": "/preferred_locales",
	} {
		_, _, err := decode(body)
		var ce *canonical.Error
		if !errors.As(err, &ce) || ce.Pointer != at {
			t.Errorf("%s: %v, want a refusal at %s", body, err, at)
		}
	}
}

// piBody is a Stripe-style request to createPaymentIntent, as stripe-go encodes one.
const piBody = "amount=2000&currency=eur&description=Order+42&metadata[order_id]=42&metadata[trace_id]=t-1" +
	"&items[0][price]=price_A&items[0][quantity]=2&items[0][note]=gift&items[1][price]=price_B&items[1][tax_rates][0]=txr_1" +
	"&shipping[name]=Ada&shipping[phone]=555&shipping[address][city]=Paris&expand[]=customer&expand[]=latest_charge" +
	"&levels[0][0]=1&levels[0][1]=2&levels[1][0]=3&payment_method_data[type]=card&options[x][y]=z&idempotency_key=k-1"

func decodePI(t *testing.T, body string) (CreatePaymentIntentRequest, canonical.Fingerprint, error) {
	t.Helper()
	return fptest.Decode(operationCreatePaymentIntent(), decodeCreatePaymentIntent, httptest.NewRequest("POST", "/v1/payment_intents", nil), formType, []byte(body))
}

func TestBracketedForm(t *testing.T) {
	v, fp, err := decodePI(t, piBody)
	if err != nil {
		t.Fatal(err)
	}
	b := v.Body
	switch {
	case b.Amount != 2000 || b.Description == nil || b.Description.Value != "Order 42",
		b.Metadata == nil || b.Metadata.Unset || b.Metadata.Value["order_id"] != "42",
		len(b.Items) != 2 || *b.Items[0].Quantity != 2 || b.Items[1].TaxRates.Value[0] != "txr_1",
		b.Shipping == nil || b.Shipping.Value.Name != "Ada" || *b.Shipping.Value.Address.City != "Paris",
		strings.Join(b.Expand, ",") != "customer,latest_charge",
		len(b.Levels) != 2 || b.Levels[0][1] != 2 || b.Levels[1][0] != 3,
		string(b.PaymentMethodData) != `{"type":"card"}`, string(b.Options["x"]) != `{"y":"z"}`,
		b.IdempotencyKey == nil || *b.IdempotencyKey != "k-1":
		t.Fatalf("decoded %+v", b)
	}
	// Reversed, with percent-encoded brackets, but expand[] (unindexed: body order is its
	// order) kept in order: the same request.
	var reordered, expand []string
	for _, f := range strings.Split(piBody, "&") {
		if strings.HasPrefix(f, "expand[]") {
			expand = append(expand, f)
			continue
		}
		reordered = append([]string{strings.NewReplacer("[", "%5B", "]", "%5d").Replace(f)}, reordered...)
	}
	reordered = append(expand, reordered...)
	same := func(what, body string) {
		t.Helper()
		if _, got, err := decodePI(t, body); err != nil || got != fp {
			t.Errorf("%s changed the fingerprint (%v)", what, err)
		}
	}
	other := func(what, body string) {
		t.Helper()
		if _, got, err := decodePI(t, body); err != nil || got == fp {
			t.Errorf("%s kept the fingerprint (%v)", what, err)
		}
	}
	same("field order and percent-encoding", strings.Join(reordered, "&"))
	same("the key", strings.Replace(piBody, "idempotency_key=k-1", "idempotency_key=k-2", 1))
	same("metadata[trace_id] (excluded)", strings.Replace(piBody, "trace_id]=t-1", "trace_id]=t-2", 1))
	same("shipping[phone] (excluded)", strings.Replace(piBody, "&shipping[phone]=555", "", 1))
	same("items[*][note] (excluded)", strings.Replace(piBody, "note]=gift", "note]=other", 1))
	other("swapped items", strings.NewReplacer("items[0]", "items[1]", "items[1]", "items[0]").Replace(piBody))
	other("expand's order", strings.Replace(piBody, "expand[]=customer&expand[]=latest_charge", "expand[]=latest_charge&expand[]=customer", 1))
	other("a metadata value", strings.Replace(piBody, "order_id]=42", "order_id]=43", 1))
	other("the amount", strings.Replace(piBody, "amount=2000", "amount=2001", 1))
	// Spellings the decoder reads as one value are the fields as sent: another request.
	other("an integer's spelling", strings.Replace(piBody, "amount=2000", "amount=02000", 1))
	other("indexed instead of unindexed elements", strings.Replace(piBody, "expand[]=customer&expand[]=latest_charge", "expand[0]=customer&expand[1]=latest_charge", 1))

	// Absent, unset ('') and present are three requests, for a map, a struct and a string.
	for _, field := range []struct{ absent, unset, set string }{
		{"", "&metadata=", "&metadata[a]=1"},
		{"", "&shipping=", "&shipping[name]=Ada"},
		{"", "&description=", "&description=x"},
		{"", "&items[0][price]=p&items[0][tax_rates]=", "&items[0][price]=p&items[0][tax_rates][0]=t"},
	} {
		seen := map[canonical.Fingerprint]string{}
		for _, tail := range []string{field.absent, field.unset, field.set} {
			v, fp, err := decodePI(t, "amount=1&currency=usd"+tail)
			if err != nil {
				t.Fatalf("%q: %v", tail, err)
			}
			if prev, dup := seen[fp]; dup {
				t.Errorf("%q fingerprints like %q", tail, prev)
			}
			seen[fp] = tail
			if tail == "&metadata=" && (v.Body.Metadata == nil || !v.Body.Metadata.Unset) {
				t.Errorf("metadata= decoded as %+v", v.Body.Metadata)
			}
		}
	}

	// The form-carried key reaches the runtime.
	_, k, ok, err := fptest.BodyKey(operationCreatePaymentIntent(), decodeCreatePaymentIntent, httptest.NewRequest("POST", "/v1/payment_intents", nil), formType, []byte(piBody))
	if err != nil {
		t.Fatal(err)
	}
	if k != "k-1" || !ok {
		t.Errorf("body key %q, %v", k, ok)
	}

	for body, at := range map[string]string{
		"amount=1&currency=usd&items[0][price]=a&items[2][price]=b":      "/items[1]",
		"amount=1&currency=usd&metadata[k]=1&metadata[k]=2":              "/metadata[k]",
		"amount=1&currency=usd&items[x][price]=a":                        "/items[x][price]",
		"amount=1&currency=usd&shipping[name]=Ada&shipping[planet]=Mars": "/shipping[planet]",
		"amount=1&currency=usd&planet=Mars":                              "/planet",
		"amount=1&currency=usd&metadata=x":                               "/metadata",
		"amount=1&currency=usd&items[0][quantity]=1":                     "/items[0][price]",
		"amount=1&currency=usd&levels[0][1]=1":                           "/levels[0][0]",
		"amount=1&currency=usd&metadata[k]=" + strings.Repeat("x", 501):  "/metadata[k]",
		"amount=1&currency=usd&description=" + strings.Repeat("x", 101):  "/description",
		"amount=1&currency=usd&capture_method=later":                     "/capture_method",
		"amount=0&currency=usd":                                          "/amount",
	} {
		_, _, err := decodePI(t, body)
		var ce *canonical.Error
		if !errors.As(err, &ce) || ce.Pointer != at {
			t.Errorf("%.80s: %v, want a refusal at %s", body, err, at)
		}
	}
}

// TestBracketedFormCanonicalForm spells out the fingerprint of a bracketed form: its fields
// sorted by name, as a flat form's (canonical.AppendFormFields), without the key and the
// excluded members, framed after the request line and the media type.
func TestBracketedFormCanonicalForm(t *testing.T) {
	body := "amount=2000&currency=eur&metadata[order_id]=42&metadata[trace_id]=t-1&items[1][price]=price_B&items[0][price]=price_A" +
		"&items[0][quantity]=2&items[0][note]=gift&shipping[name]=Ada&shipping%5Baddress%5D[city]=Paris&expand[]=customer&idempotency_key=k-1"
	var f canonical.Framer
	f.Begin("createPaymentIntent", "POST", "/v1/payment_intents")
	f.MediaType(formType)
	if err := f.FormBody([]byte("amount=2000&currency=eur&expand[]=customer&items[0][price]=price_A&items[0][quantity]=2" +
		"&items[1][price]=price_B&metadata[order_id]=42&shipping[address][city]=Paris&shipping[name]=Ada")); err != nil {
		t.Fatal(err)
	}
	fp := f.Sum()
	_, got, err := decodePI(t, body)
	if err != nil || got != fp {
		t.Errorf("fingerprint %s (%v), want %s", got, err, fp)
	}
	if got.String() != want[10] {
		t.Errorf("the corpus's entry 10 is not this request's fingerprint")
	}
}

// TestSharedShape: inline objects of the same shape share one Go type, decoder and canonicalizer.
func TestSharedShape(t *testing.T) {
	v, _, err := decodePI(t, "amount=1&currency=usd&billing_address[city]=Paris&shipping[name]=A&shipping[address][city]=Paris")
	if err != nil {
		t.Fatal(err)
	}
	var a *ShippingFormAddress = v.Body.BillingAddress
	if *a.City != *v.Body.Shipping.Value.Address.City {
		t.Errorf("billing %+v", a)
	}
}
