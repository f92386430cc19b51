package spec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

const graphSpec = `openapi: 3.1.0
info: {title: graph, version: "1"}
paths:
  /orders/{order_id}/lines/{line_id}:
    parameters:
      - {name: line_id, in: path, required: true, schema: {type: string}}
    post:
      operationId: create_payment
      x-idempotent: true
      parameters:
        - {name: order_id, in: path, required: true, schema: {type: integer}}
        - {name: zeta, in: query, schema: {type: string}}
        - {name: alpha, in: query, schema: {type: string}}
        - {name: Idempotency-Key, in: header, required: false, schema: {type: string, minLength: 10, maxLength: 64, pattern: "^[a-z0-9-]+$"}}
        - {name: X-Trace, in: header, schema: {type: string}}
        - {name: session, in: cookie, schema: {type: string}}
      requestBody:
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Order'}
          application/merge-patch+json:
            schema: {$ref: '#/components/schemas/Order'}
          text/plain: {}
      responses:
        "201": {description: created}
        "4XX": {description: client error}
  /payments:
    post:
      operationId: createPayment
      x-idempotent: true
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema:
              type: object
              properties:
                amount: {type: integer}
      responses:
        default: {description: any}
    put: {responses: {"200": {description: ok}}}
components:
  schemas:
    Order:
      type: object
      required: [customer]
      properties:
        zz_first: {type: string}
        customer: {$ref: '#/components/schemas/Customer'}
        backup_customer: {$ref: '#/components/schemas/Customer'}
        note: {type: [string, "null"], maxLength: 200}
        legacy: {type: string, nullable: true}
        amount: {type: integer, minimum: 1, exclusiveMaximum: 1000}
        method: {oneOf: [{type: string}, {type: integer}]}
        metadata: {type: object, additionalProperties: {type: string}}
        strict: {type: object, additionalProperties: false, properties: {a: {type: boolean}}}
        tags: {type: array, items: {type: string, enum: [a, b]}, maxItems: 5}
        sent_at: {type: string, format: date-time, x-idempotency-ignore: true}
        user_id: {type: string}
        userId: {type: string}
    Customer:
      type: object
      properties:
        name: {type: string}
        referrer: {$ref: '#/components/schemas/Customer'}
    Unused:
      type: object
`

func loadGraph(t *testing.T) *model.Document {
	t.Helper()
	res := load(t, Options{Path: writeFile(t, "graph.yaml", graphSpec)})
	if errs := errorsOf(res.Diags); len(errs) > 0 {
		t.Fatalf("errors:\n%s", (&diag.Errors{List: errs}).Error())
	}
	return res.Doc
}

