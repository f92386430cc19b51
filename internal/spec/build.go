package spec

import (
	"cmp"
	"fmt"
	"math"
	"mime"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// builder turns a resolved kin-openapi document into the model.
type builder struct {
	l      *loaded
	doc    *openapi3.T
	cfg    *config
	opts   Options
	d      *diag.List
	sc     *schemaConverter
	docLay *layer // document-level x-idempotency
	// fernReported: a malformed x-fern-idempotency-headers was reported (once per run).
	fernReported bool
	// shapes are the error responses' schema shapes, one per schema (errorResponses).
	shapes map[*openapi3.Schema]*model.Shape
}

// opSource is one operation while it is being built, with the kin-openapi pieces the settings
// checks need.
type opSource struct {
	m        *model.Operation
	op       *openapi3.Operation
	at       src // where the operation object is written
	kinParam map[*model.Param]kinSchema
	kinBody  map[*model.Content]kinSchema
	// paramDoc is each parameter's description, which the key detectors read.
	paramDoc map[*model.Param]string
}

// kinSchema is a kin-openapi schema with the place it is written.
type kinSchema struct {
	ref *openapi3.SchemaRef
	at  src
}

func build(l *loaded, cfg *config, opts Options, d *diag.List) *model.Document {
	b := &builder{l: l, doc: l.doc, cfg: cfg, opts: opts, d: d, sc: newSchemaConverter(l.doc, l.lc, d), shapes: map[*openapi3.Schema]*model.Shape{}}
	out := &model.Document{Source: opts.Path, OpenAPI: l.doc.OpenAPI}
	if cfg != nil {
		out.DB, out.DBLoc = cfg.db, cfg.dbLoc
	}
	if l.doc.Info != nil {
		out.Title, out.Version = l.doc.Info.Title, l.doc.Info.Version
	}
	b.misspelt(l.doc.Extensions, l.lc.rootOf(l.root), "x-idempotency")
	if v, ok := l.doc.Extensions["x-idempotency"]; ok {
		n, base := b.extension(v, l.lc.rootOf(l.root).at("x-idempotency"))
		b.docLay = decodeDefaults(n, base, d)
	}
	ops := b.operations()
	entries := b.matchConfig(ops)
	for _, o := range ops {
		if !b.guard(o.m, func() { b.mark(o, entries[o]) }) {
			o.m.Mark = model.MarkNone
			continue
		}
		if o.m.Mark != model.MarkNone {
			out.Operations = append(out.Operations, o.m)
		} else {
			out.Unmarked = append(out.Unmarked, o.m)
		}
	}
	b.duplicateIDs(ops)
	b.sc.applyBodyVariants(out.Operations)
	b.sc.assignTypeNames(out.Operations)
	b.sc.reportProblems(out.Operations)
	out.Schemas = reachableSchemas(out.Operations)
	return out
}

// guard runs one step of building an operation. A panic there (a bug in idemgen, or a document
// shape nobody foresaw) becomes an internal-error at the operation, which is then left out, and
// the other operations are still built: safeBuild's recovery is the last resort.
func (b *builder) guard(op *model.Operation, step func()) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			b.d.Errorf(op.Loc, "internal-error", "%s %s: idemgen failed while reading this operation (%v); please report it with the spec", op.Method, op.Path, r)
			ok = false
		}
	}()
	step()
	return true
}

// duplicateIDs reports operationIds written more than once (OpenAPI 3.x, Operation Object:
// "The id MUST be unique among all operations"). When either operation is marked it is an
// error: both would share one row of the operation table, so cross-operation key reuse and
// metrics would treat them as one. Between unmarked operations it is a warning, since vendor
// specs do this and nothing is generated for them.
func (b *builder) duplicateIDs(ops []*opSource) {
	first := map[string]*opSource{}
	for _, o := range ops {
		if o.m.IDDerived {
			continue
		}
		f, dup := first[o.m.ID]
		if !dup {
			first[o.m.ID] = o
			continue
		}
		sev := diag.Warning
		if o.m.Mark != model.MarkNone || f.m.Mark != model.MarkNone {
			sev = diag.Error
		}
		b.d.Add(diag.Diagnostic{Severity: sev, Code: "duplicate-operation-id", Loc: o.at.at("operationId").loc(),
			Message: fmt.Sprintf("%s %s: operationId %q is already used by %s %s at %s; operationIds must be unique",
				o.m.Method, o.m.Path, o.m.ID, f.m.Method, f.m.Path, f.at.at("operationId").loc()),
			Hint: renameOverlay(o.m)})
	}
}

