package spec

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// schemaSpec marks one POST whose JSON body has the property x with schema %[1]s (line 14), and
// an unmarked PUT whose body has the same schema at line 22 (%[2]s).
const schemaSpec = `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /a:
    post:
      operationId: createA
      x-idempotent: true
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                x: %[1]s
      responses: {"201": {description: ok}}
    put:
      operationId: putA
      requestBody:
        content:
          application/json:
            schema:
              properties:
                x: %[2]s
      responses: {"200": {description: ok}}
`

// TestSchemaDiagnostics: a schema no value can satisfy, or a pattern Go cannot check, is a
// located error when a marked operation uses it (the generated decoder would otherwise refuse
// every request, or silently skip the pattern), and is left alone on an unmarked operation.
func TestSchemaDiagnostics(t *testing.T) {
	const ptr = "/paths/~1a/post/requestBody/content/application~1json/schema/properties/x"
	cases := []struct {
		name, schema, code, pointer, msg string
	}{
		{"minimum above maximum", `{type: integer, minimum: 10, maximum: 1}`, "bad-bounds", ptr + "/minimum", "minimum 10 is above maximum 1"},
		{"exclusive equal bounds", `{type: number, minimum: 1, maximum: 1, exclusiveMaximum: true}`, "bad-bounds", ptr + "/minimum", "exclusive"},
		{"minItems above maxItems", `{type: array, items: {type: string}, minItems: 3, maxItems: 1}`, "bad-bounds", ptr + "/minItems", "minItems 3"},
		{"minLength above maxLength", `{type: string, minLength: 5, maxLength: 2}`, "bad-bounds", ptr + "/minLength", "minLength 5"},
		{"pattern neither engine compiles", `{type: string, pattern: "[z-a]"}`, "bad-pattern", ptr + "/pattern", "[z-a]"},
		{"property named empty", `{type: object, properties: {"": {type: string}}}`, "bad-property-name", ptr + "/properties/", `named ""`},
		{"allOf members disagree on a type", `{allOf: [{type: object, properties: {a: {type: string}}}, {type: object, properties: {a: {type: integer}}}]}`,
			"allof-conflict", ptr + "/allOf/1/properties/a", `property "a" is of type integer here and of type string at line 14; allOf requires both`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := load(t, Options{Path: writeFile(t, "openapi.yaml", fmt.Sprintf(schemaSpec, tc.schema, "{type: string}"))})
			errs := errorsOf(res.Diags)
			if len(errs) != 1 {
				t.Fatalf("want one %s error, got:\n%s", tc.code, (&diag.Errors{List: errs}).Error())
			}
			d := errs[0]
			if d.Code != tc.code || d.Loc.Line != 14 || d.Loc.Pointer != tc.pointer || !strings.Contains(d.Message, tc.msg) {
				t.Errorf("got %s\nwant %s at line 14 (at #%s) mentioning %q", d, tc.code, tc.pointer, tc.msg)
			}
			// The same schema on the unmarked operation only: no error.
			res = load(t, Options{Path: writeFile(t, "openapi.yaml", fmt.Sprintf(schemaSpec, "{type: string}", tc.schema))})
			if errs := errorsOf(res.Diags); len(errs) != 0 {
				t.Errorf("unmarked operation's schema reported:\n%s", (&diag.Errors{List: errs}).Error())
			}
		})
	}
}