func TestOperationsNamesAndParams(t *testing.T) {
	doc := loadGraph(t)
	if len(doc.Operations) != 2 || len(doc.Unmarked) != 1 {
		t.Fatalf("%d marked, %d unmarked", len(doc.Operations), len(doc.Unmarked))
	}
	a, b := doc.Operations[0], doc.Operations[1]
	// create_payment and createPayment both want CreatePayment: the first in path order keeps it.
	if a.GoName != "CreatePayment" || b.GoName != "CreatePayment2" {
		t.Errorf("GoNames %q, %q", a.GoName, b.GoName)
	}
	if u := doc.Unmarked[0]; u.ID != "putPayments" || !u.IDDerived || u.GoName != "PutPayments" {
		t.Errorf("derived id %q derived=%v goName %q", u.ID, u.IDDerived, u.GoName)
	}
	var got []string
	for _, p := range a.Params {
		got = append(got, string(p.In)+":"+p.Name+":"+p.GoName)
	}
	want := "path:order_id:OrderID path:line_id:LineID query:alpha:Alpha query:zeta:Zeta header:Idempotency-Key:IdempotencyKey header:X-Trace:XTrace"
	if strings.Join(got, " ") != want {
		t.Errorf("params\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if !a.Params[4].IsKey || a.Params[5].IsKey {
		t.Error("IsKey not on the Idempotency-Key header only")
	}
	if slices.Compare(a.Responses, []string{"201", "4XX"}) != 0 {
		t.Errorf("responses %v", a.Responses)
	}
	// The key rules come from the header's declaration when x-idempotent does not set them.
	k := a.Settings.Key
	if k.Carrier != model.CarrierHeader || k.Header != "Idempotency-Key" || k.Required || k.MinLength != 10 || k.MaxLength != 64 || k.Pattern != "^[a-z0-9-]+$" {
		t.Errorf("key %+v", k)
	}
	// A form body without a declared key header falls back to the defaults.
	if k := b.Settings.Key; !k.Required || k.MinLength != 16 || k.MaxLength != 255 || k.Pattern != "" {
		t.Errorf("default key %+v", k)
	}
}

func TestContentsAndRawWarning(t *testing.T) {
	res := load(t, Options{Path: writeFile(t, "graph.yaml", graphSpec)})
	op := res.Doc.Operations[0]
	var got []string
	for _, c := range op.Body.Contents {
		got = append(got, c.MediaType+"="+string(c.Kind))
	}
	if want := "application/json=json application/merge-patch+json=json text/plain=raw"; strings.Join(got, " ") != want {
		t.Errorf("contents %s", strings.Join(got, " "))
	}
	if op.Body.Contents[2].Schema != nil {
		t.Error("text/plain has no schema")
	}
	if res.Doc.Operations[1].Body.Contents[0].Kind != model.ContentForm {
		t.Error("form body not classified as form")
	}
	warned := 0
	for _, d := range res.Diags.Sorted() {
		if d.Code == "raw-fingerprint" && d.Severity == diag.Warning && strings.Contains(d.Message, "text/plain") && strings.Contains(d.Message, "(README.md, fingerprint.body)") {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("%d raw-fingerprint warnings, want 1: %v", warned, res.Diags.Sorted())
	}

	// fingerprint.body: raw makes every content raw, and asks for it, so no warning.
	spec := strings.Replace(graphSpec, "operationId: create_payment\n      x-idempotent: true", "operationId: create_payment\n      x-idempotent: {fingerprint: {body: raw}}", 1)
	res = load(t, Options{Path: writeFile(t, "raw.yaml", spec)})
	for _, c := range res.Doc.Operations[0].Body.Contents {
		if c.Kind != model.ContentRaw {
			t.Errorf("%s is %s under fingerprint.body: raw", c.MediaType, c.Kind)
		}
	}
	if res.Diags.Len() != 0 {
		t.Errorf("diagnostics: %v", res.Diags.Sorted())
	}
}

func TestSchemaGraph(t *testing.T) {
	doc := loadGraph(t)
	op := doc.Operations[0]
	order := op.Body.Contents[0].Schema
	// The merge patch body reads Order as a JSON merge patch (RFC 7396): a copy of its own,
	// named after it, whose optional members may be null.
	patch := op.Body.Contents[1].Schema
	if op.Body.Contents[1].MediaType != "application/merge-patch+json" || patch == order || !patch.MergePatch || order.MergePatch ||
		patch.Name != "Order" || patch.GoName != "OrderPatch" {
		t.Fatalf("the merge patch body's schema is %+v, want a MergePatch copy of Order named OrderPatch", patch)
	}
	for i, p := range patch.Properties {
		if p.Name != order.Properties[i].Name || p.Nullable != (!p.Required && !p.Schema.Nullable) {
			t.Errorf("merge patch member %s: required %v, nullable %v (schema %v)", p.Name, p.Required, p.Nullable, p.Schema.Nullable)
		}
	}
	if order.Name != "Order" || order.GoName != "Order" || order.Type != model.TypeObject {
		t.Fatalf("order %+v", order)
	}
	var names []string
	props := map[string]*model.Property{}
	for _, p := range order.Properties {
		names = append(names, p.Name+"="+p.GoName)
		props[p.Name] = p
	}
	want := "zz_first=ZzFirst customer=Customer backup_customer=BackupCustomer note=Note legacy=Legacy amount=Amount method=Method metadata=Metadata strict=Strict tags=Tags sent_at=SentAt user_id=UserID userId=UserID2"
	if strings.Join(names, " ") != want {
		t.Errorf("properties in spec order\n got %s\nwant %s", strings.Join(names, " "), want)
	}
	cust := props["customer"].Schema
	if !props["customer"].Required || props["note"].Required {
		t.Error("required flags wrong")
	}
	if cust != props["backup_customer"].Schema || cust.Properties[1].Schema != cust {
		t.Error("Customer is not shared, or its cycle is not closed")
	}
	if n := props["note"].Schema; n.Type != model.TypeString || !n.Nullable || n.MaxLength == nil || *n.MaxLength != 200 {
		t.Errorf("3.1 type array: %+v", n)
	}
	if l := props["legacy"].Schema; l.Type != model.TypeString || !l.Nullable {
		t.Errorf("3.0 nullable: %+v", l)
	}
	if a := props["amount"].Schema; a.Type != model.TypeInteger || *a.Minimum != 1 || *a.Maximum != 1000 || !a.ExclusiveMax || a.ExclusiveMin {
		t.Errorf("bounds: %+v", a)
	}
	if m := props["method"].Schema; m.Type != model.TypeAny || !m.Composite {
		t.Errorf("oneOf: %+v", m)
	}
	if m := props["metadata"].Schema; m.AdditionalProperties == nil || m.AdditionalProperties.Type != model.TypeString {
		t.Errorf("map: %+v", m)
	}
	if s := props["strict"].Schema; !s.ClosedObject || s.AdditionalProperties != nil {
		t.Errorf("closed object: %+v", s)
	}
	if tg := props["tags"].Schema; tg.Type != model.TypeArray || tg.Items.Type != model.TypeString || slices.Compare(tg.Items.Enum, []string{"a", "b"}) != 0 || *tg.MaxItems != 5 {
		t.Errorf("array: %+v", tg)
	}
	if !props["sent_at"].Ignore || props["amount"].Ignore {
		t.Error("x-idempotency-ignore not carried to the property")
	}
	var schemaNames []string
	for _, s := range doc.Schemas {
		schemaNames = append(schemaNames, s.Name)
	}
	if strings.Join(schemaNames, " ") != "Customer Customer Order Order" { // each with its merge patch copy
		t.Errorf("reachable named schemas %v (Unused must not appear)", schemaNames)
	}
	if order.Loc.Line == 0 {
		t.Error("schema not located")
	}
}

// TestInferKeyRules: under --infer a vendor's optional header stays optional and the body
// property's declared constraints become the key rules, unless x-idempotent says otherwise.
func TestInferKeyRules(t *testing.T) {
	path := writeSpec(t, "false", "", "", "")
	spec, _ := os.ReadFile(path)
	s := strings.Replace(string(spec), "      x-idempotent: false\n      parameters", "      parameters", 1)
	res := load(t, Options{Path: writeFile(t, "infer.yaml", s), Infer: true})
	if errs := errorsOf(res.Diags); len(errs) > 0 || len(res.Doc.Operations) != 1 {
		t.Fatalf("errors %v, %d marked", errs, len(res.Doc.Operations))
	}
	k := res.Doc.Operations[0].Settings.Key
	if k.Carrier != model.CarrierBody || k.Pointer != "/idempotency_key" || !k.Required || k.MinLength != 8 || k.MaxLength != 255 ||
		slices.Compare(k.PointerTokens, []string{"idempotency_key"}) != 0 {
		t.Errorf("inferred body key %+v", k)
	}
	// Explicit settings beat the declaration.
	res = load(t, Options{Path: writeSpec(t, `{key: {body: /idempotency_key, required: false, minLength: 20}}`, "", "", "")})
	if k := res.Doc.Operations[0].Settings.Key; k.Required || k.MinLength != 20 {
		t.Errorf("explicit key %+v", k)
	}
}

func TestUnmarkedWarningHint(t *testing.T) {
	path := writeSpec(t, "false", "", "", "")
	spec, _ := os.ReadFile(path)
	s := strings.Replace(string(spec), "      x-idempotent: false\n      parameters: [{name: X-Account", "      parameters: [{name: x-IDEMPOTENCY-key, in: header, schema: {type: string}}, {name: X-Account", 1)
	res := load(t, Options{Path: writeFile(t, "warn.yaml", s)})
	ws := res.Diags.Sorted()
	if len(ws) != 1 || ws[0].Code != "unmarked-idempotency-key" || ws[0].Severity != diag.Warning || ws[0].Loc.Line != 6 {
		t.Fatalf("diagnostics %v", ws)
	}
	if !strings.Contains(ws[0].Hint, `"createPayment":`) || !strings.Contains(ws[0].Hint, `key: {header: "x-IDEMPOTENCY-key", required: false}`) {
		t.Errorf("hint %q", ws[0].Hint)
	}
}

func TestSwagger2BOMAndOverlay(t *testing.T) {
	swagger := "\xEF\xBB\xBF" + `swagger: "2.0"
info: {title: old, version: "1"}
paths:
  /charges:
    post:
      operationId: createCharge
      x-idempotent: {key: {header: X-Request-Id}}
      consumes: [application/json]
      parameters:
        - {name: body, in: body, schema: {type: object, properties: {amount: {type: integer}}}}
      responses:
        "200": {description: ok}
`
	res := load(t, Options{Path: writeFile(t, "swagger.yaml", swagger)})
	if errs := errorsOf(res.Diags); len(errs) > 0 || len(res.Doc.Operations) != 1 {
		t.Fatalf("errors %v", errs)
	}
	op := res.Doc.Operations[0]
	if !strings.HasPrefix(res.Doc.OpenAPI, "3.") || op.Settings.Key.Header != "X-Request-Id" || op.Body == nil || op.Body.Contents[0].Kind != model.ContentJSON {
		t.Errorf("converted: openapi %s, op %+v", res.Doc.OpenAPI, op)
	}

	// Without any consumes, a body is JSON (not the converter's "*/*", which would be raw bytes).
	noConsumes := strings.Replace(swagger, "      consumes: [application/json]\n", "", 1)
	if noConsumes == swagger {
		t.Fatal("test spec lost its consumes line")
	}
	res = load(t, Options{Path: writeFile(t, "swagger-no-consumes.yaml", noConsumes)})
	if errs := errorsOf(res.Diags); len(errs) > 0 || len(res.Doc.Operations) != 1 {
		t.Fatalf("no consumes: errors %v", errs)
	}
	if b := res.Doc.Operations[0].Body; b == nil || len(b.Contents) != 1 || b.Contents[0].MediaType != "application/json" || b.Contents[0].Kind != model.ContentJSON {
		t.Errorf("no consumes: body %+v, want one application/json content", b)
	}

	dir := t.TempDir()
	specPath := filepath.Join(dir, "openapi.yaml")
	os.WriteFile(specPath, []byte(strings.Replace(swagger, `swagger: "2.0"`, `swagger: "2.0"`, 1)), 0o644)
	ov := filepath.Join(dir, "overlay.yaml")
	os.WriteFile(ov, []byte(`overlay: 1.0.0
info: {title: mark charges, version: "1"}
actions:
  - target: $.paths['/charges'].post
    update:
      x-idempotent: {retention: 72h, key: {header: Idempotency-Key}}
`), 0o644)
	res = load(t, Options{Path: specPath, Overlays: []string{ov}})
	if errs := errorsOf(res.Diags); len(errs) > 0 {
		t.Fatalf("errors %v", errs)
	}
	if s := res.Doc.Operations[0].Settings; s.Retention.Hours() != 72 || s.Key.Header != "Idempotency-Key" {
		t.Errorf("overlay not applied: %+v", s)
	}
}

// TestSplitSpec: a spec split over files with relative $refs loads, and operations are located
// in the file that defines them.
func TestSplitSpec(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(content), 0o644)
	}
	write("openapi.yaml", "openapi: 3.0.3\ninfo: {title: split, version: '1'}\npaths:\n  /payments:\n    $ref: './paths/payments.yaml#/payments'\n")
	write("paths/payments.yaml", `payments:
  post:
    operationId: createPayment
    x-idempotent: {key: {body: /data/attributes/idempotencyKey}}
    requestBody:
      content:
        application/vnd.api+json:
          schema: {$ref: '../schemas/payment.yaml#/CreatePayment'}
    responses:
      "201": {description: created}
`)
	write("schemas/payment.yaml", `CreatePayment:
  type: object
  properties:
    data:
      type: object
      properties:
        attributes: {$ref: '#/Attributes'}
Attributes:
  type: object
  required: [idempotencyKey]
  properties:
    idempotencyKey: {type: string, maxLength: 255}
`)
	res := load(t, Options{Path: filepath.Join(dir, "openapi.yaml")})
	if errs := errorsOf(res.Diags); len(errs) > 0 {
		t.Fatalf("errors %v", errs)
	}
	op := res.Doc.Operations[0]
	if !strings.HasSuffix(op.Loc.File, "paths/payments.yaml") || op.Loc.Line != 2 {
		t.Errorf("operation located at %s", op.Loc)
	}
	if k := op.Settings.Key; k.Carrier != model.CarrierBody || k.Required || len(k.PointerTokens) != 3 {
		// data is not required, so the key as a whole is optional by declaration.
		t.Errorf("key %+v", k)
	}
	if s := op.Body.Contents[0].Schema; s.Name != "CreatePayment" || s.Properties[0].Schema.Properties[0].Schema.Name != "Attributes" {
		t.Errorf("external schemas not named: %+v", s)
	}
	// Positions inside referenced files come from those files.
	attrs := op.Body.Contents[0].Schema.Properties[0].Schema.Properties[0].Schema
	if !strings.HasSuffix(attrs.Loc.File, filepath.Join("schemas", "payment.yaml")) || attrs.Loc.Line != 8 || attrs.Loc.Pointer != "/Attributes" {
		t.Errorf("Attributes located at %s #%s", attrs.Loc, attrs.Loc.Pointer)
	}
}

