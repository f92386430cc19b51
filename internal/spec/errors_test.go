package spec

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/defaults"
)

// The statuses runtime/problem.go's godoc gives its Problem... constants are runtime/defaults'
// table, the one the runtime answers with and the errors mapping reads.
func TestProblemNames(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../runtime/problem.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	// runtime's constants are defaults' (ProblemKeyMissing = defaults.ProblemKeyMissing), whose
	// Go names are their problem names in camel case.
	byIdent := map[string]string{}
	for _, p := range defaults.Problems() {
		ident := "Problem"
		for _, w := range strings.Split(p.Name, "-") {
			ident += strings.ToUpper(w[:1]) + w[1:]
		}
		byIdent[ident] = p.Name
	}
	status := regexp.MustCompile(`^\s*(\d{3})\b`)
	got := map[string]int{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if len(vs.Names) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Problem") || len(vs.Values) != 1 || vs.Comment == nil {
				continue
			}
			sel, ok := vs.Values[0].(*ast.SelectorExpr)
			m := status.FindStringSubmatch(vs.Comment.Text())
			if !ok || m == nil {
				continue
			}
			name, ok := byIdent[sel.Sel.Name]
			if !ok || sel.Sel.Name != vs.Names[0].Name {
				t.Errorf("runtime.%s = %s.%s: not the runtime/defaults problem of its name", vs.Names[0].Name, sel.X, sel.Sel.Name)
				continue
			}
			got[name], _ = strconv.Atoi(m[1])
		}
	}
	if len(got) == 0 {
		t.Fatal("no Problem constants found in runtime/problem.go")
	}
	want := map[string]int{}
	for _, p := range defaults.Problems() {
		want[p.Name] = p.Status
	}
	if !maps.Equal(got, want) {
		t.Errorf("runtime/problem.go documents %v, runtime/defaults answers %v", got, want)
	}
}

// Schema.Validate checks the schema's rules, and with strict refuses a member the schema does
// not declare at any depth, naming it.
func TestSchemaValidate(t *testing.T) {
	s, err := ParseSchema([]byte(`
type: object
required: [detail]
properties:
  detail:
    type: array
    items:
      type: object
      required: [msg]
      properties: {msg: {type: string}, loc: {type: array, items: {type: string}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		doc    string
		strict bool
		want   string // "" passes
	}{
		{`{"detail": [{"msg": "m", "loc": ["body"]}]}`, true, ""},
		{`{"detail": [{"msg": "m", "extra": 1}]}`, false, ""},
		{`{"detail": [{"msg": "m", "extra": 1}]}`, true, "/detail/0/extra"},
		{`{"detail": [{"loc": []}]}`, false, "msg"},
		{`{"detail": "x"}`, false, "array"},
		{`not json`, false, "not JSON"},
	} {
		err := s.Validate([]byte(c.doc), c.strict)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s (strict %v): %v, want %q", c.doc, c.strict, err, c.want)
		}
	}
	if _, err := ParseSchema([]byte(`{type: objekt}`)); err == nil {
		t.Error("a schema of an unknown type was accepted")
	}
}

// An errors mapping onto an OpenAPI 3.1 error schema whose members allow null (`type: [array,
// "null"]` and `type: [string, "null"]`, as Huma writes its ErrorModel, or a nullable anyOf):
// the template writes the value, so the member is read as its non-null type. Before, such a
// member had "no single type" and every template writing it was refused.
func TestErrorsMappingTypeArraysWithNull(t *testing.T) {
	const doc = `openapi: 3.1.0
info: {title: t, version: "1"}
x-idempotency:
  errors:
    content-type: application/problem+json
    formats:
      - schema: '#/components/schemas/ErrorModel'
        body: {type: 'https://example.com/problems/{name}', title: '{title}', status: '{status}', detail: '{detail}', instance: '{pointer}'}
    problems:
      body-invalid: {body: {errors: [{location: 'body{pointer}', message: '{detail}'}], code: '{name}'}}
paths:
  /payments:
    post:
      operationId: createPayment
      x-idempotent: true
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {amount: {type: integer}}}
      responses:
        '201': {description: created}
        default:
          description: error
          content:
            application/problem+json:
              schema: {$ref: '#/components/schemas/ErrorModel'}
components:
  schemas:
    ErrorDetail:
      type: object
      additionalProperties: false
      properties:
        location: {type: string}
        message: {type: string}
        value: {}
    ErrorModel:
      type: object
      additionalProperties: false
      properties:
        $schema: {type: string, format: uri, readOnly: true}
        type: {type: string, format: uri, default: about:blank}
        title: {type: string}
        status: {type: [integer, "null"], format: int64}
        detail: {type: [string, "null"]}
        instance: {anyOf: [{type: string}, {type: "null"}]}
        code: {oneOf: [{type: "null"}, {type: string}]}
        errors:
          type: [array, "null"]
          items: {$ref: '#/components/schemas/ErrorDetail'}
`
	res := load(t, Options{Path: writeFile(t, "openapi.yaml", doc)})
	if errs := errorsOf(res.Diags); len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	if len(res.Doc.Operations) != 1 || res.Doc.Operations[0].Settings.Errors == nil {
		t.Fatal("no errors mapping resolved")
	}
	var members []string
	for _, d := range res.Doc.Operations[0].Settings.Errors.Docs {
		if d.Problem != "body-invalid" {
			continue
		}
		for _, m := range d.Body.Members {
			members = append(members, m.Name)
		}
	}
	if got := strings.Join(members, ","); got != "code,detail,errors,instance,status,title,type" {
		t.Errorf("body-invalid writes %s", got)
	}

	// A type array of two non-null types is still no single type.
	bad := strings.Replace(doc, `detail: {type: [string, "null"]}`, `detail: {type: [string, integer]}`, 1)
	res = load(t, Options{Path: writeFile(t, "openapi.yaml", bad)})
	if errs := errorsOf(res.Diags); len(errs) == 0 || !strings.Contains(errs[0].Message, "no single type") {
		t.Errorf("a type array of string and integer: %v", errs)
	}
}