// renameOverlay is the OpenAPI Overlay 1.0 document that gives an operation another
// operationId, shown as the way out of a duplicate in a spec the user does not own.
func renameOverlay(op *model.Operation) string {
	name := derivedOperationID(op.Method, op.Path)
	if name == op.ID {
		name += "2"
	}
	return fmt.Sprintf("rename one of them; for a spec you do not own, save this overlay and pass it with --overlay FILE:\n"+
		"  overlay: 1.0.0\n  info: {title: rename a duplicate operationId, version: 1.0.0}\n  actions:\n"+
		"    - target: $.paths['%s'].%s\n      update: {operationId: %s}", strings.ReplaceAll(op.Path, "'", "\\'"), strings.ToLower(op.Method), name)
}

// extension returns the YAML node of an extension value written at at, with its location: from
// the locator's tree (for a Swagger 2.0 document, the 2.0 file's), so every nested setting has
// its own line, or, when the document has no positions (read through kin-openapi's own path),
// rebuilt from the value kin-openapi decoded.
func (b *builder) extension(v any, at src) (*yaml.Node, diag.Loc) {
	if at.node != nil {
		return toYAML3(at.node), at.loc()
	}
	if loc := at.loc(); at.lc != nil && at.lc.swagger2 {
		// The converter copies extensions as written: the 2.0 file's node is the value.
		if _, n := at.lc.lookup(loc.File, loc.Pointer); n != nil {
			return toYAML3(n), loc
		}
	}
	return toNode(v), at.loc()
}

// operations lists every operation sorted by path then method, with names, parameters, body
// and responses.
func (b *builder) operations() []*opSource {
	var out []*opSource
	paths := b.doc.Paths.Map()
	keys := make([]string, 0, len(paths))
	for p := range paths {
		keys = append(keys, p)
	}
	slices.Sort(keys)
	ids := newNamer()
	pathsAt := b.l.lc.rootOf(b.l.root).at("paths")
	for _, path := range keys {
		pi := paths[path]
		if pi == nil {
			continue
		}
		piAt := pathsAt.at(path).follow(pi.Ref)
		ops := pi.Operations()
		methods := make([]string, 0, len(ops))
		for m := range ops {
			methods = append(methods, m)
		}
		slices.Sort(methods)
		for _, method := range methods {
			op := ops[method]
			if op == nil {
				continue
			}
			at := piAt.at(strings.ToLower(method))
			m := &model.Operation{
				ID: op.OperationID, Method: strings.ToUpper(method), Path: path,
				Summary: op.Summary, Description: op.Description, Loc: at.loc(),
			}
			if m.ID == "" {
				m.ID, m.IDDerived = derivedOperationID(method, path), true
			}
			m.GoName = ids.name(m.ID)
			o := &opSource{m: m, op: op, at: at, kinParam: map[*model.Param]kinSchema{}, kinBody: map[*model.Content]kinSchema{},
				paramDoc: map[*model.Param]string{}}
			if !b.guard(m, func() { b.params(o, pi, piAt); b.body(o) }) {
				continue
			}
			if op.Responses != nil {
				for code, r := range op.Responses.Map() {
					m.Responses = append(m.Responses, code)
					if r != nil && r.Value != nil {
						for name := range r.Value.Headers {
							m.ResponseHeaders = append(m.ResponseHeaders, textproto.CanonicalMIMEHeaderKey(name))
						}
					}
				}
				slices.Sort(m.Responses)
				m.ErrorResponses = errorResponses(op, b.shapes)
				slices.Sort(m.ResponseHeaders)
				m.ResponseHeaders = slices.Compact(m.ResponseHeaders)
			}
			out = append(out, o)
		}
	}
	return out
}