// TestOverlayKeepsSpecLines: after an overlay, diagnostics about the original document still
// point at its lines; a value the overlay added is named by its pointer.
func TestOverlayKeepsSpecLines(t *testing.T) {
	specPath := writeSpec(t, `{retention: soon}`, "", "", "")
	ov := filepath.Join(filepath.Dir(specPath), "overlay.yaml")
	os.WriteFile(ov, []byte(`overlay: 1.0.0
info: {title: t, version: "1"}
actions:
  - target: $.paths['/payments'].post.x-idempotent
    update: {lease: later}
`), 0o644)
	res := load(t, Options{Path: specPath, Overlays: []string{ov}})
	errs := errorsOf(res.Diags)
	if len(errs) != 2 {
		t.Fatalf("errors %v", errs)
	}
	byPtr := map[string]diag.Diagnostic{}
	for _, d := range errs {
		byPtr[d.Loc.Pointer] = d
	}
	if d := byPtr[postPtr+"/retention"]; d.Code != "bad-duration" || d.Loc.File != specPath || d.Loc.Line != 8 {
		t.Errorf("original value: %s", d)
	}
	if d := byPtr[postPtr+"/lease"]; d.Code != "bad-duration" || d.Loc.File != specPath {
		t.Errorf("overlaid value: %s", d)
	}
}

