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
)

// The errors mapping's problem names and statuses are the runtime's: every Problem... constant
// of runtime/problem.go, with the status its comment gives.
func TestProblemNames(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../runtime/problem.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
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
			lit, ok := vs.Values[0].(*ast.BasicLit)
			m := status.FindStringSubmatch(vs.Comment.Text())
			if !ok || lit.Kind != token.STRING || m == nil {
				continue
			}
			name, _ := strconv.Unquote(lit.Value)
			got[name], _ = strconv.Atoi(m[1])
		}
	}
	if len(got) == 0 {
		t.Fatal("no Problem constants found in runtime/problem.go")
	}
	if !maps.Equal(got, problemStatuses) {
		t.Errorf("runtime's problems %v, the errors mapping's %v", got, problemStatuses)
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
