package spec

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// The `errors` setting maps the runtime's problems onto the error schemas a spec declares for
// its operations' responses (docs/cli.md, "Errors in the API's own schema"):
//
//	errors:
//	  formats:                            # one per error schema; the first one also serves
//	    - schema: '#/components/schemas/HttpErrorOut'   # statuses the operation declares none for
//	      body: {code: '{name}', detail: '{detail}'}
//	    - schema: '#/components/schemas/HTTPValidationError'
//	      body: {detail: [{loc: '{location}', msg: '{detail}', type: '{name}'}]}
//	  problems:                           # what one problem's answer changes
//	    payload-mismatch: {status: 409, body: {code: idempotency_conflict}, headers: {X-Should-Retry: 'false'}}
//	  content-type: application/json      # the default
//
// A format's schema is a $ref into the spec or a schema written in the mapping (for a spec that
// declares no error responses). A problem's answer follows the schema of the response the
// operation declares for its status (the code, else its class 4XX/5XX, else default), written
// with the format that names that schema; without such a response, the first format.

// problemNames are the runtime's problem names, sorted: the problems an errors mapping may
// change. Their statuses are runtime/defaults' table.
func problemNames() []string {
	var names []string
	for _, p := range defaults.Problems() {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// problemFields are the names a template's text can hold in braces.
var problemFields = []string{"name", "title", "detail", "status", "retry_after", "pointer", "param", "location"}

// errorsSetting is a decoded `errors` setting, before it meets an operation.
type errorsSetting struct {
	contentType string
	formats     []*errorFormat
	problems    map[string]*problemOverride
	loc         diag.Loc
	// where locates every node of the bodies (keys and values), so that an error in a body
	// merged from a format's and a problem's names the place it was written.
	where map[*yaml.Node]nodeAt
}

// nodeAt is where a body's node is written: its location, and the problem whose body it is in
// ("" for a format's).
type nodeAt struct {
	loc     diag.Loc
	problem string
}

type errorFormat struct {
	ref       string     // "#/components/schemas/X", or "" for a schema written in the mapping
	inline    *yaml.Node // the schema written in the mapping
	body      *yaml.Node
	loc       diag.Loc // the format's body
	schemaLoc diag.Loc // the format's schema
}

type problemOverride struct {
	status  int
	body    *yaml.Node
	headers []model.ErrorHeader
	loc     diag.Loc
}

// errorsMapping decodes the `errors` setting's own syntax; the templates are checked against the
// schemas per operation (resolveErrors).
func (sd *settingsDecoder) errorsMapping(n *yaml.Node, path string) *errorsSetting {
	if !sd.mapping(n, path) {
		return nil
	}
	es := &errorsSetting{contentType: "application/json", problems: map[string]*problemOverride{}, loc: sd.loc(n, path), where: map[*yaml.Node]nodeAt{}}
	ok := true
	sd.fields(n, path, []string{"formats", "problems", "content-type"}, func(k string, v *yaml.Node, path string) {
		switch k {
		case "content-type":
			if s, good := sd.str(v, path); good {
				es.contentType = s
			}
		case "formats":
			if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
				sd.errf(v, path, "wrong-type", "must be a list of {schema, body}, at least one, not %s", describe(v))
				ok = false
				return
			}
			for i, f := range v.Content {
				fp := path + "/" + strconv.Itoa(i)
				if !sd.mapping(f, fp) {
					ok = false
					continue
				}
				ef := &errorFormat{loc: sd.loc(f, fp)}
				sd.fields(f, fp, []string{"schema", "body"}, func(k string, v *yaml.Node, path string) {
					switch {
					case k == "body":
						ef.body = v
						ef.loc = sd.loc(v, path)
						sd.index(es.where, v, path, "")
					case v.Kind == yaml.ScalarNode:
						ef.ref, _ = sd.str(v, path)
						ef.schemaLoc = sd.loc(v, path)
					case v.Kind == yaml.MappingNode:
						ef.inline = v
						ef.schemaLoc = sd.loc(v, path)
					default:
						sd.errf(v, path, "wrong-type", "must be a $ref (\"#/components/schemas/Error\") or a schema, not %s", describe(v))
					}
				})
				if ef.body == nil || (ef.ref == "" && ef.inline == nil) {
					sd.errf(f, fp, "missing-field", "a format needs a schema and a body")
					ok = false
					continue
				}
				es.formats = append(es.formats, ef)
			}
		case "problems":
			if !sd.mapping(v, path) {
				ok = false
				return
			}
			sd.fields(v, path, problemNames(), func(name string, v *yaml.Node, path string) {
				if !sd.mapping(v, path) {
					return
				}
				po := &problemOverride{loc: sd.loc(v, path)}
				sd.fields(v, path, []string{"status", "body", "headers"}, func(k string, v *yaml.Node, path string) {
					switch k {
					case "status":
						st, err := strconv.Atoi(v.Value)
						if v.Kind != yaml.ScalarNode || err != nil || st < 400 || st > 599 {
							sd.errf(v, path, "bad-value", "must be an error status from 400 to 599, not %s", describe(v))
							return
						}
						po.status = st
					case "body":
						po.body = v
						sd.index(es.where, v, path, name)
					case "headers":
						if !sd.mapping(v, path) {
							return
						}
						for i := 0; i+1 < len(v.Content); i += 2 {
							hk, hv := v.Content[i], v.Content[i+1]
							if !validToken(hk.Value) || hv.Kind != yaml.ScalarNode {
								sd.errf(hk, path+"/"+escapeToken(hk.Value), "bad-value", "a header needs a valid name and a string value")
								continue
							}
							po.headers = append(po.headers, model.ErrorHeader{Name: http.CanonicalHeaderKey(hk.Value), Value: hv.Value})
						}
					}
				})
				es.problems[name] = po
			})
		}
	})
	if len(es.formats) == 0 {
		if ok {
			sd.errf(n, path, "missing-field", "needs formats: the error schemas and the body of each")
		}
		return nil
	}
	return es
}

// index records where every node of a body is written.
func (sd *settingsDecoder) index(where map[*yaml.Node]nodeAt, n *yaml.Node, path, problem string) {
	where[n] = nodeAt{loc: sd.loc(n, path), problem: problem}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := path + "/" + escapeToken(n.Content[i].Value)
			where[n.Content[i]] = nodeAt{loc: sd.loc(n.Content[i], p), problem: problem}
			sd.index(where, n.Content[i+1], p, problem)
		}
	case yaml.SequenceNode:
		for i, it := range n.Content {
			sd.index(where, it, path+"/"+strconv.Itoa(i), problem)
		}
	}
}

