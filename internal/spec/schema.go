package spec

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/gen"
)

// schemaConverter turns kin-openapi schemas into model schemas. Each kin schema is converted
// once (memo), so named component schemas are shared and cycles terminate.
type schemaConverter struct {
	d        *diag.List
	lc       *locator
	memo     map[*openapi3.Schema]*model.Schema
	compName map[*openapi3.Schema]string
	named    []*model.Schema // every named schema converted, in discovery order
	// problems are schema errors (contradictory bounds, a pattern neither regexp engine compiles, a property
	// named ""), reported only for schemas a marked operation reaches: an unmarked operation's
	// schema is never generated, so a vendor spec's quirks there must not fail the run.
	problems map[*model.Schema][]diag.Diagnostic
	// composites are the oneOf/anyOf members of each composite schema, converted on demand
	// (members) for parameters only.
	composites map[*model.Schema]compositeSrc
	// variants are the copies of schemas read beyond themselves (variants.go), and
	// variantOrigin the declared schema each named copy was made from.
	variants      map[variantKey]*model.Schema
	variantOrigin map[*model.Schema]*model.Schema
	variantForm   map[*model.Schema]variant
}

// compositeSrc is where a composite schema's members are: the kin schemas and the oneOf/anyOf
// keyword's place.
type compositeSrc struct {
	members openapi3.SchemaRefs
	at      src
}

func newSchemaConverter(doc *openapi3.T, lc *locator, d *diag.List) *schemaConverter {
	c := &schemaConverter{d: d, lc: lc, memo: map[*openapi3.Schema]*model.Schema{}, compName: map[*openapi3.Schema]string{}, problems: map[*model.Schema][]diag.Diagnostic{}, composites: map[*model.Schema]compositeSrc{},
		variants: map[variantKey]*model.Schema{}, variantOrigin: map[*model.Schema]*model.Schema{},
		variantForm: map[*model.Schema]variant{}}
	if doc.Components != nil {
		// A component that is only a $ref to another is an alias: the schema is named after its
		// definition, and takes an alias's name only when its definition is not a component.
		names := sortedKeys(doc.Components.Schemas)
		for _, aliases := range []bool{false, true} {
			for _, name := range names {
				ref := doc.Components.Schemas[name]
				if ref == nil || ref.Value == nil || (ref.Ref != "") != aliases {
					continue
				}
				if _, ok := c.compName[ref.Value]; !ok {
					c.compName[ref.Value] = name
				}
			}
		}
	}
	return c
}

// refName is the component name a $ref names: its last pointer token.
func refName(ref string) string {
	_, frag, _ := strings.Cut(ref, "#")
	if frag == "" {
		base := ref[strings.LastIndex(ref, "/")+1:]
		return strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(base, ".json"), ".yaml"), ".yml")
	}
	toks, _ := splitPointer(frag)
	if len(toks) == 0 {
		return ""
	}
	return toks[len(toks)-1]
}

// convert returns the model schema of ref (nil for a nil ref); at is where ref is written.
func (c *schemaConverter) convert(ref *openapi3.SchemaRef, at src) *model.Schema {
	if ref == nil || ref.Value == nil {
		return nil
	}
	at = at.follow(ref.Ref)
	s := ref.Value
	// An allOf holding one schema and nothing else is a wrapper (often around a $ref, to attach a
	// description): it is the schema it wraps.
	if len(s.AllOf) == 1 && len(s.Properties) == 0 && s.Type.IsEmpty() && len(s.OneOf) == 0 && len(s.AnyOf) == 0 && s.Items == nil {
		return c.convert(s.AllOf[0], at.at("allOf", "0"))
	}
	if m, ok := c.memo[s]; ok {
		return m
	}
	m := &model.Schema{Loc: at.loc()}
	c.memo[s] = m
	if name, ok := c.compName[s]; ok {
		m.Name = name
	} else if ref.Ref != "" {
		m.Name = refName(ref.Ref)
	}
	if m.Name != "" {
		c.named = append(c.named, m)
	}
	c.fill(m, s, at)
	return m
}

