package spec

import (
	"strings"
	"testing"
)

// TestErrorsInferred: an operation that declares its error answers in a schema of its own, with
// no errors mapping, gets one inferred from the members' names (warning errors-inferred, with
// the lines that pin it); a schema with a required member idemgen cannot fill gets the lines
// to add, with a placeholder for it (errors-not-inferred, which generate refuses); problem
// details and a profile's envelope are left to the runtime.
func TestErrorsInferred(t *testing.T) {
	spec := func(schema string) string {
		return `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /payments:
    post:
      operationId: createPayment
      x-idempotent: true
      responses:
        "201": {description: created}
        "4XX": {description: refused, content: {application/json: {schema: {$ref: '#/components/schemas/Error'}}}}
components:
  schemas:
    Error: ` + schema + "\n"
	}
	for _, c := range []struct {
		name, schema, code, hint string
		mapped                   bool
	}{
		{"plain", `{type: object, required: [message, code], properties: {message: {type: string}, code: {type: string}}}`, "errors-inferred", "body: {code: '{name}', message: '{detail}'}", true},
		{"nested", `{type: object, required: [error], properties: {error: {type: object, required: [message], properties: {message: {type: string}, status: {type: integer}}}}}`, "errors-inferred", "body: {error: {message: '{detail}', status: '{status}'}}", true},
		{"an enum", `{type: object, required: [kind, message], properties: {kind: {type: string, enum: [a, b]}, message: {type: string}}}`, "errors-not-inferred", "body: {kind: '<one of: a, b>', message: '{detail}'}", false},
		{"nothing says what went wrong", `{type: object, properties: {at: {type: string, format: date-time}}}`, "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := load(t, Options{Path: writeFile(t, "api.yaml", spec(c.schema))})
			if errs := errorsOf(res.Diags); len(errs) > 0 {
				t.Fatal(errs)
			}
			op := res.Doc.Operations[0]
			if (op.Settings.Errors != nil) != c.mapped {
				t.Errorf("errors mapping %v, want mapped %v", op.Settings.Errors, c.mapped)
			}
			found := c.code == ""
			for _, d := range res.Diags.Sorted() {
				if c.code != "" && d.Code == c.code {
					found = true
					if !strings.Contains(d.Hint, c.hint) {
						t.Errorf("hint %q does not hold %q", d.Hint, c.hint)
					}
				}
			}
			if !found {
				t.Errorf("no %s: %v", c.code, res.Diags.Sorted())
			}
		})
	}
	// RFC 9457 problem details, as declared, are the runtime's own answers: nothing to infer.
	res := load(t, Options{Path: writeFile(t, "api.yaml", strings.Replace(spec(`{type: object, properties: {type: {type: string}, title: {type: string}}}`), "application/json", "application/problem+json", 1))})
	if res.Doc.Operations[0].Settings.Errors != nil {
		t.Error("a mapping was inferred for problem details")
	}
}
