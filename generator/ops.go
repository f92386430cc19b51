package generator

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
	runtimegen "github.com/idemgen/idemgen/runtime/gen"
)

// opPlan is everything decided about one operation before emission.
type opPlan struct {
	op *model.Operation
	// errors is the writer of the operation's errors mapping (errors.go); nil without one.
	errors *errorWriter
	// Exported names. body is the body type: an inline struct's own name, or an alias
	// (bodyAlias) of a named schema's type, a non-struct type or []byte.
	name, params, body, fn string
	bodyAlias              bool
	// request is the decoded request type ({Params, Body}), handler the exported constructor of
	// the operation's http.Handler.
	request, handler string
	// Unexported names: the decode function and the function returning the runtime.Operation.
	decode, operation string
	// bodyT is the typed request body; nil when the operation has no body or every media type
	// is raw (the handler then gets []byte).
	bodyT   *tinfo
	rawBody bool // the handler's body is the exact bytes
	// mixed: the body has typed media types (JSON, form, multipart) and raw ones beside them (a
	// signed or encrypted form such as application/jose+jwe or application/jwt): the body type
	// is a struct of its own with the media type that arrived, the typed value in the field
	// typedField (a pointer when typedPtr) and the exact bytes of a raw one (emitMixedBody).
	mixed      bool
	typedField string
	typedPtr   bool
	// tree: the body is a form with bracketed fields (gen.FormTree), framed as the canonical
	// JSON of its decoded value; a flat form (gen.Form) is framed as its sorted fields.
	tree     bool
	contents []*contentPlan
	// failed: planning the body found an error, so nothing more is planned for it.
	failed bool
	// bodyCanon is the canonical form of a JSON or multipart body under the operation's
	// exclusions; formExcl are the fields a flat form body's fingerprint leaves out and
	// treeExcl the bracketed paths a bracketed one's does (planCanon).
	bodyCanon *canonVal
	formExcl  []string
	treeExcl  []string
	// keyPath are the struct fields from the body root down to a body-carried key (a JSON
	// member or a form field); empty for header keys.
	keyPath []*field
	// keyRaw are the pointer tokens of a body-carried key inside a body kept as canonical
	// JSON (a oneOf/anyOf body), read from it by gen.Input.SetBodyKeyAt.
	keyRaw []string
	// pparams are the non-key parameters, in model order.
	pparams []*paramPlan
	pattern string      // ServeMux pattern, "POST /v1/payments/{payment_id}"
	parts   []routePart // the pattern's path segments
	segs    []*segPlan  // path segments that mix literal text and parameters
}

// contentPlan is one request media type.
type contentPlan struct {
	c *model.Content
}

// paramPlan is one field of the params struct.
type paramPlan struct {
	p    *model.Param
	t    *tinfo
	ptr  bool   // optional scalar
	wild string // path: the ServeMux wildcard it comes from (when the segment is the param alone)
	// deep: a deepObject query parameter (filter[status]=x), decoded into t (a struct or a
	// map) and fingerprinted by its canonical value.
	deep bool
	// union are the members of a oneOf/anyOf of scalars: the value is a string, exactly as
	// sent, checked against them (gen.Params.AnyOf).
	union []*model.Schema
	// canon is the canonical form of a deepObject parameter's value, framed after the body.
	canon *canonVal
}

// segPlan is a path segment that mixes literal text and parameters ("{Sid}.json"): ServeMux
// patterns cannot express it, so the whole segment is one wildcard and the wrapper matches the
// literal parts (404 when they differ).
type segPlan struct {
	wild   string
	lits   []string // len(params)+1 literal pieces around the parameters
	params []string // parameter names in the segment, in order
}

// findKeyProps marks the properties that carry a body key, so their fields are pointers (a
// missing key must be told apart from an empty one) and are not required-checked.
func (g *planner) findKeyProps() {
	for _, op := range g.doc.Operations {
		toks := keyTokens(op)
		if toks == nil || op.Body == nil {
			continue
		}
		for _, c := range op.Body.Contents {
			if c.Kind == model.ContentRaw || c.Schema == nil {
				continue
			}
			s := c.Schema
			for i, tok := range toks {
				p := propertyNamed(s, tok)
				if p == nil {
					break
				}
				if i == len(toks)-1 {
					g.keyProps[p] = true
				}
				s = p.Schema
			}
		}
	}
}