func (c *schemaConverter) fill(m *model.Schema, s *openapi3.Schema, at src) {
	m.Format, m.Description = s.Format, s.Description
	m.Example, m.Default = valueJSON(s.Example), valueJSON(s.Default)
	if m.Example == "" && len(s.Examples) > 0 {
		m.Example = valueJSON(s.Examples[0])
	}
	m.Nullable = s.Nullable || s.Type.IncludesNull()
	m.Ignore = c.ignore(s.Extensions, m.Loc)

	var types []string
	for _, t := range s.Type.Slice() {
		if t != "null" {
			types = append(types, t)
		}
	}
	props, required := objectParts(s, at)
	if member, i, kw, ok := nullUnion(s); ok && member.Ref == "" {
		// OpenAPI 3.1's nullable form, anyOf: [{type: string}, {type: 'null'}]: the one
		// member, nullable. (A member that is a $ref is a named schema shared with other
		// uses; convertOptional takes it as such where a property or parameter holds it.)
		c.fill(m, member.Value, at.at(kw, strconv.Itoa(i)))
		m.Nullable = true
		m.Ignore = m.Ignore || c.ignore(s.Extensions, m.Loc)
		if s.Description != "" {
			m.Description = s.Description
		}
		return
	}
	switch {
	case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
		m.Type, m.Composite = model.TypeAny, true
		members := s.OneOf
		m.CompositeOf = "oneOf"
		if len(members) == 0 {
			members, m.CompositeOf = s.AnyOf, "anyOf"
		}
		var others []int
		for i, r := range members {
			m.Variants = append(m.Variants, variantType(r))
			if !emptySentinel(r) {
				others = append(others, i)
			}
		}
		switch {
		case len(others) == len(members) || len(others) == 0:
		case len(others) == 1:
			m.EmptyOr = c.convert(members[others[0]], at.at(m.CompositeOf, strconv.Itoa(others[0])))
		default:
			rest := &model.Schema{Type: model.TypeAny, Composite: true, CompositeOf: m.CompositeOf, Loc: m.Loc}
			for _, i := range others {
				rest.Variants = append(rest.Variants, m.Variants[i])
			}
			m.EmptyOr = rest
		}
		c.composites[m] = compositeSrc{members, at.at(m.CompositeOf)}
		return
	case len(types) == 1:
		m.Type = model.Type(types[0])
	case len(types) > 1:
		m.Type = model.TypeAny
		for _, t := range types {
			m.Types = append(m.Types, model.Type(t))
		}
		m.EnumJSON = enumJSON(s.Enum)
		return
	case len(props) > 0 || s.AdditionalProperties.Has != nil || s.AdditionalProperties.Schema != nil:
		m.Type = model.TypeObject
	case s.Items != nil:
		m.Type = model.TypeArray
	default:
		m.Type = model.TypeAny
		m.EnumJSON = enumJSON(s.Enum)
		return
	}
	switch m.Type {
	case model.TypeObject:
		c.object(m, s, at, props, required)
	case model.TypeArray:
		m.Items = c.convert(s.Items, at.at("items"))
		if m.Items == nil {
			m.Items = &model.Schema{Type: model.TypeAny, Loc: m.Loc}
		}
		m.MinItems = positive(s.MinItems)
		m.MaxItems = optional(s.MaxItems)
		if s.MaxItems != nil && s.MinItems > *s.MaxItems {
			c.problem(m, at.at("minItems"), "bad-bounds", "minItems %d is greater than maxItems %d: no array is valid", s.MinItems, *s.MaxItems)
		}
	case model.TypeString:
		for _, e := range s.Enum {
			if v, ok := e.(string); ok {
				m.Enum = append(m.Enum, v)
			}
		}
		m.MinLength = positive(s.MinLength)
		m.MaxLength = optional(s.MaxLength)
		if s.MaxLength != nil && s.MinLength > *s.MaxLength {
			c.problem(m, at.at("minLength"), "bad-bounds", "minLength %d is greater than maxLength %d: no string is valid", s.MinLength, *s.MaxLength)
		}
		if s.Pattern != "" {
			if _, err := gen.CheckPattern(s.Pattern); err == nil {
				m.Pattern = s.Pattern
			} else {
				c.problems[m] = append(c.problems[m], diag.Diagnostic{Severity: diag.Error, Code: "bad-pattern", Loc: c.located(m, at.at("pattern")),
					Message: fmt.Sprintf("pattern %q does not compile: %v", s.Pattern, err),
					Hint:    "the generated decoder checks patterns with Go's regexp (RE2) or, for ECMA-262 syntax RE2 lacks (lookaround, backreferences), an ECMAScript engine: fix the pattern or remove it with an overlay, or set fingerprint.body: raw (the body is then not decoded)"})
			}
		}
	case model.TypeBoolean:
		m.EnumJSON = enumJSON(s.Enum)
	case model.TypeInteger, model.TypeNumber:
		m.EnumJSON = enumJSON(s.Enum)
		m.Minimum, m.Maximum = s.Min, s.Max
		if s.ExclusiveMin.Value != nil {
			v := *s.ExclusiveMin.Value
			m.Minimum, m.ExclusiveMin = &v, true
		} else if s.ExclusiveMin.Bool != nil && *s.ExclusiveMin.Bool {
			m.ExclusiveMin = true
		}
		if s.ExclusiveMax.Value != nil {
			v := *s.ExclusiveMax.Value
			m.Maximum, m.ExclusiveMax = &v, true
		} else if s.ExclusiveMax.Bool != nil && *s.ExclusiveMax.Bool {
			m.ExclusiveMax = true
		}
		if lo, hi := m.Minimum, m.Maximum; lo != nil && hi != nil && (*lo > *hi || (*lo == *hi && (m.ExclusiveMin || m.ExclusiveMax))) {
			c.problem(m, at.at("minimum"), "bad-bounds", "minimum %v is above maximum %v (or equal with an exclusive bound): no number is valid", *lo, *hi)
		}
		// JSON Schema Validation 2020-12 section 6.2.1 (and draft 4's, which OpenAPI 3.0 uses):
		// the value of multipleOf MUST be strictly greater than 0.
		if s.MultipleOf != nil && !(*s.MultipleOf > 0) {
			c.problem(m, at.at("multipleOf"), "bad-bounds", "multipleOf %v is not positive: JSON Schema requires a number greater than 0", *s.MultipleOf)
		} else {
			m.MultipleOf = s.MultipleOf
		}
	}
}