// TestAllOfMembersThatAgree: members that declare one property compatibly are no error, and the
// model keeps the declaration that says more (an integer over a number, a type over a
// description), not simply the last one.
func TestAllOfMembersThatAgree(t *testing.T) {
	for _, tc := range []struct {
		schema string
		want   model.Type
	}{
		{`{allOf: [{properties: {a: {type: integer}}}, {properties: {a: {type: number}}}]}`, model.TypeInteger},
		{`{allOf: [{properties: {a: {type: number}}}, {properties: {a: {type: integer}}}]}`, model.TypeInteger},
		{`{allOf: [{properties: {a: {type: string}}}, {properties: {a: {description: the payment note}}}]}`, model.TypeString},
		{`{allOf: [{properties: {a: {type: [string, "null"]}}}, {properties: {a: {type: string, maxLength: 3}}}]}`, model.TypeString},
	} {
		res := load(t, Options{Path: writeFile(t, "openapi.yaml", fmt.Sprintf(schemaSpec, tc.schema, "{type: string}"))})
		if errs := errorsOf(res.Diags); len(errs) != 0 {
			t.Errorf("%s: %s", tc.schema, (&diag.Errors{List: errs}).Error())
			continue
		}
		x := res.Doc.Operations[0].Body.Contents[0].Schema.Properties[0].Schema
		if len(x.Properties) != 1 || x.Properties[0].Schema.Type != tc.want {
			t.Errorf("%s: property a is %+v, want %s", tc.schema, x.Properties, tc.want)
		}
	}
}

// TestDuplicateOperationID: OpenAPI requires operationIds to be unique; two operations with one
// ID would share a row of the operation table (its scope and metrics). The error is at the
// second and names the first.
func TestDuplicateOperationID(t *testing.T) {
	path := writeFile(t, "openapi.yaml", `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /a:
    post:
      operationId: same
      x-idempotent: true
      responses: {"201": {description: ok}}
  /b:
    post:
      operationId: same
      x-idempotent: true
      responses: {"201": {description: ok}}
`)
	errs := errorsOf(load(t, Options{Path: path}).Diags)
	if len(errs) != 1 || errs[0].Code != "duplicate-operation-id" || errs[0].Loc.Line != 11 || errs[0].Loc.Pointer != "/paths/~1b/post/operationId" ||
		!strings.Contains(errs[0].Message, fmt.Sprintf("%s:6:", path)) || !strings.Contains(errs[0].Message, `"same"`) {
		t.Fatalf("errors:\n%s", (&diag.Errors{List: errs}).Error())
	}
	// Between unmarked operations (vendor specs do this) it is a warning.
	spec, _ := os.ReadFile(path)
	res := load(t, Options{Path: writeFile(t, "u.yaml", strings.ReplaceAll(string(spec), "      x-idempotent: true\n", ""))})
	if d := res.Diags.Sorted(); res.Diags.HasErrors() || len(d) != 1 || d[0].Code != "duplicate-operation-id" {
		t.Fatalf("unmarked duplicates:\n%s", (&diag.Errors{List: d}).Error())
	}
}

// TestNotAnOpenAPIDocument: an empty file, {} or a YAML map without openapi/swagger is a located
// error, not a document with nothing marked.
func TestNotAnOpenAPIDocument(t *testing.T) {
	for _, content := range []string{"", "{}\n", "info: {title: t}\npaths: {}\n"} {
		path := writeFile(t, "openapi.yaml", content)
		res := load(t, Options{Path: path})
		errs := errorsOf(res.Diags)
		if res.Doc != nil || len(errs) != 1 || errs[0].Code != "not-openapi" || errs[0].Loc.File != path || errs[0].Loc.Line != 1 {
			t.Errorf("%q: doc %v, errors:\n%s", content, res.Doc != nil, (&diag.Errors{List: errs}).Error())
		}
	}
}

// TestOverlayInvalidIsOneLine: an overlay with several problems is one diagnostic on one line
// (the library joins its errors with newlines).
func TestOverlayInvalidIsOneLine(t *testing.T) {
	path := writeSpec(t, "true", "", "", "")
	ov := writeFile(t, "overlay.yaml", "overlay: 2.0.0\nactions: []\n")
	res := load(t, Options{Path: path, Overlays: []string{ov}})
	errs := errorsOf(res.Diags)
	if len(errs) != 1 || errs[0].Code != "overlay-invalid" || strings.Contains(errs[0].String(), "\n") || !strings.Contains(errs[0].Message, "; ") {
		t.Fatalf("errors:\n%s", (&diag.Errors{List: errs}).Error())
	}
}