// TestRefOutsideRootRefused: a $ref may not leave the root document's directory, even to a
// file that exists; the error names the $ref and its line.
func TestRefOutsideRootRefused(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "api"), 0o755)
	os.WriteFile(filepath.Join(dir, "shared.yaml"), []byte("Payment: {type: object}\n"), 0o644)
	root := filepath.Join(dir, "api", "openapi.yaml")
	os.WriteFile(root, []byte(`openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /payments:
    post:
      requestBody:
        content:
          application/json:
            schema: {$ref: '../shared.yaml#/Payment'}
      responses: {"201": {description: ok}}
`), 0o644)
	res := load(t, Options{Path: root})
	errs := errorsOf(res.Diags)
	if len(errs) != 1 || errs[0].Code != "ref-outside-root" || errs[0].Loc.Line != 9 {
		t.Fatalf("got %v", errs)
	}
	// The rest of the document is read (the schema set aside accepts any value).
	if res.Doc == nil || len(res.Doc.Unmarked) != 1 || res.Doc.Unmarked[0].Body.Contents[0].Schema.Type != model.TypeAny {
		t.Errorf("model %+v", res.Doc)
	}
}

// TestKeyNotDeclaredWarning: marking an operation that declares X-Idempotency-Key with the
// default header warns and suggests the declared one.
func TestKeyNotDeclaredWarning(t *testing.T) {
	path := writeSpec(t, "true", "", "", "")
	spec, _ := os.ReadFile(path)
	s := strings.Replace(string(spec), "parameters: [{name: X-Account", "parameters: [{name: X-Idempotency-Key, in: header, schema: {type: string}}, {name: X-Account", 1)
	res := load(t, Options{Path: writeFile(t, "k.yaml", s)})
	ds := res.Diags.Sorted()
	if len(ds) != 1 || ds[0].Code != "key-not-declared" || ds[0].Loc.Line != 8 || !strings.Contains(ds[0].Hint, `key: {header: "X-Idempotency-Key"}`) {
		t.Fatalf("diagnostics %v", ds)
	}
	if k := res.Doc.Operations[0].Settings.Key; k.Header != "Idempotency-Key" {
		t.Errorf("the warning must not change the key: %+v", k)
	}
}

