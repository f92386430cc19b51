package spec

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// An API whose spec declares the schema of its error answers answers in it by default: its
// clients (SDKs generated from the spec, or written against its docs) read errors in that
// schema, and an RFC 9457 problem document they do not expect reads as a success with no
// object (stripe-node on a problem: no `error` member, so no error). Where an operation has
// no errors mapping and no profile with an envelope of its own, and the error responses it
// declares for the statuses the runtime answers (their codes, 4XX, default) have a JSON
// schema other than problem details, the mapping is inferred from the schema's members by
// their names (message and detail carry the problem's detail, code and type its name, status
// its status, ...). When a required member cannot be inferred, the loader says so with the
// exact lines to add, and `idemgen generate` refuses to write code that would answer in a
// schema the spec does not declare (docs/cli.md, "Errors in the API's own schema").

// inferErrors infers op's errors mapping from its declared error responses, or nil when it
// declares none to infer (or none the runtime's default already fits). It reports the
// inference as a warning naming what it wrote, or, when a schema cannot be filled, a warning
// with the lines to add (code errors-not-inferred, which generate treats as an error).
func (b *builder) inferErrors(o *opSource, s *model.Settings) *errorsSetting {
	if s.Errors != nil || o.op.Responses == nil {
		return nil
	}
	row, _ := defaults.ProfileNamed(string(s.Profile))
	if s.Profile != "" && row.Envelope.Writer != "problem+json" {
		return nil // the profile's envelope is the contract its spec names
	}
	type declared struct {
		ref, mediaType string
		schema         *openapi3.Schema
		inline         bool
	}
	var found []declared
	for _, p := range defaults.Problems() {
		code := strconv.Itoa(p.Status)
		var resp *openapi3.ResponseRef
		for _, k := range []string{code, code[:1] + "XX", "default"} {
			if r := o.op.Responses.Value(k); r != nil {
				resp = r
				break
			}
		}
		if resp == nil || resp.Value == nil {
			continue
		}
		for _, mt := range slices.Sorted(maps.Keys(resp.Value.Content)) {
			c := resp.Value.Content[mt]
			lmt := strings.ToLower(strings.TrimSpace(strings.Split(mt, ";")[0]))
			if !isJSONType(lmt) || lmt == "application/problem+json" || c == nil || c.Schema == nil || c.Schema.Value == nil {
				continue
			}
			d := declared{ref: c.Schema.Ref, mediaType: lmt, schema: c.Schema.Value, inline: c.Schema.Ref == ""}
			if !slices.ContainsFunc(found, func(f declared) bool { return f.ref == d.ref && f.schema == d.schema }) {
				found = append(found, d)
			}
			break
		}
	}
	if len(found) == 0 {
		return nil
	}
	es := &errorsSetting{contentType: found[0].mediaType, problems: map[string]*problemOverride{}, loc: o.at.loc(), where: map[*yaml.Node]nodeAt{}}
	var lines []string
	for _, d := range found {
		body, missing := inferTemplate(d.schema, 0)
		if d.inline {
			// A mapping names its schema by $ref, so it cannot be given here: the user is told,
			// and generation goes on with problem details (no refusal without a way out).
			b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "errors-schema-inline", Loc: o.at.loc(),
				Message: fmt.Sprintf("%s %s declares its error answers in a schema written inline in the response, which an errors mapping cannot name: its problems are answered as RFC 9457 problem details, which its clients may not read", o.m.Method, o.m.Path),
				Hint:    "move the schema to components/schemas, refer to it from the response, and add an errors mapping for it (docs/cli.md, Errors in the API's own schema)"})
			return nil
		}
		switch {
		case body == nil && missing == "":
			missing = "no member of the schema says what went wrong (message, detail, code, type, ...)"
		}
		if missing != "" {
			b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "errors-not-inferred", Loc: o.at.loc(),
				Message: fmt.Sprintf("%s %s declares its error answers in %s, and idemgen cannot infer how to write its problems in it: %s; without an errors mapping they would be RFC 9457 problem documents its clients do not expect, so idemgen generate refuses it",
					o.m.Method, o.m.Path, schemaName(d.ref), missing),
				Hint: "add an errors mapping to x-idempotency (or the config's defaults), filling every required member, e.g.:\n" + mappingLines(d.ref, body)})
			return nil
		}
		es.formats = append(es.formats, &errorFormat{ref: d.ref, body: body, loc: o.at.loc(), schemaLoc: o.at.loc()})
		lines = append(lines, formatLines(d.ref, body))
	}
	b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "errors-inferred", Loc: o.at.loc(),
		Message: fmt.Sprintf("%s %s declares its error answers in %s: the runtime's problems are written in it, as the errors mapping the hint shows (inferred from the schema's member names)",
			o.m.Method, o.m.Path, strings.Join(mapNames(found, func(d declared) string { return schemaName(d.ref) }), " and ")),
		Hint: "to keep it as it is, or change it, write it in x-idempotency (or the config's defaults):\n" + mappingHead + strings.Join(lines, "\n")})
	return es
}

