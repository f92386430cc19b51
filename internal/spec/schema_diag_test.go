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
		{"multipleOf zero", `{type: number, multipleOf: 0}`, "bad-bounds", ptr + "/multipleOf", "multipleOf 0 is not positive"},
		{"multipleOf negative", `{type: integer, multipleOf: -5}`, "bad-bounds", ptr + "/multipleOf", "multipleOf -5 is not positive"},
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

// TestOverlayActionDiagnostics: a failing overlay action is one diagnostic located at its
// target in the overlay file (line, column, /actions/N/target), naming the target; a JSONPath
// the library reads only with its older dialect is a warning in idemgen's own words.
func TestOverlayActionDiagnostics(t *testing.T) {
	const head = "overlay: 1.0.0\ninfo: {title: t, version: \"1\"}\nactions:\n  - target: $.paths['/payments'].post\n    update: {x-note: 1}\n"
	cases := []struct {
		name, actions string
		severity      diag.Severity
		code          string
		line, column  int
		pointer       string
		want          []string // in the message
	}{
		{name: "target matches nothing", actions: "  - target: $.paths['/nope'].post\n    update: {x-idempotent: true}\n",
			severity: diag.Error, code: "overlay-failed", line: 6, column: 13, pointer: "/actions/1/target",
			want: []string{`target "$.paths['/nope'].post" matches nothing in `, "nothing to update"}},
		{name: "remove matches nothing", actions: "  - target: $.paths['/nope']\n    remove: true\n",
			severity: diag.Error, code: "overlay-failed", line: 6, column: 13, pointer: "/actions/1/target",
			want: []string{"nothing to remove"}},
		{name: "not a JSONPath", actions: "  - target: $.paths[?(@.x == 1\n    update: {x-note: 2}\n",
			severity: diag.Error, code: "overlay-invalid", line: 6, column: 13, pointer: "/actions/1/target",
			want: []string{`target "$.paths[?(@.x == 1" is not a valid JSONPath: unexpected token at column 18`}},
		{name: "older JSONPath dialect", actions: "  - target: \"$.paths['/payments'].post[?(@.x-note == 1)]\"\n    update: {x-more: 1}\n",
			severity: diag.Warning, code: "overlay-warning", line: 6, column: 13, pointer: "/actions/1/target",
			want: []string{"is not RFC 9535 JSONPath (unexpected token at column 31)", "add `x-speakeasy-jsonpath: rfc9535` at the overlay's top level"}},
		{name: "update changes nothing", actions: "  - target: $.paths['/payments'].post.operationId\n    update: createPayment\n",
			severity: diag.Warning, code: "overlay-warning", line: 6, column: 13, pointer: "/actions/1/target",
			want: []string{"the update changes nothing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeSpec(t, "{key: {body: /idempotency_key}}", "", "", "")
			ov := writeFile(t, "overlay.yaml", head+tc.actions)
			res := load(t, Options{Path: path, Overlays: []string{ov}})
			all := res.Diags.Sorted()
			if len(all) != 1 {
				t.Fatalf("want one diagnostic, got %d:\n%s", len(all), (&diag.Errors{List: all}).Error())
			}
			d := all[0]
			if d.Severity != tc.severity || d.Code != tc.code || d.Loc.File != ov || d.Loc.Line != tc.line || d.Loc.Column != tc.column || d.Loc.Pointer != tc.pointer {
				t.Errorf("got %s\nwant %s[%s] at %s:%d:%d (at #%s)", d, tc.severity, tc.code, ov, tc.line, tc.column, tc.pointer)
			}
			for _, w := range tc.want {
				if !strings.Contains(d.Message, w) {
					t.Errorf("message %q lacks %q", d.Message, w)
				}
			}
			if strings.Contains(d.Message, "speakeasy.com") || strings.Contains(d.Message, "(strict)") {
				t.Errorf("the library's own wording leaks: %q", d.Message)
			}
			if (tc.severity == diag.Error) != res.OverlayFailed || (res.Doc == nil) != res.OverlayFailed {
				t.Errorf("OverlayFailed %v with Doc %v", res.OverlayFailed, res.Doc != nil)
			}
		})
	}
}
