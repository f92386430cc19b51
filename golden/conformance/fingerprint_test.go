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
	"v1:e060b8aff2b003494b6ac4e05001815e919ee25cbe6f8830347cfa3765e03f0d",                                                                             // 0 createCharge
	"v1:6dcbe02cc5d5afee3aa9f67d8123990664a5c7e62d85d2d2b825d5f74bda33bf",                                                                             // 1 createCharge
	"refused at \"/amount\": invalid body at /amount: must be an integer (int64)",                                                                     // 2 createCharge
	"refused at \"/amount\": invalid body at /amount: field given more than once",                                                                     // 3 createCharge
	"refused at \"/currency\": invalid body at /currency: missing required field",                                                                     // 4 createCharge
	"refused at \"/currency\": invalid body at /currency (byte 18): '%' not followed by two hex digits",                                               // 5 createCharge
	"v1:8df31bcb0ff702cc7ddcc89005f16a7ead23130263e6f403725a1892aaa591d8",                                                                             // 6 createOrder
	"v1:8df31bcb0ff702cc7ddcc89005f16a7ead23130263e6f403725a1892aaa591d8",                                                                             // 7 createOrder
	"v1:aa17c995e3454b4b384a79237f2fe519085f11e326de872307bb2435c88407e1",                                                                             // 8 createOrder
	"refused at \"/lines/0\": invalid body at /lines/0 (byte 44): missing required member \"qty\"",                                                    // 9 createOrder
	"v1:7689474a2fa9db588244402efd2ce0409379c5772f6bf710dc3a254af08a0fa2",                                                                             // 10 createPayment
	"v1:fc96556914bd64e8612a80675eaf73b6fe1681fdadb2cea80e39a522d792bb75",                                                                             // 11 createPayment
	"refused at \"/amount\": invalid body at /amount (byte 11): must be at least 1",                                                                   // 12 createPayment
	"v1:52ce1195423ee4e2f73524403cde74b7969906e07b0c147aa61ed0e703857a70",                                                                             // 13 createRefund
	"v1:e470894d080c26749ff1c592191b885ac632f4bac064f2a341968c34e0487e55",                                                                             // 14 createRefund
	"v1:f6141760ced35a8a277bab3d94860770e5732ec5094f39378afc64269acbe644",                                                                             // 15 createProviderCharge
	"v1:2562b015180e2e419ba0cff4bb252563f8dbf4bf3c0696cd0139473861676d87",                                                                             // 16 createTransfer
	"v1:2562b015180e2e419ba0cff4bb252563f8dbf4bf3c0696cd0139473861676d87",                                                                             // 17 createTransfer
	"v1:2562b015180e2e419ba0cff4bb252563f8dbf4bf3c0696cd0139473861676d87",                                                                             // 18 createTransfer
	"v1:f94cfbd84e366561ce27d82a155f82998497d64bb984bc8957917d5da22a245f",                                                                             // 19 createCharge
	"v1:f94cfbd84e366561ce27d82a155f82998497d64bb984bc8957917d5da22a245f",                                                                             // 20 createCharge
	"v1:c2cee993609a8ebc0e7f089000c8ba83fb3d6d1dbe73c4e89b72dcf22aad8ed8",                                                                             // 21 createCharge
	"refused at \"/items[1]\": invalid body at /items[1]: array index 1 is missing (the indices of items[2][price] must run 0, 1, 2, … without gaps)", // 22 createCharge
	"refused at \"/shipping[planet]\": invalid body at /shipping[planet]: field not allowed by the schema",                                            // 23 createCharge
}
