package spec

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

const vendorDir = "../../testdata/specs/vendor"

// TestVendorCorpus loads every public spec in testdata/specs/vendor with --infer, as a user
// pointing idemgen at a vendor spec would, and pins how many operations it finds, with which
// carrier and standard, how many keys are required, and the loader's errors and warnings by
// code (generator/vendor_test.go adds the generator's verdict and builds the output). The
// counts agree with an independent scan of the raw documents.
func TestVendorCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 19 MB of specs")
	}
	cases := []struct {
		file     string
		marked   int
		carrier  model.Carrier
		key      string
		std      model.Standard
		required int // how many of them declare the key required
		errors   map[string]int
		warnings map[string]int
	}{
		{"adyen-checkout-v71.json", 22, model.CarrierHeader, "Idempotency-Key", model.StandardIdempotencyKey, 0, nil, map[string]int{"errors-inferred": 17}}, // ServiceError {errorCode, message, status},
		{"paypal-payments-v2.json", 3, model.CarrierHeader, "PayPal-Request-Id", model.StandardIdempotencyKey, 0, nil, map[string]int{"errors-schema-inline": 3}},
		{"coinbase-cdp.yaml", 66, model.CarrierHeader, "X-Idempotency-Key", model.StandardIdempotencyKey, 0, nil, map[string]int{"errors-not-inferred": 66}}, // errorType is an enum only Coinbase can assign,
		{"twilio-api-v2010.yaml", 4, model.CarrierForm, "IdempotencyKey", model.StandardIdempotencyKey, 2, nil, nil},
		{"svix-server-openapi.json", 10, model.CarrierHeader, "idempotency-key", model.StandardIdempotencyKey, 0, nil, map[string]int{"duplicate-operation-id": 1, "errors-inferred": 9}},
		{"stripe-spec3.yaml", 0, "", "", "", 0, nil, nil},
		{"swagger-petstore-v3.yaml", 0, "", "", "", 0, nil, nil},
		{"dwolla-openapi.yml", 2, model.CarrierHeader, "Idempotency-Key", model.StandardIdempotencyKey, 0, nil, map[string]int{"errors-inferred": 1, "errors-schema-inline": 1}},
		{"resend.yaml", 2, model.CarrierHeader, "Idempotency-Key", model.StandardIdempotencyKey, 0, nil, nil},                                                                                                                                  // maxLength 256, taken as declared
		{"obie-payment-initiation-v4.yaml", 15, model.CarrierHeader, "x-idempotency-key", model.StandardIdempotencyKey, 15, nil, map[string]int{"errors-inferred": 15}},                                                                        // application/jose+jwe beside JSON: no raw-fingerprint warning
		{"mollie-api.yaml", 49, model.CarrierHeader, "idempotency-key", model.StandardIdempotencyKey, 0, nil, map[string]int{"errors-not-inferred": 49}},                                                                                       // its lookahead patterns run on the ECMAScript engine
		{"lob-api-bundled.yml", 6, model.CarrierHeader, "Idempotency-Key", model.StandardIdempotencyKey, 0, map[string]int{"ref-not-allowed": 52}, map[string]int{"errors-not-inferred": 6, "second-key-carrier": 6}},                          // multipart is decoded, no longer raw; maxLength 256 taken as declared; the header is read, not the query parameter beside it
		{"square-connect-v2-oas3-2025-05-21.json", 66, model.CarrierBody, "/idempotency_key", model.StandardIdempotencyKey, 26, map[string]int{"dangling-ref": 5}, map[string]int{"described-idempotency-key": 1, "item-idempotency-keys": 9}}, // 4 in a multipart part: /request/idempotency_key; CreateCustomerCard's card_nonce; three bulk creates, five bulk upserts and a bulk update key each item
		{"azure-communication-chat-2021-03-07.json", 1, model.CarrierHeader, "repeatability-request-id", model.StandardRepeatable, 0, map[string]int{"ref-outside-root": 6}, map[string]int{"errors-not-inferred": 1}},
		{"azure-communication-sms-2021-03-07.json", 0, "", "", "", 0, nil, map[string]int{"item-idempotency-keys": 1}},                                                   // a key per recipient
		{"acp/openapi.agentic_checkout.yaml", 4, model.CarrierHeader, "Idempotency-Key", model.StandardIdempotencyKey, 4, nil, map[string]int{"errors-not-inferred": 4}}, // every POST; GET /checkout_sessions/{id} unmarked
		{"acp/openapi.delegate_payment.yaml", 1, model.CarrierHeader, "Idempotency-Key", model.StandardIdempotencyKey, 1, nil, map[string]int{"errors-not-inferred": 1}}, // Error.type is an enum: ACP's envelope must be given (a profile: acp row)
		// Round four: a key under a name --infer does not take (LINE's X-Line-Retry-Key, a
		// warning per operation), and AIP-155's requestId in the query of Swagger 2.0 documents.
		{"line-messaging-api.yml", 0, "", "", "", 0, nil, map[string]int{"described-idempotency-key": 4}},
		{"google-testing-v1.json", 1, model.CarrierQuery, "requestId", model.StandardAIP155, 0, nil, nil},
		{"google-drive-v3.json", 1, model.CarrierQuery, "requestId", model.StandardAIP155, 1, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			res := load(t, Options{Path: filepath.Join(vendorDir, tc.file), Infer: true})
			errs, warns := countCodes(res.Diags)
			if !maps.Equal(errs, tc.errors) || !maps.Equal(warns, tc.warnings) {
				t.Errorf("errors %v, warnings %v; want %v, %v", errs, warns, tc.errors, tc.warnings)
			}
			doc := res.Doc
			if len(doc.Operations) != tc.marked {
				t.Fatalf("--infer found %d operations, want %d", len(doc.Operations), tc.marked)
			}
			required := 0
			for i, op := range doc.Operations {
				k := op.Settings.Key
				name := k.Header
				switch k.Carrier {
				case model.CarrierForm:
					name = k.Field
				case model.CarrierBody:
					name = k.Pointer
				case model.CarrierQuery:
					name = k.Query
				}
				if k.Required {
					required++
				}
				if name == "/request"+tc.key && multipartOnly(op) {
					name = tc.key // Square's uploads: the key is in the JSON part "request"
				}
				if op.Mark != model.MarkInfer || k.Carrier != tc.carrier || name != tc.key || k.Standard != tc.std {
					t.Errorf("%s %s: mark %s, key %s %s (%s) required=%v", op.Method, op.Path, op.Mark, k.Carrier, name, k.Standard, k.Required)
				}
				if i > 0 {
					prev := doc.Operations[i-1]
					if prev.Path > op.Path || (prev.Path == op.Path && prev.Method >= op.Method) {
						t.Errorf("operations not sorted: %s %s before %s %s", prev.Method, prev.Path, op.Method, op.Path)
					}
				}
				if op.Loc.Line == 0 || !strings.HasSuffix(op.Loc.File, tc.file) { // Swagger 2.0 (azure) too
					t.Errorf("%s %s located at %s", op.Method, op.Path, op.Loc)
				}
			}
			if required != tc.required {
				t.Errorf("%d operations with a required key, want %d", required, tc.required)
			}
			// Without --infer nothing is marked, and check warns once per operation instead.
			plain := load(t, Options{Path: filepath.Join(vendorDir, tc.file)})
			warned := 0
			for _, d := range plain.Diags.Sorted() {
				if d.Code == "unmarked-idempotency-key" {
					warned++
				}
			}
			if len(plain.Doc.Operations) != 0 || warned != tc.marked {
				t.Errorf("without --infer: %d marked, %d warnings; want 0 and %d", len(plain.Doc.Operations), warned, tc.marked)
			}
		})
	}
}