// resolveErrors checks the mapping against the operation's declared error responses and builds
// the document of every problem.
func (b *builder) resolveErrors(o *opSource, es *errorsSetting) *model.ErrorFormat {
	if es == nil {
		return nil
	}
	schemas := make([]*openapi3.Schema, len(es.formats))
	for i, f := range es.formats {
		s, err := b.formatSchema(f)
		if err != nil {
			b.d.Errorf(f.schemaLoc, "errors-schema", "errors: %v", err)
			return nil
		}
		schemas[i] = s
	}
	out := &model.ErrorFormat{ContentType: es.contentType, Loc: es.loc}
	for _, name := range problemNames() {
		status := defaults.ProblemStatus(name)
		po := es.problems[name]
		doc := &model.ErrorDoc{Problem: name}
		if po != nil {
			doc.Headers = po.headers
			if po.status != 0 {
				status, doc.Status = po.status, po.status
			}
		}
		fi, declared := b.formatFor(o, es, status)
		if fi < 0 {
			b.d.Errorf(o.at.loc(), "errors-schema", "errors: %s answers %d (%s) with the schema %s, and errors.formats has no body for it: add a format with schema: '%s'",
				o.m.ID, status, name, declared, declared)
			return nil
		}
		f := es.formats[fi]
		doc.Schema, doc.SchemaRef = strings.TrimPrefix(f.ref, "#/components/schemas/"), f.ref
		if f.ref == "" {
			doc.Schema = "Error" // the schema the mapping writes
		}
		doc.GoName = exportedName(doc.Schema)
		tmpl := f.body
		at := nodeAt{loc: f.loc}
		if po != nil && po.body != nil {
			tmpl, at = mergeTemplates(f.body, po.body), nodeAt{loc: po.loc, problem: name}
		}
		c := &templateChecker{b: b, where: es.where, at: at}
		doc.Body = c.value(tmpl, schemas[fi], "")
		if c.failed {
			return nil
		}
		out.Docs = append(out.Docs, doc)
	}
	return out
}