func (b *builder) params(o *opSource, pi *openapi3.PathItem, piAt src) {
	type entry struct {
		p  *openapi3.Parameter
		at src // where the parameter (or the $ref to it) is written
		to src // where the parameter object itself is
	}
	merged := map[string]entry{}
	var order []string
	add := func(ps openapi3.Parameters, base src) {
		for i, r := range ps {
			if r == nil || r.Value == nil || r.Value.In == openapi3.ParameterInCookie {
				continue
			}
			p := r.Value
			if p.In == openapi3.ParameterInHeader && ignoredHeader(p.Name) {
				continue
			}
			k := p.In + "\x00" + p.Name
			if p.In == openapi3.ParameterInHeader {
				k = p.In + "\x00" + strings.ToLower(p.Name)
			}
			if _, ok := merged[k]; !ok {
				order = append(order, k)
			}
			at := base.at("parameters", strconv.Itoa(i))
			merged[k] = entry{p, at, at.follow(r.Ref)}
		}
	}
	add(pi.Parameters, piAt)
	add(o.op.Parameters, o.at)

	rank := map[model.ParamIn]int{model.InPath: 0, model.InQuery: 1, model.InHeader: 2}
	var ps []*model.Param
	for _, k := range order {
		e := merged[k]
		p := e.p
		mp := &model.Param{Name: p.Name, In: model.ParamIn(p.In), Required: p.Required || p.In == openapi3.ParameterInPath,
			Style: p.Style, Loc: e.at.loc()}
		if mp.Style == "" {
			mp.Style = "simple"
			if p.In == openapi3.ParameterInQuery {
				mp.Style = "form"
			}
		}
		mp.Explode = mp.Style == "form"
		if p.Explode != nil {
			mp.Explode = *p.Explode
		}
		ks := kinSchema{p.Schema, e.to.at("schema")}
		if ks.ref == nil && len(p.Content) > 0 {
			for _, mt := range sortedKeys(p.Content) {
				if c := p.Content[mt]; c != nil && c.Schema != nil {
					ks = kinSchema{c.Schema, e.to.at("content", mt, "schema")}
					break
				}
			}
		}
		// A parameter's text is never null, so a nullable union is its one member's type.
		mp.Schema, _ = b.sc.convertOptional(ks.ref, ks.at)
		mp.Example = exampleJSON(p.Example, p.Examples)
		if mp.Schema == nil {
			mp.Schema = &model.Schema{Type: model.TypeString, Loc: mp.Loc}
		}
		b.sc.members(mp.Schema)
		o.kinParam[mp] = ks
		o.paramDoc[mp] = p.Description
		ps = append(ps, mp)
	}
	pathPos := func(name string) int {
		if i := strings.Index(o.m.Path, "{"+name+"}"); i >= 0 {
			return i
		}
		return len(o.m.Path)
	}
	slices.SortStableFunc(ps, func(a, c *model.Param) int {
		if r := cmp.Compare(rank[a.In], rank[c.In]); r != 0 {
			return r
		}
		if a.In == model.InPath {
			return cmp.Compare(pathPos(a.Name), pathPos(c.Name))
		}
		return cmp.Compare(a.Name, c.Name)
	})
	names := newNamer()
	for _, p := range ps {
		p.GoName = names.name(p.Name)
	}
	o.m.Params = ps
}

