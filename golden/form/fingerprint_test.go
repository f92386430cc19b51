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
	"v2:3ff853e472419daab71567784824eab0c6f50a591f74f167383d20f387983fe5",                                                                             // 0 createCustomer
	"v2:2ddee5f2f71c670a1c5eb34d1ba5936aa7f1e8a565cf4eb8f7b530ff14762be2",                                                                             // 1 createCustomer
	"refused at \"/tax_exempt\": invalid body at /tax_exempt: must be one of \"none\", \"exempt\", \"reverse\"",                                       // 2 createCustomer
	"refused at \"/email\": invalid body at /email: missing required field",                                                                           // 3 createCustomer
	"v2:18fdf1faaa7244fd4b676d1c1a98d7435dd2ab38521451fe3946281a4dddcfe4",                                                                             // 4 uploadFile
	"v2:e02e8c2c3d3f73cfd57366219d897489b0bd4df8a5d845cb483085f13507a90e",                                                                             // 5 createNote
	"v2:78f0deadd139dcd5042fd10f833ecc1dd72d4c60bcf8a00162b5c8b91b60e782",                                                                             // 6 createNote
	"refused at \"/pinned\": invalid body at /pinned: must be true or false",                                                                          // 7 createNote
	"v2:5b90dc3e1bedaaf995e6949ac3725f43f4e037f931876f4d98611531d652d559",                                                                             // 8 createNote
	"v2:c1d7039dabbe3eaf44dcd79f55f66c7fdb112a2ac552dbdfb124c6e6ef246f7f",                                                                             // 9 createCustomer
	"v2:74ce18169468057a20d53b9f7a432da7c52c70b3ce362b84c18792b15e356aba",                                                                             // 10 createPaymentIntent
	"v2:74ce18169468057a20d53b9f7a432da7c52c70b3ce362b84c18792b15e356aba",                                                                             // 11 createPaymentIntent
	"v2:a7d5d303b12846c2e45733d1749bb661f19ac4fabd01e1b1c0832a7063eff846",                                                                             // 12 createPaymentIntent
	"v2:1c2a859769bab0025283c07df44869de0f4c274eac422bd00f0c1d399befd36f",                                                                             // 13 createPaymentIntent
	"v2:4b5bf20cf19bd93b096393a1d50ca9637f920ada359d779b1c826758dacad6a5",                                                                             // 14 createPaymentIntent
	"refused at \"/items[1]\": invalid body at /items[1]: array index 1 is missing (the indices of items[2][price] must run 0, 1, 2, … without gaps)", // 15 createPaymentIntent
	"v2:7978919ac589cdf484c8a37cd59f675f712b15e27f09e4dbd295bf19173de12e",                                                                             // 16 createPaymentIntent
}