// convertOptional converts the schema of a property or a parameter, where null may be one of
// the values: besides what convert reads, a oneOf/anyOf of one $ref and {type: 'null'}, and a
// $ref written with a sibling nullable: true, are the referenced schema (shared, so its Go type
// is one), and nullable says that null is allowed.
func (c *schemaConverter) convertOptional(ref *openapi3.SchemaRef, at src) (m *model.Schema, nullable bool) {
	if ref == nil || ref.Value == nil {
		return nil, false
	}
	if ref.Ref != "" && siblingNullable(at) {
		return c.convert(ref, at), true
	}
	if member, i, kw, ok := nullUnion(ref.Value); ok && member.Ref != "" {
		return c.convert(member, at.follow(ref.Ref).at(kw, strconv.Itoa(i))), true
	}
	m = c.convert(ref, at)
	return m, m != nil && m.Nullable
}

// siblingNullable reports whether the $ref written at at has nullable: true beside it.
func siblingNullable(at src) bool {
	n := at.node
	if n == nil {
		return false
	}
	_, v := at.lc.member(n, "nullable")
	return v != nil && v.Value == "true"
}

// nullUnion recognises a oneOf/anyOf whose members are one schema and {type: 'null'}
// (OpenAPI 3.1's way to write an optional value), and returns that schema, its index and the
// keyword. A union with other keywords beside it (type, properties, allOf) is not one.
func nullUnion(s *openapi3.Schema) (member *openapi3.SchemaRef, index int, keyword string, ok bool) {
	members, kw := s.OneOf, "oneOf"
	if len(members) == 0 {
		members, kw = s.AnyOf, "anyOf"
	} else if len(s.AnyOf) > 0 {
		return nil, 0, "", false
	}
	if len(members) < 2 || len(s.AllOf) > 0 || len(s.Properties) > 0 || s.Items != nil || len(s.Enum) > 0 {
		return nil, 0, "", false
	}
	for _, t := range s.Type.Slice() {
		if t != "null" {
			return nil, 0, "", false
		}
	}
	index = -1
	for i, r := range members {
		if r == nil || r.Value == nil {
			return nil, 0, "", false
		}
		if isNullSchema(r.Value) {
			continue
		}
		if index >= 0 {
			return nil, 0, "", false
		}
		index = i
	}
	if index < 0 {
		return nil, 0, "", false
	}
	return members[index], index, kw, true
}