// ignoredHeader reports whether a header parameter is one OpenAPI says to ignore: "If in is
// "header" and the name field is "Accept", "Content-Type" or "Authorization", the parameter
// definition SHALL be ignored" (OpenAPI 3.0.3 and 3.1.0, Parameter Object). The request body's
// media types and the security schemes say what those headers carry; enforcing a declared
// Content-Type's allowed values would refuse every multipart request, whose Content-Type
// carries a boundary.
func ignoredHeader(name string) bool {
	switch strings.ToLower(name) {
	case "accept", "content-type", "authorization":
		return true
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// contentKind classifies a request media type (docs/design.md section 4): JSON and +json are decoded
// strictly and canonicalized, form bodies are sorted fields, anything else is raw bytes.
func contentKind(mt string) model.ContentKind {
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return model.ContentJSON
	case mt == "application/x-www-form-urlencoded":
		return model.ContentForm
	case mt == "multipart/form-data":
		return model.ContentMultipart
	}
	return model.ContentRaw
}

func normalizeMediaType(mt string) string {
	if parsed, _, err := mime.ParseMediaType(mt); err == nil {
		return parsed
	}
	base, _, _ := strings.Cut(mt, ";")
	return strings.ToLower(strings.TrimSpace(base))
}

func (b *builder) body(o *opSource) {
	rb := o.op.RequestBody
	if rb == nil || rb.Value == nil {
		return
	}
	body := &model.RequestBody{Required: rb.Value.Required}
	rbAt := o.at.at("requestBody").follow(rb.Ref)
	seen := map[string]bool{}
	for _, raw := range sortedKeys(rb.Value.Content) {
		media := rb.Value.Content[raw]
		mt := normalizeMediaType(raw)
		if seen[mt] || media == nil {
			continue
		}
		seen[mt] = true
		at := rbAt.at("content", raw)
		c := &model.Content{MediaType: mt, Kind: contentKind(mt), Loc: at.loc()}
		ks := kinSchema{media.Schema, at.at("schema")}
		c.Schema = b.sc.convert(ks.ref, ks.at)
		c.Example = exampleJSON(media.Example, media.Examples)
		if c.Kind == model.ContentMultipart && c.Schema == nil {
			// Parts are decoded by the properties of the schema; without one the body is raw
			// bytes (and check warns, raw-fingerprint). A schema that is not an object is the
			// generator's error.
			c.Kind = model.ContentRaw
		}
		if c.Kind == model.ContentForm {
			for _, name := range sortedKeys(media.Encoding) {
				e := media.Encoding[name]
				if e == nil {
					continue
				}
				enc := model.Encoding{Style: e.Style, Explode: e.Explode == nil || *e.Explode, ContentType: e.ContentType, Loc: at.at("encoding", name).loc()}
				if e.Explode == nil && e.Style != "" && e.Style != "form" {
					enc.Explode = false // explode defaults to true for style form only
				}
				if c.Encoding == nil {
					c.Encoding = map[string]model.Encoding{}
				}
				c.Encoding[name] = enc
			}
		}
		o.kinBody[c] = ks
		body.Contents = append(body.Contents, c)
	}
	slices.SortStableFunc(body.Contents, func(a, c *model.Content) int { return cmp.Compare(a.MediaType, c.MediaType) })
	o.m.Body = body
}

// matchConfig ties config entries to operations: for each operation, the pattern entries
// that match it in file order, then its exact entry (an operationId or METHOD /path), which
// therefore wins. An entry that names no operation is an error, and so is a second exact
// entry for one operation.
func (b *builder) matchConfig(ops []*opSource) map[*opSource][]*configEntry {
	out := map[*opSource][]*configEntry{}
	if b.cfg == nil {
		return out
	}
	byID := map[string]*opSource{}
	byRoute := map[string]*opSource{}
	for _, o := range ops {
		if _, dup := byID[o.m.ID]; !dup {
			byID[o.m.ID] = o
		}
		byRoute[o.m.Method+" "+o.m.Path] = o
	}
	exact := map[*opSource]*configEntry{}
	for _, e := range b.cfg.entries {
		if e.pattern {
			n := 0
			for _, o := range ops {
				if e.matches(o.m.ID, o.m.Method, o.m.Path) {
					out[o] = append(out[o], e)
					n++
				}
			}
			if n == 0 {
				b.d.Errorf(e.loc, "config-unknown-operation", "pattern %q matches no operation of %s", e.selector, b.l.root)
			}
			continue
		}
		var o *opSource
		if e.method != "" {
			o = byRoute[e.method+" "+e.path]
		} else {
			o = byID[e.selector]
		}
		if o == nil {
			b.d.Errorf(e.loc, "config-unknown-operation", "%q names no operation of %s (use an operationId or \"METHOD /path\" as written in the spec)", e.selector, b.l.root)
			continue
		}
		if prev, dup := exact[o]; dup {
			b.d.Errorf(e.loc, "config-duplicate", "%q and %q (line %d) name the same operation %s %s", e.selector, prev.selector, prev.loc.Line, o.m.Method, o.m.Path)
			continue
		}
		exact[o] = e
	}
	for o, e := range exact {
		out[o] = append(out[o], e)
	}
	for _, e := range b.cfg.only {
		found := false
		for _, o := range ops {
			found = found || e.matches(o.m.ID, o.m.Method, o.m.Path)
		}
		if !found {
			b.d.Errorf(e.loc, "config-unknown-operation", "only: %q names no operation of %s", e.selector, b.l.root)
		}
	}
	return out
}

// allowed reports whether the config's only list (when there is one) names the operation.
func (b *builder) allowed(o *opSource) bool {
	if b.cfg == nil || b.cfg.only == nil {
		return true
	}
	for _, e := range b.cfg.only {
		if e.matches(o.m.ID, o.m.Method, o.m.Path) {
			return true
		}
	}
	return false
}

// safeMethods are never marked: they are idempotent by definition (RFC 9110 section 9.2.1).
func isSafe(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return true
	}
	return false
}

