// Package templates holds idemgen's non-Go artefacts as embedded text/templates: the Markdown
// contract for an API's clients (contract.md.tmpl) and the SQL schema file (schema.sql.tmpl).
// The generator fills them from the model; this package only parses them, so it imports
// nothing of idemgen.
package templates

import (
	"embed"
	"fmt"
	"text/template"
)

//go:embed *.tmpl
var files embed.FS

// Names of the templates.
const (
	Contract = "contract.md.tmpl"
	Schema   = "schema.sql.tmpl"
)

// Parse returns the named template, parsed with funcs (the data-shaping helpers the generator
// provides: the contract's status, the status runtime/defaults answers a problem with, as in
// {{status "in-flight"}}). It fails only if an embedded template is broken, which a test rules
// out.
func Parse(name string, funcs template.FuncMap) (*template.Template, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	t, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return t, nil
}