// formatSchema is a format's schema: a component the $ref names, or the schema the mapping
// writes.
func (b *builder) formatSchema(f *errorFormat) (*openapi3.Schema, error) {
	if f.inline != nil {
		var v any
		if err := f.inline.Decode(&v); err != nil {
			return nil, err
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		s := &openapi3.Schema{}
		if err := s.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("the format's schema: %w", err)
		}
		// A written schema is checked as a spec's would be, so that a typo in it (type: objekt)
		// is reported here and not as every body failing to fit it.
		if err := s.Validate(context.Background()); err != nil {
			return nil, fmt.Errorf("the format's schema is not a valid schema: %w", err)
		}
		return s, nil
	}
	name, ok := strings.CutPrefix(f.ref, "#/components/schemas/")
	if !ok || b.doc.Components == nil || b.doc.Components.Schemas[name] == nil || b.doc.Components.Schemas[name].Value == nil {
		return nil, fmt.Errorf("%q names no schema of the spec's components (write '#/components/schemas/Name', or the schema itself)", f.ref)
	}
	return b.doc.Components.Schemas[name].Value, nil
}

// formatFor picks the format of status for the operation: the one whose $ref the declared
// response's JSON schema is, or the first when the operation declares no error response for the
// status. It returns -1 and the schema's $ref when the response's schema has no format.
func (b *builder) formatFor(o *opSource, es *errorsSetting, status int) (int, string) {
	if o.op.Responses == nil {
		return 0, ""
	}
	code := strconv.Itoa(status)
	var resp *openapi3.ResponseRef
	for _, k := range []string{code, code[:1] + "XX", "default"} {
		if r := o.op.Responses.Value(k); r != nil {
			resp = r
			break
		}
	}
	if resp == nil || resp.Value == nil {
		return 0, ""
	}
	var sr *openapi3.SchemaRef
	for _, mt := range slices.Sorted(maps.Keys(resp.Value.Content)) {
		if isJSONType(mt) && resp.Value.Content[mt].Schema != nil {
			sr = resp.Value.Content[mt].Schema
			break
		}
	}
	if sr == nil {
		return 0, ""
	}
	for i, f := range es.formats {
		if f.ref != "" && f.ref == sr.Ref {
			return i, ""
		}
	}
	if sr.Ref == "" {
		return -1, "written inline in the response (name it in components/schemas to map it)"
	}
	return -1, sr.Ref
}