// mark decides whether an operation is marked and resolves its settings. The sources, the
// later winning: the spec's x-idempotent (or x-idempotency, or Fern's x-fern-idempotent), the
// config's entries for it; then, for an operation none of them marks or opts out, --infer, then
// the config's unsafe switch. The config's only list, when there is one, leaves every other
// operation unmarked.
func (b *builder) mark(o *opSource, es []*configEntry) {
	var opLay *layer
	var cfgLays []*layer
	marked, optOut := false, false
	var source model.MarkSource
	var markLoc diag.Loc
	b.misspelt(o.op.Extensions, o.at, "x-idempotent")
	b.annotations(o)
	if name, src, ok := b.specMark(o); ok {
		n, base := b.extension(o.op.Extensions[name], o.at.at(name))
		var m bool
		m, opLay = decodeMark(n, base, b.d)
		if m {
			marked, source, markLoc = true, src, base
		} else {
			optOut = true
		}
	} else if m, lay, loc, ok := b.fernMark(o); ok {
		if m {
			marked, source, markLoc, opLay = true, model.MarkFern, loc, lay
		} else {
			optOut = true
		}
	}
	if len(es) > 0 {
		if last := es[len(es)-1]; last.marked {
			marked, source, markLoc = true, model.MarkConfig, last.loc
			for _, e := range es {
				if e.marked {
					cfgLays = append(cfgLays, e.layer)
				}
			}
		} else {
			marked, optOut, opLay = false, true, nil
		}
	}
	if !b.allowed(o) {
		if marked && source == model.MarkConfig {
			b.d.Errorf(markLoc, "config-conflict", "%s %s is marked here but is not in the config's only list (line %d), which leaves it unmarked; add it to only or remove this entry",
				o.m.Method, o.m.Path, b.cfg.only[0].loc.Line)
		}
		return
	}
	safe := isSafe(o.m.Method)
	if marked && safe {
		b.d.Errorf(markLoc, "safe-method", "%s %s is marked idempotent, but %s is a safe method (RFC 9110 section 9.2.1) and needs no idempotency key; remove the mark",
			o.m.Method, o.m.Path, o.m.Method)
		return
	}
	var det *detection
	var unsafeBase, unsafeLay *layer
	if !marked && !optOut && !safe {
		det = b.detect(o)
		if det != nil && b.opts.Infer {
			marked, source, markLoc = true, model.MarkInfer, det.loc
		}
		if u := b.unsafeSwitch(); !marked && u != nil && unsafeMethod(o.m.Method) {
			// An SDK may send a key on this operation: guard it when one arrives, and run a
			// request without one as before (key.required false unless settings say so).
			no := false
			marked, source, markLoc = true, u.source, u.loc
			unsafeBase, unsafeLay = &layer{keyRequired: &no, locs: map[string]diag.Loc{}}, u.layer
			if u.source == model.MarkStainless {
				b.note(o, "idempotency_header", "stainless", "mark", u.loc)
			}
		}
	}
	if !marked {
		switch {
		case det != nil:
			b.warnUnmarked(o, det)
		case !optOut && !safe:
			b.warnPossibleKey(o)
		}
		if !optOut {
			b.retriesWithoutKey(o)
		}
		return
	}
	o.m.Mark = source
	var lays []*layer
	order := append([]*layer{b.optionsLayer(), b.docLay, unsafeBase, b.cfgDefaults(), opLay}, cfgLays...)
	for _, l := range append(order, unsafeLay) {
		if l != nil {
			lays = append(lays, l)
		}
	}
	o.m.Settings = b.resolve(o, mergeSettings(lays), det, markLoc)
}