func mapNames[T any](xs []T, f func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func schemaName(ref string) string {
	if ref == "" {
		return "a schema written inline"
	}
	return strings.TrimPrefix(ref, "#/components/schemas/")
}

// mappingHead starts the errors mapping's lines; formatLines writes one format of it.
const mappingHead = "  errors:\n    formats:\n"

// mappingLines writes the errors mapping of one format as the lines to add.
func mappingLines(ref string, body *yaml.Node) string { return mappingHead + formatLines(ref, body) }

// formatLines writes one format of an errors mapping.
func formatLines(ref string, body *yaml.Node) string {
	b := "      - schema: '" + ref + "'\n        body: "
	if body == nil {
		return b + "{...}   # every required member of the schema: '{detail}', '{name}', '{status}', ..."
	}
	out, _ := yaml.Marshal(flowStyle(body))
	return b + strings.TrimSpace(string(out))
}

// flowStyle returns n written in YAML's flow style ({a: b}), as one line.
func flowStyle(n *yaml.Node) *yaml.Node {
	c := *n
	if c.Kind == yaml.MappingNode || c.Kind == yaml.SequenceNode {
		c.Style = yaml.FlowStyle
		c.Content = nil
		for _, k := range n.Content {
			c.Content = append(c.Content, flowStyle(k))
		}
	}
	return &c
}

// inferTemplate is the body template of an error schema, member by member from their names;
// missing names the first required member it cannot fill ("" when it fills them all), and body
// then holds a placeholder for it (`<one of: a, b>`), so that the lines a user adds are the
// template to finish. A nil body with no missing member means nothing in the schema says what
// went wrong.
func inferTemplate(s *openapi3.Schema, depth int) (body *yaml.Node, missing string) {
	if depth > 4 || s == nil {
		return nil, ""
	}
	if len(s.AllOf) == 1 && s.AllOf[0].Value != nil && schemaType(s) == "" {
		s = s.AllOf[0].Value
	}
	if schemaType(s) != "object" {
		return nil, ""
	}
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	says := false
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		p := s.Properties[name]
		if p == nil || p.Value == nil {
			continue
		}
		required := slices.Contains(s.Required, name)
		v, field, inner := inferMember(name, p.Value, depth)
		if v == nil || inner != "" {
			if !required {
				continue
			}
			if missing == "" {
				missing = inner
				if missing == "" {
					missing = fmt.Sprintf("the required member %q (%s) names nothing idemgen knows how to fill", name, describeType(schemaType(p.Value)))
				}
			}
			if v == nil {
				v = placeholder(p.Value)
			}
		}
		says = says || field
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name}, v)
	}
	if !says && missing == "" {
		return nil, ""
	}
	return m, missing
}

// placeholder stands for a member the user must fill: its allowed values, or its type.
func placeholder(s *openapi3.Schema) *yaml.Node {
	text := "<fill in: " + describeType(schemaType(s)) + ">"
	if len(s.Enum) > 0 {
		text = "<one of: " + enumList(s.Enum) + ">"
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: text}
}

// inferMember is the template of one member, whether it says what went wrong (the problem's
// detail, name or status, or an object that does), and, for an object with a required member
// it cannot fill, which (its body then has a placeholder for it).
func inferMember(name string, s *openapi3.Schema, depth int) (*yaml.Node, bool, string) {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(name))
	str := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }
	switch schemaType(s) {
	case "string":
		if len(s.Enum) > 0 {
			return nil, false, "" // which value means what is the API's to say
		}
		switch n {
		case "message", "detail", "details", "description", "msg", "errordescription", "errormessage", "reason":
			return str("{detail}"), true, ""
		case "code", "errorcode", "type", "error", "kind", "name":
			return str("{name}"), true, ""
		case "title", "summary":
			return str("{title}"), true, ""
		case "param", "parameter", "field":
			return str("{param}"), false, ""
		case "pointer", "path", "location", "loc":
			return str("{pointer}"), false, ""
		case "status", "statuscode":
			return str("{status}"), true, ""
		}
	case "integer", "number":
		switch n {
		case "status", "statuscode", "httpstatus", "code", "errorcode":
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "{status}"}, true, ""
		case "retryafter":
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "{retry_after}"}, false, ""
		}
	case "array":
		if s.Items == nil || s.Items.Value == nil {
			break
		}
		if (n == "loc" || n == "location") && schemaType(s.Items.Value) == "string" {
			return str("{location}"), false, ""
		}
		// A list of error objects (FastAPI's and pydantic's {detail: [{loc, msg, type}]}):
		// one element, the problem.
		if body, missing := inferTemplate(s.Items.Value, depth+1); body != nil {
			return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{body}}, true, missing
		}
	case "object":
		if body, missing := inferTemplate(s, depth+1); body != nil {
			return body, true, missing
		}
	}
	return nil, false, ""
}
