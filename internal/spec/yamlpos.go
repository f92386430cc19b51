package spec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	yaml4 "go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/internal/diag"
)

// yamlSyntax is a yaml.v3 syntax error: "yaml: line 8: did not find expected ',' or '}'".
var yamlSyntax = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// v3ContextErrors are the yaml.v3 parser errors located at the collection they are about, whose
// line yaml.v3 prints counting from 0 (its scanner errors count from 1): an unclosed `{` on
// line 9 is reported at line 8.
var v3ContextErrors = regexp.MustCompile(`^did not find expected (key|'-' indicator|',' or '\]'|',' or '\}')$`)

// syntaxDiag locates a YAML syntax error that yaml.v3 (kin-openapi's parser and the config's)
// reported as msg. yaml.v3 gives a line only, one too low for the errors above; the YAML
// library's v4 parser, which reports the same errors with their line and column and the place
// where the construct at fault begins, is run on the file again to get them. When v4 finds a
// different problem (the two scanners do not always stop at the same place), the v3 message is
// kept, at its corrected line, without a column.
func syntaxDiag(file, msg string) (diag.Diagnostic, bool) {
	m := yamlSyntax.FindStringSubmatch(msg)
	if m == nil {
		return diag.Diagnostic{}, false
	}
	text := m[2]
	line, _ := strconv.Atoi(m[1])
	if v3ContextErrors.MatchString(text) {
		line++
	}
	dg := diag.Diagnostic{Severity: diag.Error, Code: "invalid-yaml", Loc: diag.Loc{File: file, Line: line}, Message: "invalid YAML: " + text}
	data, err := os.ReadFile(file)
	if err != nil {
		return dg, true
	}
	data = bytes.TrimPrefix(data, bom)
	var n yaml4.Node
	var le *yaml4.LoadError
	if !errors.As(yaml4.Unmarshal(data, &n), &le) || le.Message != text || le.Mark.Line == 0 {
		return dg, true
	}
	at, extra := le.Mark, ""
	if strings.HasPrefix(le.ContextMsg, "while parsing ") && le.ContextMark.Line > 0 && le.ContextMark != le.Mark {
		// Point at the construct that is not closed or continued as expected (the `{`), and
		// say where the parser noticed.
		at = le.ContextMark
		extra = fmt.Sprintf(", in the %s that starts here (noticed at line %d, column %d)",
			strings.TrimPrefix(strings.TrimPrefix(le.ContextMsg, "while parsing "), "a "), le.Mark.Line, le.Mark.Column)
	}
	if i := le.Mark.Index; i >= 0 && i < len(data) && data[i] == '\t' && !strings.Contains(text, "tab") {
		extra += ": a tab; YAML indents with spaces only"
	}
	dg.Loc.Line, dg.Loc.Column = at.Line, at.Column
	dg.Message = "invalid YAML: " + text + extra
	return dg, true
}
