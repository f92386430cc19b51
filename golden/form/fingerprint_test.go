package form

// The fingerprint corpus of the form operations: each request with the fingerprint the generated
// code computes for it, recorded from the generator before its decode functions were merged (so
// a change of framing or canonical form fails here).

import (
	"testing"

	"github.com/idemgen/idemgen/internal/fptest"
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
}

func TestFingerprintCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"createCustomer": fptest.Run(operationCreateCustomer(), decodeCreateCustomer),
		"uploadFile":     fptest.Run(operationUploadFile(), decodeUploadFile),
		"createNote":     fptest.Run(operationCreateNote(), decodeCreateNote),
	}))
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v1:e4dc90f4a977102d0c4362080fd0876a1f7fe795eb941a8daa7fd7207fbbcdec",                                                // 0 createCustomer
	"v1:11f2c8b92c58187b0ef3fe1539ac7dc9c32255599fb455e350f2f84cab7335cf",                                                // 1 createCustomer
	"refused at \"/tax_exempt\": invalid body at /tax_exempt (byte 0): must be one of \"none\", \"exempt\", \"reverse\"", // 2 createCustomer
	"refused at \"/email\": invalid body at /email (byte 0): missing required field",                                     // 3 createCustomer
	"v1:89e7b7f6cf0f66a6f1b91b975e1d61b91a751981461fa5a2838e6d4eeddb0c7f",                                                // 4 uploadFile
	"v1:e3c9d07597918add4f784e5f543abb57e90fbfb64b8a7a58d7455db8a06138a9",                                                // 5 createNote
	"v1:f4535dce6015b8553939dc2319de8722946f2fc777ace8ffc5923f484992f89b",                                                // 6 createNote
	"refused at \"/pinned\": invalid body at /pinned (byte 0): must be true or false",                                    // 7 createNote
	"v1:7d829248acb6cc04988847f99cfca7e1f514db307cd173f6ec606ab8f80edd12",                                                // 8 createNote
}