// countCodes counts errors and warnings by code (nil when there are none).
func countCodes(l *diag.List) (errs, warns map[string]int) {
	for _, d := range l.Sorted() {
		m := &errs
		if d.Severity == diag.Warning {
			m = &warns
		}
		if *m == nil {
			*m = map[string]int{}
		}
		(*m)[d.Code]++
	}
	return errs, warns
}

// TestBrokenDocumentsFailLocated: documents with bad $refs fail with the file, line and the
// offending reference, not a Go error or a panic. With the bad references set aside the rest of
// the document is still read (loads), so the run lists and checks its operations too; a
// document that does not parse, or that kin-openapi refuses even then (unit-openapi), has no
// model, and says why.
func TestBrokenDocumentsFailLocated(t *testing.T) {
	cases := []struct {
		path, code, file string
		line             int
		mention          string
		loads            bool
	}{
		{vendorDir + "/square-connect-v2-oas3-2025-05-21.json", "dangling-ref", "square-connect-v2-oas3-2025-05-21.json", 8308, "#/components/schemas/CatalogModifierToggleOverrideType", true},
		{vendorDir + "/unit-openapi/openapi.json", "wrong-ref-kind", "unit-openapi/schemas/account/accountPaths.json", 47, "../types.json#/components/schemas/PageQuery", false},
		{vendorDir + "/lob-api-bundled.yml", "ref-not-allowed", "lob-api-bundled.yml", 2417, "#/components/mediaTypes/lob_credits_balance", true},
		{vendorDir + "/azure-communication-chat-2021-03-07.json", "ref-outside-root", "azure-communication-chat-2021-03-07.json", 1190, "../../../Common/stable/2021-03-07/common.json", true},
		{"../../testdata/specs/broken/dangling-ref.yaml", "dangling-ref", "broken/dangling-ref.yaml", 12, "#/components/schemas/PaymentRequest", true},
		{"../../testdata/specs/broken/wrong-kind.yaml", "wrong-ref-kind", "broken/wrong-kind.yaml", 8, "#/components/schemas/Amount", true},
		{"../../testdata/specs/broken/invalid.yaml", "invalid-yaml", "broken/invalid.yaml", 6, "in the flow sequence that starts here", false},
		{"../../testdata/specs/broken/remote-ref.yaml", "remote-ref", "broken/remote-ref.yaml", 11, "https://example.com/schemas.yaml#/Payment", true},
		{"../../testdata/specs/broken/split/openapi.yaml", "dangling-ref", "split/schemas/payment.yaml", 6, "#/Custmer", true},
		// Names that start with x- are names, not extensions.
		{"../../testdata/specs/broken/x-named-refs.yaml", "remote-ref", "broken/x-named-refs.yaml", 18, "https://schemas.example.com/trace.yaml#/Trace", true},
		{"../../testdata/specs/broken/x-named-refs.yaml", "dangling-ref", "broken/x-named-refs.yaml", 23, "#/components/headers/RequestId", true},
		// A $ref where a whole map should be, in 3.0 and in Swagger 2.0.
		{"../../testdata/specs/broken/map-ref.yaml", "ref-not-allowed", "broken/map-ref.yaml", 19, "the whole components/schemas map", true},
		{"../../testdata/specs/broken/map-ref-swagger2.yaml", "ref-not-allowed", "broken/map-ref-swagger2.yaml", 13, "the whole definitions map", true},
	}
	for _, tc := range cases {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			res := load(t, Options{Path: tc.path, Infer: true})
			if (res.Doc != nil) != tc.loads {
				t.Errorf("model built: %v, want %v", res.Doc != nil, tc.loads)
			}
			var d *diag.Diagnostic
			for _, e := range errorsOf(res.Diags) {
				if e.Code == tc.code {
					d = &e
					break
				}
			}
			if d == nil {
				t.Fatalf("no %s error in %v", tc.code, errorsOf(res.Diags))
			}
			if !strings.HasSuffix(filepath.ToSlash(d.Loc.File), tc.file) || d.Loc.Line != tc.line || !strings.Contains(d.Message, tc.mention) {
				t.Errorf("first %s error %s\nwant it at …%s:%d mentioning %q", tc.code, d, tc.file, tc.line, tc.mention)
			}
		})
	}
	// Every error names where it is, in the file, and a reference error the way out.
	refCodes := map[string]bool{"dangling-ref": true, "wrong-ref-kind": true, "remote-ref": true, "ref-outside-root": true, "bad-ref": true, "ref-not-allowed": true, "load-failed": true}
	for _, tc := range cases {
		for _, e := range errorsOf(load(t, Options{Path: tc.path}).Diags) {
			if e.Loc.Line == 0 || (e.Hint == "" && refCodes[e.Code]) {
				t.Errorf("%s: %s", tc.path, e)
			}
		}
	}
	// Square's dangling reference is used in five places; all five are reported in one run.
	res := load(t, Options{Path: vendorDir + "/square-connect-v2-oas3-2025-05-21.json"})
	if n := len(errorsOf(res.Diags)); n != 5 {
		t.Errorf("square: %d errors, want 5:\n%s", n, (&diag.Errors{List: errorsOf(res.Diags)}).Error())
	}
}