func isJSONType(mt string) bool {
	mt = strings.ToLower(strings.TrimSpace(strings.Split(mt, ";")[0]))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// mergeTemplates lays a problem's body over its format's: objects member by member, anything
// else replaced.
func mergeTemplates(base, over *yaml.Node) *yaml.Node {
	if base == nil || base.Kind != yaml.MappingNode || over.Kind != yaml.MappingNode {
		return over
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: over.Line, Column: over.Column}
	idx := map[string]int{}
	for i := 0; i+1 < len(base.Content); i += 2 {
		idx[base.Content[i].Value] = len(out.Content)
		out.Content = append(out.Content, base.Content[i], base.Content[i+1])
	}
	for i := 0; i+1 < len(over.Content); i += 2 {
		k, v := over.Content[i], over.Content[i+1]
		if j, ok := idx[k.Value]; ok {
			out.Content[j+1] = mergeTemplates(out.Content[j+1], v)
			continue
		}
		out.Content = append(out.Content, k, v)
	}
	return out
}

// templateChecker turns a template into an ErrorValue while checking it against its schema.
type templateChecker struct {
	b      *builder
	where  map[*yaml.Node]nodeAt
	at     nodeAt // the template's own place: a format's body, or the problem's merged over it
	failed bool
}

// errf reports an error at the node n of the template, at the JSON pointer at of the document
// it writes. The error is located where n is written (the format's body, or a problem's); a
// node the merge made is located at the problem's body.
func (c *templateChecker) errf(n *yaml.Node, at, format string, args ...any) {
	w, ok := c.where[n]
	if !ok {
		w = c.at
	}
	if at == "" {
		at = "/"
	}
	doc := "the format's document"
	if w.problem != "" {
		doc = "the " + w.problem + " document"
	}
	c.b.d.Errorf(w.loc, "errors-template", "errors: %s at %s: %s", doc, at, fmt.Sprintf(format, args...))
	c.failed = true
}

// schemaType is the one JSON type a schema declares, "null" aside ("" when it declares none or
// several others): an OpenAPI 3.1 type array with "null" (`type: [array, "null"]`, as Huma
// writes an optional slice) is a value of that type that may also be null, and a template
// writes the value.
func schemaType(s *openapi3.Schema) string {
	if s.Type != nil {
		one, n := "", 0
		for _, t := range *s.Type {
			if t != openapi3.TypeNull {
				one, n = t, n+1
			}
		}
		if n == 1 {
			return one
		}
	}
	if len(s.Properties) > 0 {
		return "object"
	}
	return ""
}

// nonNull returns the one member of a 3.1 nullable union (`anyOf: [X, {type: "null"}]`, or
// oneOf) that is not null, or nil when s is not such a union.
func nonNull(s *openapi3.Schema) *openapi3.Schema {
	for _, members := range []openapi3.SchemaRefs{s.AnyOf, s.OneOf} {
		var other *openapi3.Schema
		nulls := 0
		for _, m := range members {
			if m.Value == nil {
				return nil
			}
			if m.Value.Type != nil && len(*m.Value.Type) == 1 && (*m.Value.Type)[0] == openapi3.TypeNull {
				nulls++
			} else {
				other = m.Value
			}
		}
		if len(members) == 2 && nulls == 1 {
			return other
		}
	}
	return nil
}

func (c *templateChecker) value(n *yaml.Node, s *openapi3.Schema, at string) *model.ErrorValue {
	if len(s.AllOf) == 1 && s.AllOf[0].Value != nil && schemaType(s) == "" {
		s = s.AllOf[0].Value
	}
	if m := nonNull(s); m != nil && schemaType(s) == "" {
		s = m
	}
	typ := schemaType(s)
	switch n.Kind {
	case yaml.MappingNode:
		if typ != "object" {
			c.errf(n, at, "an object where the schema wants %s", describeType(typ))
			return nil
		}
		v := &model.ErrorValue{Kind: model.ErrorObject}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, mv := n.Content[i], n.Content[i+1]
			path := at + "/" + escapeToken(k.Value)
			ps := s.Properties[k.Value]
			if ps == nil || ps.Value == nil {
				names := slices.Sorted(maps.Keys(s.Properties))
				hint := ""
				if near := closest(k.Value, names); near != "" {
					hint = fmt.Sprintf("; did you mean %q?", near)
				}
				c.errf(k, path, "the schema has no member %q (it has %s)%s", k.Value, strings.Join(names, ", "), hint)
				continue
			}
			seen[k.Value] = true
			if ev := c.value(mv, ps.Value, path); ev != nil {
				v.Members = append(v.Members, &model.ErrorMember{Name: k.Value, GoName: exportedName(k.Value), Value: ev, Required: slices.Contains(s.Required, k.Value)})
			}
		}
		for _, r := range s.Required {
			if !seen[r] {
				c.errf(n, at, "the schema requires %q, which the body does not write", r)
			}
		}
		slices.SortFunc(v.Members, func(a, b *model.ErrorMember) int { return strings.Compare(a.Name, b.Name) })
		return v
	case yaml.SequenceNode:
		if typ != "array" || s.Items == nil || s.Items.Value == nil {
			c.errf(n, at, "a list where the schema wants %s", describeType(typ))
			return nil
		}
		v := &model.ErrorValue{Kind: model.ErrorArray}
		for i, it := range n.Content {
			if ev := c.value(it, s.Items.Value, at+"/"+strconv.Itoa(i)); ev != nil {
				v.Items = append(v.Items, ev)
			}
		}
		return v
	case yaml.ScalarNode:
		return c.scalar(n, s, typ, at)
	}
	c.errf(n, at, "%s is not a template value", describe(n))
	return nil
}

