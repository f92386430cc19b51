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