// isNullSchema reports whether a schema allows only null: {type: 'null'}.
func isNullSchema(s *openapi3.Schema) bool {
	t := s.Type.Slice()
	return len(t) == 1 && t[0] == "null" && len(s.Properties) == 0 && s.Items == nil && len(s.OneOf) == 0 && len(s.AnyOf) == 0 && len(s.AllOf) == 0
}

// members converts the oneOf/anyOf members of m (a parameter's schema) into m.Members, once.
func (c *schemaConverter) members(m *model.Schema) {
	cs, ok := c.composites[m]
	if !ok || m.Members != nil {
		return
	}
	for i, r := range cs.members {
		ms := c.convert(r, cs.at.at(strconv.Itoa(i)))
		if ms == nil {
			ms = &model.Schema{Type: model.TypeAny, Loc: m.Loc}
		}
		m.Members = append(m.Members, ms)
	}
}

// emptySentinel reports whether a oneOf/anyOf member is {type: string, enum: [""]}: the empty
// string, which Stripe's form fields accept to mean "unset".
func emptySentinel(r *openapi3.SchemaRef) bool {
	if r == nil || r.Value == nil {
		return false
	}
	v := r.Value
	return v.Type.Is(openapi3.TypeString) && len(v.Enum) == 1 && v.Enum[0] == ""
}

// variantType is the JSON type a oneOf/anyOf member declares: its single non-null type, object
// or array when it has only properties or items, else TypeAny.
func variantType(r *openapi3.SchemaRef) model.Type {
	if r == nil || r.Value == nil {
		return model.TypeAny
	}
	v := r.Value
	for len(v.AllOf) == 1 && v.Type.IsEmpty() && len(v.Properties) == 0 && v.AllOf[0] != nil && v.AllOf[0].Value != nil {
		v = v.AllOf[0].Value // a wrapper around one schema
	}
	var types []string
	for _, t := range v.Type.Slice() {
		if t != "null" {
			types = append(types, t)
		}
	}
	switch {
	case len(types) == 1:
		return model.Type(types[0])
	case len(types) == 0 && len(v.OneOf) == 0 && len(v.AnyOf) == 0 && (len(v.Properties) > 0 || len(v.AllOf) > 0):
		return model.TypeObject
	case len(types) == 0 && v.Items != nil:
		return model.TypeArray
	}
	return model.TypeAny
}