// keyTokens is the member path of a body-carried key (JSON pointer tokens, or the one form
// field), nil for a header key.
func keyTokens(op *model.Operation) []string {
	switch op.Settings.Key.Carrier {
	case model.CarrierBody:
		return op.Settings.Key.PointerTokens
	case model.CarrierForm:
		return []string{op.Settings.Key.Field}
	}
	return nil
}

func propertyNamed(s *model.Schema, name string) *model.Property {
	for _, p := range s.Properties {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// planOperation names the operation's types and functions and plans its body, parameters and
// route.
func (g *planner) planOperation(op *model.Operation) (plan *opPlan) {
	defer func() {
		// Last resort: a bug met while planning one operation is reported at that operation,
		// and the other operations are still planned (so their errors show in the same run).
		if r := recover(); r != nil {
			g.diags.Errorf(op.Loc, "internal-error", "operation %s (%s %s): idemgen failed while planning it (%v); please report it with the spec",
				op.ID, op.Method, op.Path, r)
			plan = &opPlan{op: op} // Generate stops after planning: nothing emits this plan
		}
	}()
	name := g.names.take(op.GoName)
	o := &opPlan{
		op:        op,
		name:      name,
		params:    g.names.take(name + "Params"),
		fn:        g.names.take(name + "Func"),
		request:   g.names.take(name + "Request"),
		handler:   g.names.take(name + "Handler"),
		decode:    g.names.take("decode" + name),
		operation: g.names.take("operation" + name),
	}
	if op.Body != nil {
		g.planBody(o)
	}
	g.planParams(o)
	g.planRoute(o)
	return o
}

// frameRaw reports whether the body is fingerprinted as its exact bytes: fingerprint.body raw,
// or a body whose every media type is raw.
func (o *opPlan) frameRaw() bool {
	return o.rawBody || o.op.Settings.Fingerprint.Body == model.BodyRaw
}

// planBody plans the request body in three steps: which schema the handler's typed body has
// (bodySchema), its Go type and name (typeBody), what each media type requires of that type
// (checkContents), then the path to a body-carried key (planKeyPath). A step that reports an
// error marks the body failed and ends its planning.
func (g *planner) planBody(o *opPlan) {
	typed, ok := g.bodySchema(o)
	if ok {
		g.typeBody(o, typed)
		ok = g.checkContents(o, typed)
	}
	if ok && o.bodyT != nil {
		ok = g.planKeyPath(o)
	}
	o.failed = !ok
}

// contentSchema is the schema of one media type of a body: nil for a raw media type (neither
// JSON nor form), and a schema of any value for a JSON media type that declares none (still
// decoded strictly and fingerprinted in canonical form).
func (g *planner) contentSchema(c *model.Content) *model.Schema {
	switch {
	case c.Kind == model.ContentRaw:
		return nil
	case c.Schema == nil && c.Kind == model.ContentJSON:
		if g.anySchema == nil {
			g.anySchema = &model.Schema{Type: model.TypeAny}
		}
		return g.anySchema
	}
	return c.Schema
}

// bodySchema validates the body's media types and returns the schema of its typed body: the one
// schema of its JSON, form and multipart media types (they must agree, the handler gets one
// typed body), or nil when every media type is raw. Raw media types beside typed ones make the
// body mixed; such a body cannot carry the key, since a raw body has no member to read it from.
// A null body cannot be a value the handler gets.
func (g *planner) bodySchema(o *opPlan) (typed *model.Schema, ok bool) {
	var typedMT string
	var raws []*model.Content
	for _, c := range o.op.Body.Contents {
		s := g.contentSchema(c)
		if s == nil {
			raws = append(raws, c)
			continue
		}
		if typed != nil && s != typed {
			g.diags.Add(diag.Diagnostic{Severity: diag.Error, Code: "unsupported-schema", Loc: c.Loc,
				Message: fmt.Sprintf("operation %s: media types %s and %s have different schemas; idemgen generates one typed body per operation",
					o.op.ID, typedMT, c.MediaType),
				Hint: "remove one media type with an overlay, or set fingerprint.body: raw (the handler then gets the exact bytes of every media type)"})
			return nil, false
		}
		typed, typedMT = s, c.MediaType
	}
	if typed != nil && len(raws) > 0 {
		if k := o.op.Settings.Key; k.Carrier == model.CarrierBody || k.Carrier == model.CarrierForm {
			where := "the body member " + k.Pointer
			if k.Carrier == model.CarrierForm {
				where = "the form field " + k.Field
			}
			c := raws[0]
			g.diags.Add(diag.Diagnostic{Severity: diag.Error, Code: "unsupported-schema", Loc: c.Loc,
				Message: fmt.Sprintf("operation %s: the idempotency key is %s, which a %s body cannot carry: idemgen takes that media type as raw bytes, with no member to read the key from",
					o.op.ID, where, c.MediaType),
				Hint: "carry the key in a header (key.header), or remove the media type with an overlay"})
			return nil, false
		}
		o.mixed = true
	}
	if typed != nil && typed.Nullable && typed.Type != model.TypeAny {
		// The handler receives the body as a value, so a null body has no Go form; refusing
		// it with 400 while the schema allows it would be a silent mismatch.
		for _, c := range o.op.Body.Contents {
			if c.Kind == model.ContentJSON {
				g.diags.Add(diag.Diagnostic{Severity: diag.Error, Code: "unsupported-schema", Loc: typed.Loc,
					Message: fmt.Sprintf("operation %s: the %s request body schema allows null (nullable or type [..., \"null\"]); idemgen passes the body to the handler as a value and cannot express a null body",
						o.op.ID, c.MediaType),
					Hint: "drop null from the body schema (with an overlay if the spec is not yours), or set fingerprint.body: raw (the handler then gets the exact bytes)"})
				return nil, false
			}
		}
	}
	return typed, true
}

// typeBody decides the Go type and name of the body: []byte when it has no typed schema; the
// struct of a multipart-only body with file parts; types of its own for a form with bracketed
// fields; else the JSON type of the schema. An inline struct is declared under the operation's
// body name itself; anything else gets an alias of that name. A mixed body's type is a struct
// of its own under that name (emitMixedBody), and its typed value's inline struct is named after
// the field that holds it (CreateConsentJSONBody).
func (g *planner) typeBody(o *opPlan, typed *model.Schema) {
	want := o.name + "Body"
	if typed == nil {
		o.body = g.names.take(want)
		o.bodyAlias = true
		o.rawBody = true
		return
	}
	formOnly, multipartOnly := true, true
	for _, c := range o.op.Body.Contents {
		switch c.Kind {
		case model.ContentJSON:
			formOnly, multipartOnly = false, false
		case model.ContentForm:
			multipartOnly = false
		}
	}
	if o.mixed {
		o.body = g.names.take(want)
		o.typedField = typedFieldName(o.op.Body.Contents)
		want = o.name + o.typedField + "Body"
	}
	_, planned := g.types[typed]
	switch {
	case multipartOnly:
		_, mplanned := g.multipartTypes[typed]
		planned = planned || mplanned
		o.bodyT = g.multipartTypeOf(typed, want)
	case formOnly && bracketed(typed):
		// A form with nested members: decoded from its bracketed fields (gen.FormTree) into
		// types of its own, fingerprinted as the canonical JSON of the decoded value.
		_, fplanned := g.formTypes[typed]
		planned = fplanned || typed.Name != ""
		o.tree = true
		o.bodyT = g.formType(typed, want)
	default:
		o.bodyT = g.typeOf(typed, want)
	}
	switch {
	case o.mixed:
		o.typedPtr = o.bodyT.pointerable()
	case !planned && o.bodyT.kind == kStruct:
		o.body = o.bodyT.name
	default:
		o.body = g.names.take(want)
		o.bodyAlias = true
	}
}

// typedFieldName names the field of a mixed body that holds the typed value, after the kind of
// its typed media types: JSON, Form or Multipart, or Value when they are of several kinds.
func typedFieldName(contents []*model.Content) string {
	var kind model.ContentKind
	for _, c := range contents {
		switch {
		case c.Kind == model.ContentRaw:
		case kind == "":
			kind = c.Kind
		case kind != c.Kind:
			return "Value"
		}
	}
	switch kind {
	case model.ContentForm:
		return "Form"
	case model.ContentMultipart:
		return "Multipart"
	}
	return "JSON"
}

// checkContents plans each media type of the body and checks that the body type suits it: a
// form body is an object (a flat one when the schema is also the JSON body's, excluded by field
// names), a bracketed form's fields are encoded as bracketed fields, a multipart body is an
// object that is not also a bracketed form.
func (g *planner) checkContents(o *opPlan, typed *model.Schema) bool {
	formOnly := true // no JSON media type
	for _, c := range o.op.Body.Contents {
		formOnly = formOnly && c.Kind != model.ContentJSON
	}
	for _, c := range o.op.Body.Contents {
		if o.rawBody {
			o.contents = append(o.contents, &contentPlan{c: c})
			continue
		}
		switch c.Kind {
		case model.ContentForm:
			if o.bodyT.kind != kStruct {
				g.diags.Add(diag.Diagnostic{Severity: diag.Error, Code: "unsupported-schema", Loc: c.Loc,
					Message: fmt.Sprintf("operation %s: the %s body schema is %s, not an object: a form body is a set of named fields", o.op.ID, c.MediaType, describeSchema(typed)),
					Hint:    "give the form body an object schema with an overlay, or set fingerprint.body: raw (the handler then gets the exact bytes)"})
				return false
			}
			if o.tree {
				g.checkFormEncoding(o, c)
				break
			}
			if formOnly {
				for _, p := range o.op.Settings.Fingerprint.Exclude {
					if len(p.Tokens) > 1 {
						g.unsupportedExclusion(o, "a member below a field of a flat form body, whose fields are excluded by their names")
					}
				}
			}
			for _, f := range o.bodyT.fields {
				if !flatField(f.p.Schema) {
					g.diags.Add(diag.Diagnostic{Severity: diag.Error, Code: "unsupported-schema", Loc: f.p.Schema.Loc,
						Message: fmt.Sprintf("operation %s: form field %q is %s, and the schema is also the operation's JSON body; idemgen decodes one typed body per operation, so such a form must be flat",
							o.op.ID, f.p.Name, describeSchema(f.p.Schema)),
						Hint: "remove the JSON or the form media type with an overlay, or set fingerprint.body: raw (the handler then gets the exact bytes)"})
					return false
				}
			}
		case model.ContentMultipart:
			if o.bodyT.kind != kStruct || o.bodyT.form {
				what := "is " + describeSchema(typed) + ", not an object: a multipart body is a set of named parts"
				if o.bodyT.form {
					what = "is also the operation's form body, which has nested members (decoded as bracketed fields); idemgen decodes one typed body per operation"
				}
				g.diags.Add(diag.Diagnostic{Severity: diag.Error, Code: "unsupported-schema", Loc: c.Loc,
					Message: fmt.Sprintf("operation %s: the %s body schema %s", o.op.ID, c.MediaType, what),
					Hint:    "remove one media type with an overlay, or set fingerprint.body: raw (the handler then gets the exact bytes)"})
				return false
			}
		}
		o.contents = append(o.contents, &contentPlan{c: c})
	}
	return true
}

// planKeyPath finds the struct fields from the body root down to a body-carried key, which must
// be a string member.
func (g *planner) planKeyPath(o *opPlan) bool {
	toks := keyTokens(o.op)
	if toks == nil {
		return true
	}
	k := o.op.Settings.Key
	t := o.bodyT
	if t != nil && t.kind == kRaw && t.s != nil && t.s.Composite {
		// A oneOf/anyOf body is kept as canonical JSON; the loader checked that its
		// members declare the key member, which is read from the decoded value.
		o.keyRaw = toks
		return true
	}
	for _, tok := range toks {
		var hit *field
		if t != nil && t.kind == kStruct {
			for _, f := range t.fields {
				if f.p.Name == tok {
					hit = f
				}
			}
		}
		if hit == nil {
			g.diags.Errorf(o.op.Settings.Loc, "key-body-not-string",
				"operation %s: key.body %s does not name a string member of the body schema", o.op.ID, k.Pointer)
			return false
		}
		o.keyPath = append(o.keyPath, hit)
		t = hit.t
	}
	if t.kind != kString {
		g.diags.Errorf(o.op.Settings.Loc, "key-body-not-string",
			"operation %s: key.body %s must be a string member", o.op.ID, k.Pointer)
		return false
	}
	return true
}

func formScalar(t *tinfo) bool {
	switch t.kind {
	case kString, kEnum, kInt32, kInt64, kFloat, kBool:
		return true
	}
	return false
}

// planParams plans the params struct: every parameter except the key header.
func (g *planner) planParams(o *opPlan) {
	for _, p := range o.op.Params {
		if p.IsKey {
			continue
		}
		pp := &paramPlan{p: p}
		if scalarUnion(p.Schema) && (p.Style == "simple" || p.Style == "form") {
			pp.t, pp.union = &tinfo{kind: kString, s: p.Schema}, p.Schema.Members
			pp.ptr = !p.Required && p.In != model.InPath
			o.pparams = append(o.pparams, pp)
			continue
		}
		if p.Schema == nil {
			pp.t = &tinfo{kind: kString}
		} else {
			pp.t = g.typeOf(p.Schema, o.params+p.GoName)
		}
		ok := formScalar(pp.t) || (pp.t.kind == kSlice && formScalar(pp.t.elem) && p.In != model.InPath)
		switch {
		case p.Style == "deepObject" && p.In != model.InQuery:
			g.unsupportedParam(o, p, "has style deepObject", "OpenAPI defines deepObject for query parameters only", paramHint)
			continue
		case p.Style == "deepObject" && !p.Explode:
			g.unsupportedParam(o, p, "has style deepObject with explode: false", "OpenAPI defines deepObject with explode: true only", paramHint)
			continue
		case p.Style == "deepObject":
			if why := deepShape(pp.t, p.Name, 0); why != "" {
				g.unsupportedParam(o, p, fmt.Sprintf("uses style deepObject (%s[key]=value) with %s", p.Name, why),
					"idemgen decodes deepObject parameters whose members are scalars, arrays of scalars, maps of scalars and objects of those", paramHint)
				continue
			}
			pp.deep = true
			pp.ptr = pp.t.kind == kStruct && !p.Required
			o.pparams = append(o.pparams, pp)
			continue
		case !ok:
			g.unsupportedParam(o, p, "is "+paramShape(p), paramKinds, paramHint)
			continue
		}
		switch p.Style {
		case "", "simple", "form":
		case "pipeDelimited", "spaceDelimited":
			if pp.t.kind != kSlice || p.In != model.InQuery {
				g.diags.Errorf(p.Loc, "unsupported-schema", "operation %s: parameter %q: style %s applies to query arrays only", o.op.ID, p.Name, p.Style)
				continue
			}
		default:
			g.unsupportedParam(o, p, "has style "+p.Style, "idemgen decodes the simple, form, pipeDelimited and spaceDelimited styles",
				"give the parameter one of them with an overlay, or leave the operation unmarked (x-idempotent: false)")
			continue
		}
		pp.ptr = pp.t.pointerable() && !p.Required && p.In != model.InPath
		o.pparams = append(o.pparams, pp)
	}
}

// scalarUnion reports whether s is a oneOf/anyOf whose members are all scalars (string,
// integer, number, boolean): a parameter of that schema is decoded as its text, checked against
// the members.
func scalarUnion(s *model.Schema) bool {
	if s == nil || !s.Composite || len(s.Members) == 0 {
		return false
	}
	for _, m := range s.Members {
		switch {
		case m.Composite:
			return false
		case m.Type == model.TypeString, m.Type == model.TypeInteger, m.Type == model.TypeNumber, m.Type == model.TypeBoolean:
		default:
			return false
		}
	}
	return true
}

// paramKinds says what idemgen decodes in parameters.
const paramKinds = "idemgen decodes scalars, oneOf/anyOf of scalars, arrays of scalars in query and header parameters, and deepObject query parameters"

// deepShape is "" when a deepObject parameter of type t (at the key name, depth levels deep)
// can be decoded: an object or a map at the top, whose members are scalars, schema-less values
// (kept as JSON strings), arrays of scalars, maps of scalars and objects of those; else what is
// not.
func deepShape(t *tinfo, name string, depth int) string {
	switch {
	case depth > 8:
		return "members nested more than 8 objects deep (a recursive schema?) at " + name
	case t.kind == kMap:
		if !formScalar(t.elem) && t.elem.kind != kRaw {
			return "a map of " + describeSchema(t.elem.s) + " values at " + name
		}
		return ""
	case t.kind != kStruct:
		if depth == 0 {
			return "a schema that is " + describeSchema(t.s) + ", not an object"
		}
		return ""
	}
	if t.addl != nil && !formScalar(t.addl) {
		return "additionalProperties of " + describeSchema(t.addl.s) + " values at " + name
	}
	for _, f := range t.fields {
		key := name + "[" + f.p.Name + "]"
		switch {
		case formScalar(f.t), f.t.kind == kRaw:
		case f.t.kind == kSlice:
			if !formScalar(f.t.elem) {
				return "an array of " + describeSchema(f.t.elem.s) + " values at " + key
			}
		case f.t.kind == kStruct, f.t.kind == kMap:
			if why := deepShape(f.t, key, depth+1); why != "" {
				return why
			}
		default:
			return describeSchema(f.p.Schema) + " at " + key
		}
	}
	return ""
}

// paramHint is the way out of a parameter schema idemgen cannot decode.
const paramHint = "to generate this operation, give the parameter a plain schema with an overlay (for example {type: string}: the handler then gets the value as sent, and the fingerprint covers it exactly), or leave the operation unmarked (x-idempotent: false, or false in idemgen.yaml)"

// unsupportedParam reports a parameter idemgen cannot decode: what it is, what idemgen decodes,
// and the way out.
func (g *planner) unsupportedParam(o *opPlan, p *model.Param, what, why, hint string) {
	g.diags.Add(diag.Diagnostic{Severity: diag.Error, Code: "unsupported-schema", Loc: p.Loc,
		Message: fmt.Sprintf("operation %s: %s parameter %q %s; %s", o.op.ID, p.In, p.Name, what, why),
		Hint:    hint})
}

// paramShape names the construct of a parameter schema that is not a scalar or an array of
// scalars: "a oneOf of two string schemas", "an array in a path parameter", "an object".
func paramShape(p *model.Param) string {
	s := p.Schema
	switch {
	case s == nil:
		return "without a schema"
	case s.Composite:
		return compositeShape(s)
	case s.Type == model.TypeAny && len(s.Types) > 0:
		var names []string
		for _, t := range s.Types {
			names = append(names, string(t))
		}
		return "a value of several types (type: [" + strings.Join(names, ", ") + "])"
	case s.Type == model.TypeAny:
		return "a value of any type (its schema declares no type)"
	case s.Type == model.TypeObject && len(s.Properties) == 0 && s.AdditionalProperties != nil:
		return "a map (an object with additionalProperties)"
	case s.Type == model.TypeObject:
		return "an object"
	case s.Type == model.TypeArray && p.In == model.InPath:
		return "an array"
	case s.Type == model.TypeArray && s.Items != nil && s.Items.Composite:
		return "an array of " + compositeShape(s.Items)
	case s.Type == model.TypeArray && s.Items != nil:
		return "an array of " + string(s.Items.Type) + " values"
	}
	return "a " + string(s.Type)
}

// describeSchema names a schema's construct for messages: "an object", "a oneOf of [string,
// integer]", "an array".
func describeSchema(s *model.Schema) string {
	switch {
	case s == nil:
		return "absent"
	case s.Composite:
		return compositeShape(s)
	case s.Type == model.TypeObject && len(s.Properties) == 0 && s.AdditionalProperties != nil:
		return "a map (an object with additionalProperties)"
	case s.Type == model.TypeAny:
		return "a value of any type"
	case s.Type == model.TypeObject || s.Type == model.TypeArray || s.Type == model.TypeInteger:
		return "an " + string(s.Type)
	}
	return "a " + string(s.Type)
}

// compositeShape describes a oneOf/anyOf by its members' types: "a oneOf of two string
// schemas", "an anyOf of [string, integer]".
func compositeShape(s *model.Schema) string {
	kind := s.CompositeOf
	if kind == "" {
		kind = "oneOf"
	}
	article := "a "
	if kind == "anyOf" {
		article = "an "
	}
	same := len(s.Variants) > 0
	for _, v := range s.Variants {
		same = same && v == s.Variants[0]
	}
	if same {
		n := strconv.Itoa(len(s.Variants))
		if len(s.Variants) == 2 {
			n = "two"
		}
		return fmt.Sprintf("%s%s of %s %s schemas", article, kind, n, s.Variants[0])
	}
	var names []string
	for _, v := range s.Variants {
		names = append(names, string(v))
	}
	return fmt.Sprintf("%s%s of [%s]", article, kind, strings.Join(names, ", "))
}

// planRoute turns the OpenAPI path template into a Go 1.22 ServeMux pattern. Segments that are
// one parameter become wildcards (renamed when the parameter name is not a Go identifier);
// segments mixing literal text and parameters become a whole-segment wildcard checked in the
// wrapper.
func (g *planner) planRoute(o *opPlan) {
	path := o.op.Path
	// A path ending in "/" names exactly that path in OpenAPI ("/payments/" is not
	// "/payments/x"), while a ServeMux pattern ending in "/" matches the whole subtree; the
	// pattern gets {$} instead, and the empty last segment is not a segment of the route.
	trail := strings.HasSuffix(path, "/")
	segs := strings.Split(strings.TrimSuffix(strings.TrimPrefix(path, "/"), "/"), "/")
	if segs[0] == "" && len(segs) == 1 {
		segs = nil // the root path "/"
	}
	wilds := newNamer()
	var out []string
	byName := map[string]*paramPlan{}
	for _, pp := range o.pparams {
		if pp.p.In == model.InPath {
			byName[pp.p.Name] = pp
		}
	}
	for i, seg := range segs {
		lits, params, ok := splitSegment(seg)
		if !ok {
			g.diags.Errorf(o.op.Loc, "bad-path", "operation %s: path %q has unbalanced braces in segment %q", o.op.ID, path, seg)
			return
		}
		switch {
		case len(params) == 0:
			o.parts = append(o.parts, routePart{lit: seg})
			out = append(out, seg)
		case len(params) == 1 && lits[0] == "" && lits[1] == "":
			w := params[0]
			if !isIdent(w) {
				w = "p" + strconv.Itoa(i)
			}
			w = wilds.take(w)
			if pp := byName[params[0]]; pp != nil {
				pp.wild = w
			}
			o.parts = append(o.parts, routePart{wild: w})
			out = append(out, "{"+w+"}")
		default:
			w := wilds.take("seg" + strconv.Itoa(i))
			o.segs = append(o.segs, &segPlan{wild: w, lits: lits, params: params})
			o.parts = append(o.parts, routePart{wild: w, lits: lits})
			out = append(out, "{"+w+"}")
		}
		for _, name := range params {
			if !declaredPath(o.op, name) {
				g.diags.Errorf(o.op.Loc, "bad-path", "operation %s: path parameter {%s} is not declared", o.op.ID, name)
			}
		}
	}
	pattern := "/" + strings.Join(out, "/")
	if trail {
		if len(out) > 0 {
			pattern += "/"
		}
		pattern += "{$}"
	}
	o.pattern = o.op.Method + " " + pattern
}

// splitSegment splits "{a}.{b}.json" into literals ["", ".", ".json"] and params [a b], with
// the runtime's template parser (runtime/gen), so that generated code and the runtime read a
// path alike.
func splitSegment(seg string) (lits, params []string, ok bool) {
	s, ok := runtimegen.ParseSegment(seg)
	if !ok {
		return nil, nil, false
	}
	return s.Pieces, s.Params, true
}

// binary reports whether s is a file in a multipart body: a string of format binary (OpenAPI
// 3.0), or with a contentMediaType that is not text (3.1 is read as 3.0 here: format binary).
func binary(s *model.Schema) bool {
	return s != nil && s.Type == model.TypeString && s.Format == "binary"
}

// multipartTypeOf plans the body struct of a multipart-only body. Without file properties it is
// the JSON struct (text parts and JSON parts fill it); with them (string, format binary, or an
// array of those, or an object or array of objects that has one) it is a struct of its own,
// whose files are gen.File values (repeated parts for an array; nested parts for a file inside
// an object member, documents[0][file]) and whose other members are typed as in JSON.
func (g *planner) multipartTypeOf(s *model.Schema, hint string) *tinfo {
	if t, ok := g.multipartTypes[s]; ok {
		return t
	}
	files := false
	for _, p := range s.Properties {
		files = files || binary(p.Schema) || (p.Schema.Type == model.TypeArray && binary(p.Schema.Items)) || nestedFiles(p.Schema)
	}
	if s.Type != model.TypeObject || !files {
		return g.typeOf(s, hint)
	}
	if s.Name != "" && s.GoName != "" {
		hint = s.GoName + "Multipart"
	}
	t := &tinfo{kind: kStruct, s: s, name: g.names.take(hint), multipart: true}
	g.multipartTypes[s] = t
	g.named = append(g.named, t)
	fnames := newNamer()
	for _, p := range s.Properties {
		fnames.take(p.GoName)
	}
	for _, p := range s.Properties {
		f := &field{p: p, name: p.GoName, bodyKey: g.keyProps[p]}
		switch {
		case binary(p.Schema):
			f.t = &tinfo{kind: kFile, s: p.Schema}
		case p.Schema.Type == model.TypeArray && binary(p.Schema.Items):
			f.t = &tinfo{kind: kSlice, s: p.Schema, elem: &tinfo{kind: kFile, s: p.Schema.Items}}
		case nestedFiles(p.Schema):
			f.t = g.nestedFileTypeOf(p.Schema, t.name+p.GoName)
		default:
			f.t = g.typeOf(p.Schema, t.name+p.GoName)
		}
		f.ptr = f.t.pointerable() && (!p.Required || p.Schema.Nullable || p.Nullable || f.bodyKey ||
			(f.t.kind == kStruct && g.cyclic[p.Schema]))
		t.fields = append(t.fields, f)
	}
	if !s.ClosedObject {
		t.extra = fnames.take("Extra") // undeclared parts, fingerprinted (gen.Multipart.Unknown)
	}
	return t
}

// nestedFiles reports whether s is an object, or an array of objects, with a file property
// (string, format binary, or an array of those): a multipart member whose files arrive as
// nested parts (documents[0][file], documents[][file]).
func nestedFiles(s *model.Schema) bool {
	if s == nil {
		return false
	}
	if s.Type == model.TypeArray {
		s = s.Items
	}
	if s == nil || s.Type != model.TypeObject {
		return false
	}
	for _, p := range s.Properties {
		if binary(p.Schema) || (p.Schema.Type == model.TypeArray && binary(p.Schema.Items)) {
			return true
		}
	}
	return false
}

// nestedFileTypeOf types a multipart member that nestedFiles accepts: the object (or each
// element) is a struct of its own whose file properties are gen.File values, read from the
// member's assembled value (gen.FileValue) and fingerprinted by content hash; its other
// properties are typed as in JSON. It is decoded by the JSON decoders, like any nested member.
func (g *planner) nestedFileTypeOf(s *model.Schema, hint string) *tinfo {
	if s.Type == model.TypeArray {
		if t, ok := g.nestedFileTypes[s]; ok {
			return t
		}
		t := &tinfo{kind: kSlice, s: s}
		g.nestedFileTypes[s] = t
		t.elem = g.nestedFileTypeOf(s.Items, hint+"Item")
		return t
	}
	if t, ok := g.nestedFileTypes[s]; ok {
		return t
	}
	if s.Name != "" && s.GoName != "" {
		hint = s.GoName + "Multipart"
	}
	t := &tinfo{kind: kStruct, s: s, name: g.names.take(hint)}
	g.nestedFileTypes[s] = t
	g.named = append(g.named, t)
	fnames := newNamer()
	for _, p := range s.Properties {
		fnames.take(p.GoName)
	}
	for _, p := range s.Properties {
		f := &field{p: p, name: p.GoName}
		switch {
		case binary(p.Schema):
			f.t = &tinfo{kind: kFile, s: p.Schema}
		case p.Schema.Type == model.TypeArray && binary(p.Schema.Items):
			f.t = &tinfo{kind: kSlice, s: p.Schema, elem: &tinfo{kind: kFile, s: p.Schema.Items}}
		default:
			f.t = g.typeOf(p.Schema, t.name+p.GoName)
			f.three = threeStates(p, f.t, false) // as in JSON (planStruct)
		}
		f.ptr = !f.three && f.t.pointerable() && (!p.Required || p.Schema.Nullable || p.Nullable)
		t.fields = append(t.fields, f)
	}
	if !s.ClosedObject {
		if ap := s.AdditionalProperties; ap != nil && ap.Type != model.TypeAny {
			t.extra = fnames.take("AdditionalProperties")
			t.addl = g.elemOf(ap, t.name+"Value", s.MergePatch)
		} else {
			t.extra = fnames.take("Extra")
		}
	}
	t.decodeFn = g.names.take("decode" + t.name)
	return t
}

// declaredPath reports whether op declares the path parameter name.
func declaredPath(op *model.Operation, name string) bool {
	for _, p := range op.Params {
		if p.In == model.InPath && p.Name == name {
			return true
		}
	}
	return false
}