func describeType(typ string) string {
	if typ == "" {
		return "no single type"
	}
	return "a value of type " + typ
}

func (c *templateChecker) scalar(n *yaml.Node, s *openapi3.Schema, typ, at string) *model.ErrorValue {
	parts, err := templateParts(n.Value)
	if n.ShortTag() == "!!str" && err != nil {
		c.errf(n, at, "%v", err)
		return nil
	}
	whole := ""
	if n.ShortTag() == "!!str" && len(parts) == 1 && parts[0].Field != "" {
		whole = parts[0].Field
	}
	switch typ {
	case "string":
		if n.ShortTag() != "!!str" {
			c.errf(n, at, "%s where the schema wants a string", describe(n))
			return nil
		}
		if whole == "location" {
			c.errf(n, at, "{location} is a list of names, and the schema wants a string here")
			return nil
		}
		if len(s.Enum) > 0 {
			if whole != "" || len(parts) > 1 {
				c.errf(n, at, "the schema allows only %s here: write one of them, not a problem field", enumList(s.Enum))
				return nil
			}
			if !slices.ContainsFunc(s.Enum, func(e any) bool { return e == n.Value }) {
				c.errf(n, at, "%q is not one the schema allows (%s)", n.Value, enumList(s.Enum))
				return nil
			}
		}
		return &model.ErrorValue{Kind: model.ErrorString, Parts: parts}
	case "integer", "number":
		kind := model.ErrorInteger
		if typ == "number" {
			kind = model.ErrorNumber
		}
		switch {
		case whole == "status" || whole == "retry_after":
			return &model.ErrorValue{Kind: kind, Field: whole}
		case n.ShortTag() == "!!int" || (typ == "number" && n.ShortTag() == "!!float"):
			if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return fmt.Sprint(e) == n.Value }) {
				c.errf(n, at, "%s is not one the schema allows (%s)", n.Value, enumList(s.Enum))
				return nil
			}
			return &model.ErrorValue{Kind: kind, Literal: n.Value}
		}
		c.errf(n, at, "%s where the schema wants %s: write a number, {status} or {retry_after}", describe(n), describeType(typ))
	case "boolean":
		if n.ShortTag() != "!!bool" {
			c.errf(n, at, "%s where the schema wants true or false", describe(n))
			return nil
		}
		return &model.ErrorValue{Kind: model.ErrorBool, Literal: n.Value}
	case "array":
		if whole == "location" && s.Items != nil && s.Items.Value != nil && schemaType(s.Items.Value) == "string" {
			return &model.ErrorValue{Kind: model.ErrorArray, Field: "location"}
		}
		c.errf(n, at, "%s where the schema wants a list (only {location} is a list of strings)", describe(n))
	default:
		c.errf(n, at, "the schema here has %s; a template writes strings, numbers, booleans, objects and lists", describeType(typ))
	}
	return nil
}

func enumList(vals []any) string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = fmt.Sprint(v)
	}
	return strings.Join(out, ", ")
}

// templateParts splits text into literal pieces and {field}s; "{{" and "}}" are literal braces.
func templateParts(s string) ([]model.ErrorPart, error) {
	var parts []model.ErrorPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, model.ErrorPart{Text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "{{"), strings.HasPrefix(s[i:], "}}"):
			lit.WriteByte(s[i])
			i++
		case s[i] == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%q has a { without its }", s)
			}
			f := s[i+1 : i+end]
			if !slices.Contains(problemFields, f) {
				hint := ""
				if near := closest(f, problemFields); near != "" {
					hint = fmt.Sprintf("; did you mean {%s}?", near)
				}
				return nil, fmt.Errorf("{%s} is not a problem field (%s)%s", f, strings.Join(problemFields, ", "), hint)
			}
			flush()
			parts = append(parts, model.ErrorPart{Field: f})
			i += end
		default:
			lit.WriteByte(s[i])
		}
	}
	flush()
	return parts, nil
}