// enumJSON is the JSON text of each enum value (as kin-openapi decoded it), in spec order.
// valueJSON is a value of the document (example, default) as JSON text, "" for none.
func valueJSON(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// exampleJSON is an example object's value: example, else the first of examples (by name)
// that has an inline value, as JSON text; "" for none.
func exampleJSON(example any, examples openapi3.Examples) string {
	if v := valueJSON(example); v != "" {
		return v
	}
	for _, name := range sortedKeys(examples) {
		if e := examples[name]; e != nil && e.Value != nil {
			if v := valueJSON(e.Value.Value); v != "" {
				return v
			}
		}
	}
	return ""
}

func enumJSON(vs []any) []string {
	var out []string
	for _, v := range vs {
		if b, err := json.Marshal(v); err == nil {
			out = append(out, string(b))
		}
	}
	return out
}

// problem records a schema error at a place in the schema (the bound's own line when the
// document has positions, else the schema's).
func (c *schemaConverter) problem(m *model.Schema, at src, code, format string, args ...any) {
	c.problems[m] = append(c.problems[m], diag.Diagnostic{Severity: diag.Error, Code: code, Loc: c.located(m, at), Message: fmt.Sprintf(format, args...)})
}

// located is at's location, or the schema's when the document has no positions there.
func (c *schemaConverter) located(m *model.Schema, at src) diag.Loc {
	loc := at.loc()
	if loc.Line == 0 {
		loc = m.Loc
	}
	return loc
}

// where names loc for a message about something at from: "line 12" in the same file, else
// "file:line".
func where(loc, from diag.Loc) string {
	if loc.File == from.File && loc.Line > 0 {
		return fmt.Sprintf("line %d", loc.Line)
	}
	return loc.String()
}

// typeList writes a schema's declared types for messages: "string", "integer or null".
func typeList(r *openapi3.SchemaRef) string {
	if r == nil || r.Value == nil {
		return "untyped"
	}
	return "of type " + strings.Join(r.Value.Type.Slice(), " or ")
}

// reportProblems adds the recorded problems of every schema a marked operation reaches (its
// parameters and request bodies, through properties, items and additionalProperties).
//
// A pattern neither engine compiles on the schema of an operation's idempotency key is reported as
// the key's, with key.pattern as the way out, and not at all when key.pattern replaces it.
func (c *schemaConverter) reportProblems(ops []*model.Operation) {
	keys := map[*model.Schema]model.RuleSource{} // key schema -> where its pattern comes from
	for _, o := range ops {
		for _, s := range keySchemas(o) {
			if keys[s] != model.RuleSpec { // a key whose pattern is not replaced wins
				keys[s] = o.Settings.Key.Sources.Pattern
			}
		}
	}
	seen := map[*model.Schema]bool{}
	form := false // walking a form body: the members of an unset sentinel are typed there
	var walk func(s *model.Schema)
	walk = func(s *model.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		for _, d := range c.problems[s] {
			if src, isKey := keys[s]; isKey && d.Code == "bad-pattern" {
				if src == model.RuleSettings {
					continue // key.pattern replaces it
				}
				d.Message = "the idempotency key's declared " + d.Message
				d.Hint = "replace it in key.pattern (x-idempotent, or idemgen.yaml as a default or for this operation)"
			}
			c.d.Add(d)
		}
		for _, p := range s.Properties {
			walk(p.Schema)
		}
		walk(s.AdditionalProperties)
		walk(s.Items)
		if form {
			walk(s.EmptyOr)
		}
	}
	for _, o := range ops {
		for _, p := range o.Params {
			walk(p.Schema)
			for _, m := range p.Schema.Members { // checked by the decoder (gen.Params.AnyOf)
				walk(m)
			}
		}
		if o.Body != nil {
			for _, ct := range o.Body.Contents {
				if ct.Kind != model.ContentRaw { // raw bytes (fingerprint.body: raw) are not decoded
					form = ct.Kind == model.ContentForm
					if form {
						clear(seen) // a schema shared with a JSON body has more to check here
					}
					walk(ct.Schema)
				}
			}
		}
	}
}

// keySchemas are the schemas of an operation's idempotency key: the key header parameter's, or
// the body or form property's in each request schema.
func keySchemas(o *model.Operation) []*model.Schema {
	var out []*model.Schema
	k := o.Settings.Key
	switch k.Carrier {
	case model.CarrierHeader, model.CarrierQuery:
		for _, p := range o.Params {
			if p.IsKey && p.Schema != nil {
				out = append(out, p.Schema)
			}
		}
	case model.CarrierBody, model.CarrierForm:
		toks := k.PointerTokens
		if k.Carrier == model.CarrierForm {
			toks = []string{k.Field}
		}
		if o.Body == nil {
			return nil
		}
		for _, ct := range o.Body.Contents {
			s := ct.Schema
			for _, tok := range toks {
				var next *model.Schema
				if s == nil {
					break
				}
				for _, p := range s.Properties {
					if p.Name == tok {
						next = p.Schema
					}
				}
				if s = next; s == nil {
					break
				}
			}
			if s != nil {
				out = append(out, s)
			}
		}
	}
	return out
}

type kinProp struct {
	name string
	ref  *openapi3.SchemaRef
	at   src
	// conflict is an earlier declaration of the same property (in another allOf member) whose
	// type contradicts this one: no value satisfies both.
	conflict *kinProp
}

// objectParts collects an object's properties and its required names, merging allOf members
// (the common way specs extend a base object). With a locator the properties come in the order
// the spec writes them (kin-openapi keeps them in a map); without one, sorted by name.
func objectParts(s *openapi3.Schema, at src) ([]kinProp, map[string]bool) {
	required := map[string]bool{}
	var props []kinProp
	seen := map[string]int{}
	var add func(s *openapi3.Schema, at src, depth int)
	add = func(s *openapi3.Schema, at src, depth int) {
		if s == nil || depth > 16 {
			return
		}
		for i, r := range s.AllOf {
			if r != nil {
				branch := at
				if at.lc != nil {
					branch = at.at("allOf", strconv.Itoa(i)).follow(r.Ref)
				}
				add(r.Value, branch, depth+1)
			}
		}
		for _, n := range s.Required {
			required[n] = true
		}
		for _, name := range propertyOrder(s.Properties, at) {
			p := kinProp{name: name, ref: s.Properties[name]}
			if at.lc != nil { // positions are only needed when building the model
				p.at = at.at("properties", name)
			}
			if i, ok := seen[name]; ok {
				prev := props[i]
				switch {
				case contradicts(prev.ref, p.ref):
					p.conflict = &prev
				case narrower(prev.ref, p.ref):
					continue // allOf requires both: keep the declaration that says more
				}
				props[i] = p
				continue
			}
			seen[name] = len(props)
			props = append(props, p)
		}
	}
	add(s, at, 0)
	return props, required
}

// jsonTypes is the set of non-null JSON types a schema declares (empty when it declares none).
func jsonTypes(r *openapi3.SchemaRef) map[string]bool {
	out := map[string]bool{}
	if r == nil || r.Value == nil {
		return out
	}
	for _, t := range r.Value.Type.Slice() {
		if t != "null" {
			out[t] = true
		}
	}
	return out
}

// contradicts reports whether two declarations of one property, both required by allOf, declare
// JSON types no value has in common (string in one member, integer in another). An integer is
// also a number.
func contradicts(a, b *openapi3.SchemaRef) bool {
	ta, tb := jsonTypes(a), jsonTypes(b)
	if len(ta) == 0 || len(tb) == 0 {
		return false
	}
	for t := range ta {
		if tb[t] || (t == "integer" && tb["number"]) || (t == "number" && tb["integer"]) {
			return false
		}
	}
	return true
}

// narrower reports whether the earlier declaration a says more than the later b, which then
// adds nothing a generated type could show: b declares no type and no shape (a description),
// or a is an integer where b is a number.
func narrower(a, b *openapi3.SchemaRef) bool {
	if a == nil || a.Value == nil || b == nil || b.Value == nil {
		return false
	}
	ta, tb := jsonTypes(a), jsonTypes(b)
	if len(ta) > 0 && freeForm(b.Value) && len(b.Value.Enum) == 0 && b.Value.Pattern == "" && b.Value.Format == "" {
		return true
	}
	return len(ta) == 1 && ta["integer"] && len(tb) == 1 && tb["number"]
}

// propertyOrder lists the property names in document order, then any the document does not
// show (a converted Swagger 2.0 spec has no positions) by name.
func propertyOrder(ps openapi3.Schemas, at src) []string {
	var out []string
	if len(ps) > 0 && at.lc != nil {
		for _, k := range at.at("properties").keys() {
			if _, ok := ps[k]; ok {
				out = append(out, k)
			}
		}
	}
	if len(out) == len(ps) {
		return out
	}
	listed := map[string]bool{}
	for _, k := range out {
		listed[k] = true
	}
	rest := make([]string, 0, len(ps)-len(out))
	for k := range ps {
		if !listed[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

func (c *schemaConverter) object(m *model.Schema, s *openapi3.Schema, at src, props []kinProp, required map[string]bool) {
	names := newNamer()
	for _, p := range props {
		ms, nullable := c.convertOptional(p.ref, p.at)
		if ms == nil {
			ms = &model.Schema{Type: model.TypeAny, Loc: m.Loc}
		}
		if p.name == "" {
			// encoding/json cannot name a field "" (a tag json:"" falls back to the Go name).
			c.problem(m, p.at, "bad-property-name", "a property named \"\" cannot be expressed in Go's encoding/json; rename it")
		}
		if p.conflict != nil {
			c.problems[m] = append(c.problems[m], diag.Diagnostic{Severity: diag.Error, Code: "allof-conflict", Loc: c.located(m, p.at),
				Message: fmt.Sprintf("property %q is %s here and %s at %s; allOf requires both, so no value of %q is valid",
					p.name, typeList(p.ref), typeList(p.conflict.ref), where(c.located(m, p.conflict.at), c.located(m, p.at)), p.name),
				Hint: "make the allOf members agree on the property's type (with an overlay if the spec is not yours)"})
		}
		prop := &model.Property{Name: p.name, GoName: names.name(p.name), Required: required[p.name], Schema: ms, Nullable: nullable && !ms.Nullable}
		prop.Ignore = ms.Ignore || (p.ref != nil && c.ignore(p.ref.Extensions, ms.Loc))
		m.Properties = append(m.Properties, prop)
	}
	ap := s.AdditionalProperties
	switch {
	case ap.Schema != nil:
		m.AdditionalProperties = c.convert(ap.Schema, at.at("additionalProperties"))
	case ap.Has != nil && *ap.Has:
		m.AdditionalProperties = &model.Schema{Type: model.TypeAny, Loc: m.Loc}
	case ap.Has != nil && !*ap.Has:
		m.ClosedObject = true
	}
}

// ignore reads x-idempotency-ignore, which must be a boolean.
func (c *schemaConverter) ignore(ext map[string]any, loc diag.Loc) bool {
	v, ok := ext["x-idempotency-ignore"]
	if !ok {
		return false
	}
	b, isBool := v.(bool)
	if !isBool {
		l := loc
		l.Pointer = ""
		c.d.Errorf(l, "wrong-type", "x-idempotency-ignore must be true or false, not %v", v)
	}
	return b
}

func positive(v uint64) *int64 {
	if v == 0 {
		return nil
	}
	n := int64(v)
	return &n
}

func optional(v *uint64) *int64 {
	if v == nil {
		return nil
	}
	n := int64(*v)
	return &n
}

// assignTypeNames gives every named schema a unique Go type name, in Name order so a name
// never depends on which operation reaches the schema first. A copy read beyond its schema
// (variants.go) is named after it, after every declared schema ops reach (so that adding a
// merge patch body never renames an existing type), with a suffix only where ops reach the
// schema in more than one form: Open and Patch for what the copy reads differently from the
// others (a schema every body reads with body.unknown: accept has no Open suffix; one read
// as itself and as a merge patch has the plain name and a Patch one).
func (c *schemaConverter) assignTypeNames(ops []*model.Operation) {
	reached := map[*model.Schema]bool{}
	for _, s := range reachableSchemas(ops) {
		reached[s] = true
	}
	// Declared schemas that ops reach first, then the copies, then the declared schemas only a
	// copy was made from (no code is generated for them).
	rank := func(s *model.Schema) int {
		_, copied := c.variantOrigin[s]
		switch {
		case copied:
			return 1
		case reached[s]:
			return 0
		}
		return 2
	}
	named := slices.Clone(c.named)
	slices.SortStableFunc(named, func(a, b *model.Schema) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.Name, b.Name))
	})
	// The forms in which ops reach each declared schema, and which of a form's bits differ
	// between them.
	type forms struct{ all, any variant }
	seen := map[*model.Schema]*forms{}
	note := func(origin *model.Schema, v variant) {
		f := seen[origin]
		if f == nil {
			f = &forms{all: v, any: v}
			seen[origin] = f
		}
		f.all = variant{patch: f.all.patch && v.patch, open: f.all.open && v.open}
		f.any = variant{patch: f.any.patch || v.patch, open: f.any.open || v.open}
	}
	for s := range reached {
		if origin, ok := c.variantOrigin[s]; ok {
			note(origin, c.variantForm[s])
		} else {
			note(s, variant{})
		}
	}
	n := newNamer()
	for _, s := range named {
		name := s.Name
		if origin, ok := c.variantOrigin[s]; ok && seen[origin] != nil {
			f, v := seen[origin], c.variantForm[s]
			if v.open && f.any.open != f.all.open {
				name += "Open"
			}
			if v.patch && f.any.patch != f.all.patch {
				name += "Patch"
			}
		}
		s.GoName = n.name(name)
	}
}