// TestFormBodySettings: for a form body, key.body and fingerprint.exclude name form fields.
func TestFormBodySettings(t *testing.T) {
	spec := strings.Replace(graphSpec, "operationId: createPayment\n      x-idempotent: true",
		"operationId: createPayment\n      x-idempotent: {key: {body: token}, fingerprint: {exclude: [amount, nope]}}", 1)
	spec = strings.Replace(spec, "                amount: {type: integer}\n", "                amount: {type: integer}\n                token: {type: string, maxLength: 40}\n", 1)
	res := load(t, Options{Path: writeFile(t, "form.yaml", spec)})
	errs := errorsOf(res.Diags)
	if len(errs) != 1 || errs[0].Code != "exclude-matches-nothing" || !strings.HasSuffix(errs[0].Loc.Pointer, "/fingerprint/exclude/1") {
		t.Fatalf("errors %v", errs)
	}
	op := res.Doc.Operations[1]
	k := op.Settings.Key
	if k.Carrier != model.CarrierForm || k.Field != "token" || k.Required || k.MaxLength != 40 {
		t.Errorf("form key %+v", k)
	}
	if ex := op.Settings.Fingerprint.Exclude; len(ex) != 1 || ex[0].Raw != "amount" || slices.Compare(ex[0].Tokens, []string{"amount"}) != 0 {
		t.Errorf("form exclude %+v", ex)
	}

	spec = strings.Replace(spec, "key: {body: token}", "key: {body: amount}", 1)
	spec = strings.Replace(spec, "exclude: [amount, nope]", "exclude: [amount]", 1)
	res = load(t, Options{Path: writeFile(t, "form2.yaml", spec)})
	if errs := errorsOf(res.Diags); len(errs) != 1 || errs[0].Code != "key-body-not-string" {
		t.Fatalf("errors %v", errs)
	}
}