// TestSquareOnceItsDanglingRefIsFixed: with the one missing schema supplied, Square's spec
// loads, and --infer finds its body-carried keys. The script counted 67 operations with an
// idempotency_key; 4 of them (catalog images, dispute evidence, invoice attachments) carry it
// inside the JSON part "request" of a multipart/form-data upload (/request/idempotency_key),
// and CancelPaymentByIdempotencyKey (POST /v2/payments/cancel) takes the key of the payment to
// cancel, not its own, so 66 is the right count.
func TestSquareOnceItsDanglingRefIsFixed(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a 2.8 MB spec")
	}
	raw, err := os.ReadFile(filepath.Join(vendorDir, "square-connect-v2-oas3-2025-05-21.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["components"].(map[string]any)["schemas"].(map[string]any)["CatalogModifierToggleOverrideType"] = map[string]any{"type": "string"}
	fixed, _ := json.Marshal(doc)
	res := load(t, Options{Path: writeFile(t, "square.json", string(fixed)), Infer: true})
	if errs := errorsOf(res.Diags); len(errs) > 0 {
		t.Fatalf("errors: %v", errs[0])
	}
	required := 0
	for _, op := range res.Doc.Operations {
		k := op.Settings.Key
		want := "/idempotency_key"
		if multipartOnly(op) {
			want = "/request/idempotency_key"
		}
		if k.Carrier != model.CarrierBody || k.Pointer != want {
			t.Errorf("%s %s: key %+v", op.Method, op.Path, k)
		}
		if k.Required {
			required++
		}
	}
	if len(res.Doc.Operations) != 66 || required != 26 {
		t.Errorf("%d operations (%d with a required key), want 66 (26)", len(res.Doc.Operations), required)
	}
	for _, op := range res.Doc.Operations {
		if op.ID == "CancelPaymentByIdempotencyKey" {
			t.Errorf("%s %s: its idempotency_key names the payment to cancel, not this request", op.Method, op.Path)
		}
	}
}

// multipartOnly reports whether every request media type of op is multipart/form-data.
func multipartOnly(op *model.Operation) bool {
	if op.Body == nil {
		return false
	}
	for _, c := range op.Body.Contents {
		if c.Kind != model.ContentMultipart {
			return false
		}
	}
	return true
}

// TestRoundThree pins how spec shapes seen in public specs are read (testdata/specs/round3
// and the golden cases nullable30, nullable31 and oneof-key, one small spec per shape; the
// public specs that show them are listed in testdata/specs/INDEX.md): what each loads as,
// with which key, from which mark, and the errors and warnings by code (docs/cli.md says how
// each is read).
func TestRoundThree(t *testing.T) {
	const dir = "../../testdata/specs/"
	type op struct {
		key      string // header name, body pointer or form field
		required bool
		mark     model.MarkSource
	}
	refs, err := ParseRefMap([]string{"https://schemas.example.com/payments/v1/=" + dir + "round3/remote-copy/payments/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name             string
		opts             Options
		ops              map[string]op
		errors, warnings map[string]int
	}{
		// 1. OpenAPI 3.1 nullable unions on parameters (an optional header of that form is a
		// string parameter) and a 3.0 $ref with a sibling nullable: true.
		{"nullable31", Options{Path: dir + "nullable31.yaml"}, map[string]op{"createTransfer": {"Idempotency-Key", true, model.MarkSpec}}, nil, nil},
		{"nullable30", Options{Path: dir + "nullable30.yaml"}, map[string]op{"createOrder": {"Idempotency-Key", true, model.MarkSpec}}, nil, nil},
		// 2. A key inside every oneOf member: inferred (a member only one shape has is not, and
		// check says so: createNote's possible-idempotency-key, TestShapeKey).
		{"oneof-key", Options{Path: dir + "oneof-key.yaml", Infer: true}, map[string]op{"createTransaction": {"/idempotency_key", true, model.MarkInfer}}, nil, map[string]int{"possible-idempotency-key": 1}},
		{"oneof-key by config", Options{Path: dir + "oneof-key.yaml", ConfigPath: dir + "oneof-key.config.yaml"}, map[string]op{"createTransaction": {"/idempotency_key", true, model.MarkConfig}}, nil, map[string]int{"possible-idempotency-key": 1}},
		// 3. JSON beside its JOSE or JWT form (open banking): loaded with no raw-fingerprint
		// warning, since a signed or encrypted body has no other fingerprint than its bytes
		// (generator TestVendorSpecs r3openbanking generates and builds it).
		{"open-banking", Options{Path: dir + "round3/open-banking.yaml", Infer: true}, map[string]op{
			"createDomesticPaymentConsent": {"x-idempotency-key", true, model.MarkInfer}, "createPixPayment": {"x-idempotency-key", true, model.MarkInfer}}, nil, nil},
		// 4. request_id described in other words, in title, with "de-dup"; not when it names
		// another request.
		{"request-id-wording", Options{Path: dir + "round3/request-id-wording.yaml", Infer: true},
			map[string]op{"sendMessage": {"/request_id", false, model.MarkInfer}, "startWorkflow": {"/requestId", false, model.MarkInfer}}, nil, nil},
		// 5a. A Content-Type header parameter is ignored, as OpenAPI says.
		{"content-type-header", Options{Path: dir + "round3/content-type-header.yaml", Infer: true}, map[string]op{"createPaymentOrder": {"Idempotency-Key", false, model.MarkInfer}}, nil, nil},
		// 5c. An allow-list and patterns instead of a false line per operation.
		{"treasury only", Options{Path: dir + "round3/treasury.yaml", ConfigPath: dir + "round3/treasury.only.yaml", Infer: true}, map[string]op{
			"createPaymentOrder": {"Idempotency-Key", false, model.MarkInfer}, "createLedger": {"Idempotency-Key", false, model.MarkInfer},
			"createLedgerTransaction": {"Idempotency-Key", false, model.MarkInfer}, "deleteLedger": {"Idempotency-Key", true, model.MarkConfig}}, nil, nil},
		// 5d. Every unsafe operation an SDK may key, by the unsafe switch or Stainless's setting.
		{"treasury unsafe", Options{Path: dir + "round3/treasury.yaml", ConfigPath: dir + "round3/treasury.unsafe.yaml"}, map[string]op{
			"createPaymentOrder": {"Idempotency-Key", false, model.MarkUnsafe}, "updatePaymentOrder": {"Idempotency-Key", false, model.MarkUnsafe},
			"createLedger": {"Idempotency-Key", false, model.MarkUnsafe}, "deleteLedger": {"Idempotency-Key", false, model.MarkUnsafe},
			"createLedgerTransaction": {"Idempotency-Key", false, model.MarkUnsafe}, "createCounterparty": {"Idempotency-Key", false, model.MarkUnsafe}}, nil, nil},
		{"treasury stainless", Options{Path: dir + "round3/treasury.yaml", ConfigPath: dir + "round3/treasury.stainless.yaml"}, map[string]op{
			"createPaymentOrder": {"Idempotency-Key", false, model.MarkStainless}, "updatePaymentOrder": {"Idempotency-Key", false, model.MarkStainless},
			"createLedger": {"Idempotency-Key", false, model.MarkStainless}, "deleteLedger": {"Idempotency-Key", false, model.MarkStainless},
			"createLedgerTransaction": {"Idempotency-Key", false, model.MarkStainless}, "createCounterparty": {"Idempotency-Key", false, model.MarkStainless},
			"collectAccount": {"Idempotency-Key", false, model.MarkStainless}}, nil, nil},
		// 6. Errors a user can act on: located, with the way out.
		{"wrong-type", Options{Path: dir + "round3/wrong-type.yaml"}, map[string]op{"createPayment": {"Idempotency-Key", true, model.MarkSpec}}, map[string]int{"wrong-type": 1}, nil},
		{"duplicate-ids", Options{Path: dir + "round3/duplicate-ids.yaml"}, map[string]op{"create": {"Idempotency-Key", true, model.MarkSpec}}, map[string]int{"duplicate-operation-id": 1}, nil},
		{"remote-ref", Options{Path: dir + "round3/remote-ref.yaml"}, map[string]op{"createPayment": {"Idempotency-Key", true, model.MarkSpec}}, map[string]int{"remote-ref": 1}, nil},
		{"remote-ref --ref-map", Options{Path: dir + "round3/remote-ref.yaml", RefMap: refs}, map[string]op{"createPayment": {"Idempotency-Key", true, model.MarkSpec}}, nil, nil},
		{"remote-ref refs:", Options{Path: dir + "round3/remote-ref.yaml", ConfigPath: dir + "round3/remote-ref.config.yaml"}, map[string]op{"createPayment": {"Idempotency-Key", true, model.MarkSpec}}, nil, nil},
		// 7. Other tools' annotations.
		{"annotations", Options{Path: dir + "round3/annotations.yaml"}, map[string]op{
			"createCharge": {"Idempotency-Key", true, model.MarkFern}, "createRefund": {"Idempotency-Key", true, model.MarkXIdempotency}},
			nil, map[string]int{"retries-without-key": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := load(t, tc.opts)
			errs, warns := countCodes(res.Diags)
			if !maps.Equal(errs, tc.errors) || !maps.Equal(warns, tc.warnings) {
				t.Errorf("errors %v, warnings %v; want %v, %v\n%s", errs, warns, tc.errors, tc.warnings, (&diag.Errors{List: res.Diags.Sorted()}).Error())
			}
			if res.Doc == nil {
				t.Fatal("no model")
			}
			got := map[string]op{}
			for _, o := range res.Doc.Operations {
				k := o.Settings.Key
				name := k.Header
				if k.Carrier == model.CarrierBody {
					name = k.Pointer
				}
				got[o.ID] = op{name, k.Required, o.Mark}
			}
			if !maps.Equal(got, tc.ops) {
				t.Errorf("operations %v\nwant %v", got, tc.ops)
			}
			for _, d := range res.Diags.Sorted() {
				if d.Loc.Line == 0 || d.Loc.Pointer == "" {
					t.Errorf("not located: %s", d)
				}
			}
			for _, o := range res.Doc.Operations {
				for _, p := range o.Params {
					if p.In == model.InHeader && ignoredHeader(p.Name) {
						t.Errorf("%s: header parameter %s is read; OpenAPI says it SHALL be ignored", o.ID, p.Name)
					}
				}
			}
		})
	}
	// The 3.0 $ref with nullable: true is the referenced schema, shared, on a nullable member.
	res := load(t, Options{Path: dir + "nullable30.yaml"})
	body := res.Doc.Operations[0].Body.Contents[0].Schema
	for _, p := range body.Properties {
		if want := p.Name != "amount"; p.Nullable != want || (want && p.Schema.Name == "") {
			t.Errorf("property %s: nullable %v, schema %q", p.Name, p.Nullable, p.Schema.Name)
		}
	}
}

// TestRoundThreeMessages: the errors of round three say where, what, and the way out.
func TestRoundThreeMessages(t *testing.T) {
	const dir = "../../testdata/specs/round3/"
	for _, tc := range []struct {
		file, code string
		line       int
		pointer    string
		mention    []string
	}{
		{"wrong-type.yaml", "wrong-type", 18, "/paths/~1payments/post/requestBody/content/application~1json/schema/properties/amount/minimum",
			[]string{`minimum must be a number, not the string "1"`, "write it without quotes (minimum: 1)"}},
		{"duplicate-ids.yaml", "duplicate-operation-id", 13, "/paths/~1v1~1refunds/post/operationId",
			[]string{`operationId "create" is already used by POST /v1/payments`, "overlay: 1.0.0", "target: $.paths['/v1/refunds'].post", "update: {operationId: postV1Refunds}"}},
		{"remote-ref.yaml", "remote-ref", 13, "/paths/~1v1~1payments/post/requestBody/content/application~1json/schema/$ref",
			[]string{"never loads over the network", "--ref-map https://schemas.example.com/payments/v1/payment.yaml=FILE", "refs: in idemgen.yaml"}},
	} {
		res := load(t, Options{Path: dir + tc.file})
		var d *diag.Diagnostic
		for _, e := range errorsOf(res.Diags) {
			if e.Code == tc.code {
				d = &e
			}
		}
		if d == nil {
			t.Fatalf("%s: no %s error in %v", tc.file, tc.code, errorsOf(res.Diags))
		}
		text := d.Message + "\n" + d.Hint
		if d.Loc.Line != tc.line || d.Loc.Pointer != tc.pointer {
			t.Errorf("%s: at %s, want line %d %s", tc.file, d.Loc, tc.line, tc.pointer)
		}
		for _, m := range tc.mention {
			if !strings.Contains(text, m) {
				t.Errorf("%s: %q does not say %q", tc.file, text, m)
			}
		}
	}
}

// TestRoundThreeInVendorSpecs: shapes of round three that the vendor corpus shows too. Mollie's
// spec (published by its Speakeasy-generated SDK) declares a Content-Type header parameter on
// its operations, which idemgen ignores as OpenAPI's Parameter Object says to, and a root
// x-speakeasy-retries policy, reported on every operation as a retry policy that marks nothing.
func TestRoundThreeInVendorSpecs(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a 1.5 MB spec")
	}
	res := load(t, Options{Path: filepath.Join(vendorDir, "mollie-api.yaml"), Infer: true})
	if len(res.Doc.Operations) != 49 {
		t.Fatalf("%d operations, want 49", len(res.Doc.Operations))
	}
	for _, op := range res.Doc.Operations {
		for _, p := range op.Params {
			if p.In == model.InHeader && ignoredHeader(p.Name) {
				t.Errorf("%s %s: header parameter %s is read", op.Method, op.Path, p.Name)
			}
		}
		if len(op.Annotations) != 1 || op.Annotations[0] != (model.Annotation{Extension: "x-speakeasy-retries", Tool: "speakeasy", Read: "retries", Loc: op.Annotations[0].Loc}) ||
			op.Annotations[0].Loc.Line != 45103 {
			t.Errorf("%s %s: annotations %+v", op.Method, op.Path, op.Annotations)
		}
	}
}

// TestBrokenRefHintsAreAWayOut: the overlay each bad $ref's hint shows, applied as printed (all
// of a document's at once), makes the document load without an error: the way out works.
func TestBrokenRefHintsAreAWayOut(t *testing.T) {
	for _, name := range []string{"dangling-ref.yaml", "wrong-kind.yaml", "remote-ref.yaml", "x-named-refs.yaml", "map-ref.yaml", "map-ref-swagger2.yaml"} {
		t.Run(name, func(t *testing.T) {
			path := "../../testdata/specs/broken/" + name
			var overlays []string
			for _, e := range errorsOf(load(t, Options{Path: path}).Diags) {
				_, ov, ok := strings.Cut(e.Hint, ":\n  overlay: 1.0.0")
				if !ok {
					t.Fatalf("no overlay in the hint of %s", e)
				}
				overlays = append(overlays, writeFile(t, fmt.Sprintf("o%d.yaml", len(overlays)), dedent("  overlay: 1.0.0"+ov)))
			}
			res := load(t, Options{Path: path, Overlays: overlays})
			if errs := errorsOf(res.Diags); len(errs) > 0 || res.Doc == nil {
				t.Errorf("with the hints' overlays: %v", errs)
			}
		})
	}
}
