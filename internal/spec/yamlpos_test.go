package spec

import (
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/diag"
)

// TestYAMLSyntaxErrorsLocated: a syntax error is reported at the line (and, where the parser
// agrees, the column) of what is wrong: an unclosed `{` at the brace itself, not one line above
// it as yaml.v3 prints it; a tab at the tab.
func TestYAMLSyntaxErrorsLocated(t *testing.T) {
	const head = "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /p:\n    post:\n      operationId: createP\n      x-idempotent: true\n"
	cases := []struct {
		name, spec   string
		line, column int
		want         string
	}{
		{name: "unclosed brace at the end", spec: head + "      responses:\n        '201': {description: created\n",
			line: 9, column: 16, want: "invalid YAML: did not find expected ',' or '}', in the flow mapping that starts here (noticed at line 10, column 1)"},
		// The two parsers stop at different places here; the line is still the brace's.
		{name: "unclosed brace before more paths", spec: head + "      responses:\n        '201': {description: created\n  /q:\n    get:\n      responses: {'200': {description: ok}}\n",
			line: 9, want: "invalid YAML: did not find expected ',' or '}'"},
		{name: "tab", spec: head + "\tresponses: {}\n", line: 8, column: 1, want: "invalid YAML: found a tab character that violates indentation"},
		{name: "tab starting a line", spec: head + "      responses:\n\t'201': {}\n", line: 9, column: 1, want: "found character that cannot start any token: a tab; YAML indents with spaces only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "openapi.yaml", tc.spec)
			res := load(t, Options{Path: path})
			errs := errorsOf(res.Diags)
			if len(errs) != 1 {
				t.Fatalf("want one error, got:\n%s", (&diag.Errors{List: errs}).Error())
			}
			d := errs[0]
			if d.Code != "invalid-yaml" || d.Loc.Line != tc.line || d.Loc.Column != tc.column || !strings.Contains(d.Message, tc.want) {
				t.Errorf("got %s\nwant invalid-yaml at %d:%d: %s", d, tc.line, tc.column, tc.want)
			}
		})
	}
	// The config file's syntax errors go the same way.
	cfg := writeFile(t, "idemgen.yaml", "version: 1\noperations: {createPayment: true\n")
	res := load(t, Options{Path: writeSpec(t, "false", "", "", ""), ConfigPath: cfg})
	errs := errorsOf(res.Diags)
	if len(errs) != 1 || errs[0].Loc.Line != 2 || errs[0].Loc.Column != 13 || errs[0].Code != "config-invalid" {
		t.Errorf("config syntax error:\n%s", (&diag.Errors{List: errs}).Error())
	}
}
