package form

// The fingerprint corpus of the form operations: each request with the fingerprint the generated
// code computes for it, recorded from the generator before its decode functions were merged (so
// a change of framing or canonical form fails here).

import (
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

const formType = "application/x-www-form-urlencoded"

var corpus = []fptest.Request{
	{Op: "createCustomer", Target: "/v1/customers", MediaType: formType,
		Body: "email=a%40b.c&balance=-5&metadata%5Border%5D=o1&tax_exempt=none&idempotency_key=k1&client_ip=1.2.3.4"},
	{Op: "createCustomer", Target: "/v1/customers", MediaType: formType,
		Body: "client_ip=9.9.9.9&idempotency_key=k2&tax_exempt=none&metadata[order]=o1&balance=-5&email=a@b.c&other=x"},
	{Op: "createCustomer", Target: "/v1/customers", MediaType: formType, Body: "email=a@b.c&tax_exempt=maybe"},
	{Op: "createCustomer", Target: "/v1/customers", MediaType: formType, Body: "balance=1"},
	{Op: "uploadFile", Target: "/v1/files", MediaType: "application/octet-stream", Body: "\x00\x01 raw {bytes}"},
	{Op: "createNote", Target: "/v1/notes", MediaType: "application/json", Body: `{"text":"hi","pinned":true,"z":1}`},
	{Op: "createNote", Target: "/v1/notes", MediaType: formType, Body: "text=hi&pinned=true&z=1"},
	{Op: "createNote", Target: "/v1/notes", MediaType: formType, Body: "text=hi&pinned=yes"},
	{Op: "createNote", Target: "/v1/notes"},
	{Op: "createCustomer", Target: "/v1/customers", MediaType: formType, Body: "email=x&preferred_locales[1]=fr&preferred_locales[0]=en"},
	{Op: "createPaymentIntent", Target: "/v1/payment_intents", MediaType: formType,
		Body: "amount=2000&currency=eur&metadata[order_id]=42&metadata[trace_id]=t-1&items[0][price]=price_A&items[0][quantity]=2" +
			"&items[1][price]=price_B&shipping[name]=Ada&shipping[address][city]=Paris&expand[]=customer&idempotency_key=k-1"},
	{Op: "createPaymentIntent", Target: "/v1/payment_intents", MediaType: formType,
		Body: "idempotency_key=k-2&expand%5B%5D=customer&shipping%5Baddress%5D%5Bcity%5D=Paris&shipping[name]=Ada&items[1][price]=price_B" +
			"&items[0][quantity]=2&items[0][price]=price_A&metadata[trace_id]=t-2&metadata[order_id]=42&currency=eur&amount=2000"},
	{Op: "createPaymentIntent", Target: "/v1/payment_intents", MediaType: formType, Body: "amount=1&currency=usd&metadata="},
	{Op: "createPaymentIntent", Target: "/v1/payment_intents", MediaType: formType, Body: "amount=1&currency=usd"},
	{Op: "createPaymentIntent", Target: "/v1/payment_intents", MediaType: formType, Body: "amount=1&currency=usd&description=&shipping="},
	{Op: "createPaymentIntent", Target: "/v1/payment_intents", MediaType: formType, Body: "amount=1&currency=usd&items[0][price]=a&items[2][price]=b"},
	{Op: "createPaymentIntent", Target: "/v1/payment_intents", MediaType: formType, Body: "amount=1&currency=usd&options[b]=2&options[a][]=1&payment_method_data=tok"},
}

func TestFingerprintCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"createCustomer":      fptest.Run(operationCreateCustomer(), decodeCreateCustomer),
		"uploadFile":          fptest.Run(operationUploadFile(), decodeUploadFile),
		"createNote":          fptest.Run(operationCreateNote(), decodeCreateNote),
		"createPaymentIntent": fptest.Run(operationCreatePaymentIntent(), decodeCreatePaymentIntent),
	}))
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v1:e4dc90f4a977102d0c4362080fd0876a1f7fe795eb941a8daa7fd7207fbbcdec",                                                                             // 0 createCustomer
	"v1:11f2c8b92c58187b0ef3fe1539ac7dc9c32255599fb455e350f2f84cab7335cf",                                                                             // 1 createCustomer
	"refused at \"/tax_exempt\": invalid body at /tax_exempt: must be one of \"none\", \"exempt\", \"reverse\"",                                       // 2 createCustomer
	"refused at \"/email\": invalid body at /email: missing required field",                                                                           // 3 createCustomer
	"v1:89e7b7f6cf0f66a6f1b91b975e1d61b91a751981461fa5a2838e6d4eeddb0c7f",                                                                             // 4 uploadFile
	"v1:e3c9d07597918add4f784e5f543abb57e90fbfb64b8a7a58d7455db8a06138a9",                                                                             // 5 createNote
	"v1:f4535dce6015b8553939dc2319de8722946f2fc777ace8ffc5923f484992f89b",                                                                             // 6 createNote
	"refused at \"/pinned\": invalid body at /pinned: must be true or false",                                                                          // 7 createNote
	"v1:7d829248acb6cc04988847f99cfca7e1f514db307cd173f6ec606ab8f80edd12",                                                                             // 8 createNote
	"v1:049c2aac77f0e20743bc70200119de5f13a3851f65281b302894b762b34d0d9a",                                                                             // 9 createCustomer
	"v1:d09ee63c83014fa6ea0eaad277581ec0b45afb1c491e4c7d436c63186927e9f7",                                                                             // 10 createPaymentIntent
	"v1:d09ee63c83014fa6ea0eaad277581ec0b45afb1c491e4c7d436c63186927e9f7",                                                                             // 11 createPaymentIntent
	"v1:7653d98ef4f0dfcb2aa6142f796feb15bb6dee9ca08ddd7f411e53f33db092bc",                                                                             // 12 createPaymentIntent
	"v1:18996dd2aa826ed1efd316bd4d3436f877cc50705d505e9eabfbdc56f7254d7c",                                                                             // 13 createPaymentIntent
	"v1:7ec7dc77e86955be887959377602249a43ff008457f65c9446723f3741a63ede",                                                                             // 14 createPaymentIntent
	"refused at \"/items[1]\": invalid body at /items[1]: array index 1 is missing (the indices of items[2][price] must run 0, 1, 2, … without gaps)", // 15 createPaymentIntent
	"v1:1e4b275579421a83bcf8885d881273fb516d14bc9f9ff34e51834255a20042c1",                                                                             // 16 createPaymentIntent
}
