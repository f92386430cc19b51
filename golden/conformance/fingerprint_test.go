package conformance

// The fingerprint corpus of the conformance operations: each request with the fingerprint the
// generated code computes for it, recorded from the generator before its decode functions were
// merged, whose fingerprints gen.Input.Begin reproduced (so a change of framing or canonical form
// fails here).

import (
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
)

const form = "application/x-www-form-urlencoded"

var corpus = []fptest.Request{
	{Op: "createCharge", Target: "/v1/charges", MediaType: form, Body: "amount=100&currency=eur&description=caf%C3%A9+au+lait"},
	{Op: "createCharge", Target: "/v1/charges?x=1", MediaType: form, Body: "currency=eur&amount=100&description=caf%C3%A9%20au%20lait&extra[a]=1&extra[b]=2"},
	{Op: "createCharge", Target: "/v1/charges", MediaType: form, Body: "amount=1x&currency=eur"},
	{Op: "createCharge", Target: "/v1/charges", MediaType: form, Body: "amount=1&amount=2&currency=eur"},
	{Op: "createCharge", Target: "/v1/charges", MediaType: form, Body: "amount=1"},
	{Op: "createCharge", Target: "/v1/charges", MediaType: form, Body: "amount=1&currency=%ZZ"},
	{Op: "createOrder", Target: "/v1/orders", MediaType: "application/json",
		Body: `{"payer":{"name":"Ann","country":"FR"},"lines":[{"sku":"a","qty":2,"unit_price":42.0},{"sku":"b","qty":1}],"metadata":{"trace_id":"t1","k":"v"}}`},
	{Op: "createOrder", Target: "/v1/orders", MediaType: "application/json",
		Body: `{"metadata":{"k":"v","trace_id":"t2"},"lines":[{"qty":2,"sku":"a","unit_price":42},{"qty":1,"sku":"b"}],"payer":{"country":"FR","name":"Ann"}}`},
	{Op: "createOrder", Target: "/v1/orders", MediaType: "application/json", Body: `{"payer":{"name":"Ann","x":[true]},"lines":[],"y":"\u2028"}`},
	{Op: "createOrder", Target: "/v1/orders", MediaType: "application/json", Body: `{"payer":{"name":"Ann"},"lines":[{"sku":"a"}]}`},
	{Op: "createPayment", Target: "/v1/payments", MediaType: "application/json",
		Body: `{"amount":1000,"currency":"EUR","to":"acc_9","description":"x","metadata":{"b":"2","a":"1"},"client_timestamp":"t"}`},
	{Op: "createPayment", Target: "/v1/payments", MediaType: "application/json", Body: `{"amount":1e3,"currency":"EUR","to":"acc_9","\u20ac":1,"a":[]}`},
	{Op: "createPayment", Target: "/v1/payments", MediaType: "application/json", Body: `{"amount":0,"currency":"EUR","to":"acc_9"}`},
	{Op: "createRefund", Target: "/v1/payments/pay_1/refunds", Path: map[string]string{"payment_id": "pay_1"}, MediaType: "application/json",
		Body: `{"amount":5,"reason":"dup"}`},
	{Op: "createRefund", Target: "/v1/payments/pay%2F2/refunds", Path: map[string]string{"payment_id": "pay/2"}, MediaType: "application/json",
		Body: `{"amount":5}`},
	{Op: "createProviderCharge", Target: "/v1/provider-charges", MediaType: "application/json", Body: `{"amount":7}`},
	{Op: "createTransfer", Target: "/v1/transfers", MediaType: "application/json", Body: `{"idempotency_key":"k-123456789","amount":5,"destination":"d"}`},
	{Op: "createTransfer", Target: "/v1/transfers", MediaType: "application/json", Body: `{"amount":5,"destination":"d","idempotency_key":"other-key"}`},
	{Op: "createTransfer", Target: "/v1/transfers", MediaType: "application/json", Body: `{"amount":5,"destination":"d"}`},
	// Bracketed (deepObject) fields, as in testdata/cases/025-027: the first two are one request.
	{Op: "createCharge", Target: "/v1/charges", MediaType: form,
		Body: "amount=2500&currency=usd&metadata[order_id]=6735&metadata[channel]=web&items[0][price]=price_A&items[0][quantity]=2&items[1][price]=price_B&shipping[name]=Ada&shipping[address][city]=Paris"},
	{Op: "createCharge", Target: "/v1/charges", MediaType: form,
		Body: "shipping%5Baddress%5D%5Bcity%5D=Paris&items[1][price]=price_B&metadata%5Bchannel%5D=web&shipping[name]=Ada&items[0][quantity]=2&currency=usd&items[0][price]=price_A&metadata[order_id]=6735&amount=2500"},
	{Op: "createCharge", Target: "/v1/charges", MediaType: form, Body: "amount=100&currency=usd&metadata="},
	{Op: "createCharge", Target: "/v1/charges", MediaType: form, Body: "amount=100&currency=usd&items[0][price]=a&items[2][price]=b"},
	{Op: "createCharge", Target: "/v1/charges", MediaType: form, Body: "amount=100&currency=usd&shipping[name]=Ada&shipping[planet]=Mars"},
}

func TestFingerprintCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"createCharge":         fptest.Run(operationCreateCharge(), decodeCreateCharge),
		"createOrder":          fptest.Run(operationCreateOrder(), decodeCreateOrder),
		"createPayment":        fptest.Run(operationCreatePayment(), decodeCreatePayment),
		"createRefund":         fptest.Run(operationCreateRefund(), decodeCreateRefund),
		"createProviderCharge": fptest.Run(operationCreateProviderCharge(), decodeCreateProviderCharge),
		"createTransfer":       fptest.Run(operationCreateTransfer(), decodeCreateTransfer),
	}))
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v2:eee85f59ffc1090e4892a98757e4aea2bbb7a00940669c6ba9044862cf5b0983",                                                                             // 0 createCharge
	"v2:837fd60d4dbf9c59d3ce16c5dabc899644ffffe9813b271963ce0f8aade9c61a",                                                                             // 1 createCharge
	"refused at \"/amount\": invalid body at /amount: must be an integer (int64)",                                                                     // 2 createCharge
	"refused at \"/amount\": invalid body at /amount: field given more than once",                                                                     // 3 createCharge
	"refused at \"/currency\": invalid body at /currency: missing required field",                                                                     // 4 createCharge
	"refused at \"/currency\": invalid body at /currency (byte 18): '%' not followed by two hex digits",                                               // 5 createCharge
	"v2:db7ba425d4a7f92bb844fba61762e77376f508a58a58237e03eff47d21d59447",                                                                             // 6 createOrder
	"v2:db7ba425d4a7f92bb844fba61762e77376f508a58a58237e03eff47d21d59447",                                                                             // 7 createOrder
	"v2:70bfed27f22f29cb8aa4b6760eb2432589fb481226a6069ce0ce28eb1876899e",                                                                             // 8 createOrder
	"refused at \"/lines/0\": invalid body at /lines/0 (byte 44): missing required member \"qty\"",                                                    // 9 createOrder
	"v2:42b9cb3f478e6aad7ad15914e9377dd61d5f8b1c8e3b32080b5ecebf1bf6f455",                                                                             // 10 createPayment
	"v2:4479dde4072926b84f32c410b1ca2349bd394eaf8527aa9144dd3d445a4fae94",                                                                             // 11 createPayment
	"refused at \"/amount\": invalid body at /amount (byte 11): must be at least 1",                                                                   // 12 createPayment
	"v2:999acd99064355320f887b3d69a13214c90ad4d0ae66e6488bb1bb7a96e0739e",                                                                             // 13 createRefund
	"v2:e1aa08358b7bd58f12fce8bf94895615d1adcbf8eba53e0398739fde208d0483",                                                                             // 14 createRefund
	"v2:e80ab2c679601259bf544d5c8a0b9d861c9a75ac6ea933dfae96195740d84af8",                                                                             // 15 createProviderCharge
	"v2:7622d319c6a63a39e83702e2799d8761a80324498db3c7b2edbe2ca411ac41dc",                                                                             // 16 createTransfer
	"v2:7622d319c6a63a39e83702e2799d8761a80324498db3c7b2edbe2ca411ac41dc",                                                                             // 17 createTransfer
	"v2:7622d319c6a63a39e83702e2799d8761a80324498db3c7b2edbe2ca411ac41dc",                                                                             // 18 createTransfer
	"v2:341b0539aaca49f8b88dd29fa078be3f54a642964d9c5d0175c86cb0d985262f",                                                                             // 19 createCharge
	"v2:341b0539aaca49f8b88dd29fa078be3f54a642964d9c5d0175c86cb0d985262f",                                                                             // 20 createCharge
	"v2:7558a83fa4d4fe0d8402d9883b5a71155f35a2ef183a0698e9a11ab25c42d1cc",                                                                             // 21 createCharge
	"refused at \"/items[1]\": invalid body at /items[1]: array index 1 is missing (the indices of items[2][price] must run 0, 1, 2, … without gaps)", // 22 createCharge
	"refused at \"/shipping[planet]\": invalid body at /shipping[planet]: field not allowed by the schema",                                            // 23 createCharge
}