// TestComponentAliasKeepsDefinitionName: a component that only refers to another names nothing;
// the schema keeps its definition's name.
func TestComponentAliasKeepsDefinitionName(t *testing.T) {
	spec := strings.Replace(graphSpec, "    Unused:\n", "    AAlias: {$ref: '#/components/schemas/Customer'}\n    Unused:\n", 1)
	res := load(t, Options{Path: writeFile(t, "alias.yaml", spec)})
	if errs := errorsOf(res.Diags); len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, s := range res.Doc.Schemas {
		if s.Name == "AAlias" {
			t.Errorf("schema named after its alias: %+v", s)
		}
	}
}

// TestBracketedFormModel: Stripe's "" sentinel becomes EmptyOr, a form's encoding object is
// kept, and fingerprint.exclude reaches below a form field by JSON pointer or bracketed name.
func TestBracketedFormModel(t *testing.T) {
	spec := `openapi: 3.0.3
info: {title: forms, version: "1"}
paths:
  /v1/customers:
    post:
      operationId: createCustomer
      x-idempotent:
        fingerprint: {exclude: [/metadata/trace_id, "address[line2]", "items[*][note]", client_ip, /nope/x, "nope[x]"]}
      requestBody:
        content:
          application/x-www-form-urlencoded:
            encoding:
              metadata: {style: deepObject, explode: true}
              address: {style: deepObject}
              tags: {style: pipeDelimited}
              payload: {contentType: application/json}
            schema:
              type: object
              properties:
                client_ip: {type: string}
                metadata:
                  anyOf:
                    - {type: object, additionalProperties: {type: string}}
                    - {type: string, enum: ['']}
                address:
                  anyOf:
                    - {type: object, properties: {line2: {type: string}}}
                    - {type: string, enum: ['']}
                items:
                  type: array
                  items: {type: object, properties: {note: {type: string}}}
                source:
                  anyOf:
                    - {type: string}
                    - {type: integer}
                    - {type: string, enum: ['']}
                token: {anyOf: [{type: string}, {type: integer}]}
                tags: {type: array, items: {type: string}}
                payload: {type: object}
      responses:
        '200': {description: ok}
`
	res := load(t, Options{Path: writeFile(t, "bracketed.yaml", spec)})
	errs := errorsOf(res.Diags)
	if len(errs) != 2 || !strings.Contains(errs[0].Message, `"/nope/x"`) || !strings.Contains(errs[1].Message, `"nope[x]"`) {
		t.Fatalf("errors %v", errs)
	}
	op := res.Doc.Operations[0]
	c := op.Body.Contents[0]
	props := map[string]*model.Schema{}
	for _, p := range c.Schema.Properties {
		props[p.Name] = p.Schema
	}
	if m := props["metadata"].EmptyOr; m == nil || m.Type != model.TypeObject || m.AdditionalProperties == nil {
		t.Errorf("metadata EmptyOr %+v", m)
	}
	if a := props["address"].EmptyOr; a == nil || len(a.Properties) != 1 || a.Properties[0].Name != "line2" {
		t.Errorf("address EmptyOr %+v", a)
	}
	if s := props["source"].EmptyOr; s == nil || !s.Composite || s.CompositeOf != "anyOf" || len(s.Variants) != 2 {
		t.Errorf("source EmptyOr %+v", s)
	}
	if props["token"].EmptyOr != nil || !props["token"].Composite {
		t.Errorf("token %+v", props["token"])
	}
	want := map[string]model.Encoding{
		"metadata": {Style: "deepObject", Explode: true},
		"address":  {Style: "deepObject", Explode: false},
		"tags":     {Style: "pipeDelimited", Explode: false},
		"payload":  {ContentType: "application/json", Explode: true},
	}
	for name, w := range want {
		got := c.Encoding[name]
		got.Loc = w.Loc
		if got != w {
			t.Errorf("encoding %s = %+v, want %+v", name, got, w)
		}
	}
	var ex []string
	for _, p := range op.Settings.Fingerprint.Exclude {
		ex = append(ex, p.Raw+"="+strings.Join(p.Tokens, "|"))
	}
	if got := strings.Join(ex, " "); got != "/metadata/trace_id=metadata|trace_id address[line2]=address|line2 items[*][note]=items|*|note client_ip=client_ip" {
		t.Errorf("exclusions %s", got)
	}
}