// optionsLayer is the settings the load's options give every marked operation (a profile:
// Options.Profile), nil when none. Load refuses a name that is no row before building.
func (b *builder) optionsLayer() *layer {
	if b.opts.Profile == "" {
		return nil
	}
	p := model.Profile(b.opts.Profile)
	return &layer{profile: &p, locs: map[string]diag.Loc{}}
}

// unsafeSwitch is the config's unsafe (or stainless) switch, nil when off.
func (b *builder) unsafeSwitch() *unsafeSwitch {
	if b.cfg == nil {
		return nil
	}
	return b.cfg.unsafe
}

// unsafeMethod reports whether a method is neither safe nor idempotent by definition, or is one
// an SDK keys all the same: POST, PUT, PATCH, DELETE (Stainless's SDKs send their key on every
// non-GET request).
func unsafeMethod(method string) bool {
	switch method {
	case "POST", "PUT", "PATCH", "DELETE":
		return true
	}
	return false
}

func (b *builder) cfgDefaults() *layer {
	if b.cfg == nil {
		return nil
	}
	return b.cfg.defaults
}

// toNode turns an extension value kin-openapi decoded (JSON types) into a YAML node for the
// strict settings decoder. Whole floats become integers first so sizes and lengths read as
// numbers, not as 1.048576e+06.
func toNode(v any) *yaml.Node {
	var n yaml.Node
	if err := n.Encode(integral(v)); err != nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: fmt.Sprint(v)}
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return n.Content[0]
	}
	return &n
}

func integral(v any) any {
	switch t := v.(type) {
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return int64(t)
		}
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = integral(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = integral(x)
		}
		return out
	}
	return v
}

// reachableSchemas lists the named schemas reachable from the operations, sorted by Name.
func reachableSchemas(ops []*model.Operation) []*model.Schema {
	seen := map[*model.Schema]bool{}
	var named []*model.Schema
	var walk func(s *model.Schema)
	walk = func(s *model.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		if s.Name != "" {
			named = append(named, s)
		}
		for _, p := range s.Properties {
			walk(p.Schema)
		}
		walk(s.AdditionalProperties)
		walk(s.Items)
	}
	for _, o := range ops {
		for _, p := range o.Params {
			walk(p.Schema)
		}
		if o.Body != nil {
			for _, c := range o.Body.Contents {
				walk(c.Schema)
			}
		}
	}
	slices.SortStableFunc(named, func(a, c *model.Schema) int {
		return cmp.Or(cmp.Compare(a.Name, c.Name), cmp.Compare(a.GoName, c.GoName))
	})
	return named
}

// misspelt reports extensions that look like idemgen's but are not the one expected here
// (x-idempotency on an operation, x-idempotent-key, x-idempotant): silently ignoring them would
// leave an operation unguarded that its author meant to protect.
func (b *builder) misspelt(ext map[string]any, at src, want string) {
	for _, name := range sortedKeys(ext) {
		low := strings.ToLower(name)
		if name == want || low == "x-idempotency-ignore" || !strings.HasPrefix(low, "x-idempot") ||
			(want == "x-idempotent" && name == extXIdempotency) { // read as a mark (specMark)
			continue
		}
		b.d.Errorf(at.at(name).loc(), "unknown-extension", "unknown extension %s here; did you mean %s?", name, want)
	}
}
