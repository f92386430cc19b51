package conform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// request is the valid request of one operation that the checks vary: the chosen media type,
// the parameter values, and the body as a value tree (JSON) or fields (form), without its key.
type request struct {
	op      *model.Operation
	content *model.Content // nil: the operation takes no body
	path    map[string]string
	query   []field
	header  []field
	json    any     // a JSON body's value (content.Kind == ContentJSON)
	form    []field // a form body's fields (ContentForm)
	raw     []byte  // any other body, sent as is
	// fresh gives the parameters of Options.FreshParams a value per key (keyed); freshErr is
	// why one could not be had, which sending the request reports.
	fresh    *freshValues
	freshErr error
}

// field is one query parameter, header or form field; schema is its schema when known (for a
// changed value), ptr its JSON pointer in the body's value.
type field struct {
	name, value string
	schema      *model.Schema
	ptr         string
	param       bool // a header parameter the spec declares (not the idempotency key)
}

// wire is one request as sent: method, path with query (relative to the base URL), header
// lines in order (a name may repeat), body.
type wire struct {
	method string
	target string
	header []field
	body   []byte
	// err, when set, is why the request could not be made (a fresh parameter's value): it is
	// not sent, and its exchange reports err.
	err error
}

// buildRequest makes op's valid request from the options (Params, Bodies) and the schemas.
// The error says why none could be made.
func buildRequest(op *model.Operation, g *values, o *Options) (*request, error) {
	r := &request{op: op, path: map[string]string{}}
	for _, p := range op.Params {
		if p.IsKey {
			continue
		}
		given, ok := o.Params[p.Name]
		if !ok && !p.Required && p.In != model.InPath {
			continue
		}
		var text string
		if ok {
			text = given
		} else {
			v, err := paramValue(p, g)
			if err != nil {
				return nil, fmt.Errorf("%s parameter %s: %w", p.In, p.Name, err)
			}
			text = v
		}
		f := field{name: p.Name, value: text, schema: p.Schema, param: true}
		switch p.In {
		case model.InPath:
			r.path[p.Name] = text
		case model.InQuery:
			r.query = append(r.query, f)
		case model.InHeader:
			r.header = append(r.header, f)
		}
	}
	if op.Body == nil || len(op.Body.Contents) == 0 {
		return r, nil
	}
	r.content = pickContent(op.Body.Contents)
	given, hasGiven := o.Bodies[op.ID]
	switch r.content.Kind {
	case model.ContentJSON:
		text := string(given)
		if !hasGiven {
			text = r.content.Example
		}
		if text != "" {
			v, ok := decodeValue(text)
			if !ok {
				if hasGiven {
					return nil, fmt.Errorf("the body given for %s is not JSON", op.ID)
				}
			} else if hasGiven || g.valid(r.content.Schema, v) {
				r.json = v
				return r, nil
			}
		}
		v, err := g.value(r.content.Schema, "")
		if err != nil {
			return nil, fmt.Errorf("request body %s: %w", r.content.MediaType, err)
		}
		r.json = v
	case model.ContentForm:
		if hasGiven {
			fields, err := parseForm(string(given), r.content.Schema)
			if err != nil {
				return nil, fmt.Errorf("the body given for %s: %w", op.ID, err)
			}
			r.form = fields
			return r, nil
		}
		v, err := g.value(r.content.Schema, "")
		if err != nil {
			return nil, fmt.Errorf("request body %s: %w", r.content.MediaType, err)
		}
		r.form = flattenForm(v, r.content)
	case model.ContentMultipart:
		return nil, fmt.Errorf("request body %s: conform does not build multipart bodies", r.content.MediaType)
	default:
		switch {
		case hasGiven:
			r.raw = given
		case r.content.Example != "":
			var s string
			if json.Unmarshal([]byte(r.content.Example), &s) == nil {
				r.raw = []byte(s)
			} else {
				r.raw = []byte(r.content.Example)
			}
		default:
			r.raw = []byte("conform")
		}
	}
	return r, nil
}

// pickContent prefers a JSON body, then a form, then anything else (contents are sorted).
func pickContent(cs []*model.Content) *model.Content {
	for _, kind := range []model.ContentKind{model.ContentJSON, model.ContentForm, model.ContentRaw, model.ContentMultipart} {
		for _, c := range cs {
			if c.Kind == kind {
				return c
			}
		}
	}
	return cs[0]
}

// paramValue is a valid value of p as text.
func paramValue(p *model.Param, g *values) (string, error) {
	if p.Example != "" {
		if v, ok := decodeValue(p.Example); ok && g.valid(p.Schema, v) {
			return scalarText(v), nil
		}
	}
	v, err := g.value(p.Schema, "")
	if err != nil {
		return "", err
	}
	return scalarText(v), nil
}

// scalarText writes a scalar value as text (a string as itself, other values as JSON).
func scalarText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return string(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = scalarText(e)
		}
		return strings.Join(parts, ",")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// flattenForm writes a value as form fields, the way OpenAPI's form encoding and Stripe's SDKs
// do: scalars as name=value, objects and arrays of objects with deepObject brackets
// (metadata[k]=v, items[0][price]=p), arrays of scalars as repeated fields.
func flattenForm(v any, c *model.Content) []field {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var out []field
	var walk func(name, ptr string, v any, s *model.Schema)
	walk = func(name, ptr string, v any, s *model.Schema) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(x) {
				walk(name+"["+k+"]", ptr+"/"+escapeToken(k), x[k], propSchema(s, k))
			}
		case []any:
			scalars := true
			for _, e := range x {
				switch e.(type) {
				case map[string]any, []any:
					scalars = false
				}
			}
			for i, e := range x {
				var items *model.Schema
				if s != nil {
					items = s.Items
				}
				if scalars && !strings.Contains(name, "[") {
					out = append(out, field{name: name, value: scalarText(e), schema: items, ptr: fmt.Sprintf("%s/%d", ptr, i)})
					continue
				}
				walk(fmt.Sprintf("%s[%d]", name, i), fmt.Sprintf("%s/%d", ptr, i), e, items)
			}
		default:
			out = append(out, field{name: name, value: scalarText(v), schema: s, ptr: ptr})
		}
	}
	for _, k := range sortedKeys(obj) {
		walk(k, "/"+escapeToken(k), obj[k], propSchema(c.Schema, k))
	}
	return out
}

// parseForm reads a form body given by hand; the schema of each top-level field is looked up.
func parseForm(text string, s *model.Schema) ([]field, error) {
	var out []field
	for _, part := range strings.Split(text, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		f := field{name: name, value: value}
		if !strings.Contains(name, "[") {
			f.schema, f.ptr = propSchema(s, name), "/"+escapeToken(name)
		}
		out = append(out, f)
	}
	return out, nil
}

// propSchema is the schema of member name of an object schema (its map value schema for an
// undeclared name), nil when unknown.
func propSchema(s *model.Schema, name string) *model.Schema {
	if s == nil {
		return nil
	}
	if s.EmptyOr != nil {
		s = s.EmptyOr
	}
	for _, p := range s.Properties {
		if p.Name == name {
			return p.Schema
		}
	}
	return s.AdditionalProperties
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// clone returns a deep copy of the request, so a check can change one part.
func (r *request) clone() *request {
	c := *r
	c.path = map[string]string{}
	for k, v := range r.path {
		c.path[k] = v
	}
	c.query = slices.Clone(r.query)
	c.header = slices.Clone(r.header)
	c.form = slices.Clone(r.form)
	c.json = deepCopy(r.json)
	c.raw = slices.Clone(r.raw)
	return &c
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}

// names reports whether the request itself sends a top-level member or field name (an id the
// client chooses, as Stripe's coupon id).
func (r *request) names(name string) bool {
	if obj, ok := r.json.(map[string]any); ok {
		if _, has := obj[name]; has {
			return true
		}
	}
	for _, f := range r.form {
		if f.name == name {
			return true
		}
	}
	return false
}

// keyed is the request with key placed where the operation's key travels ("" sends none),
// as the operation's key.quoted wants it sent: an RFC 8941 sf-string under "require" (the IETF
// draft's syntax), else bare.
func (r *request) keyed(key string) *request {
	if key != "" && r.op.Settings.Key.Quoted == defaults.KeyQuotedRequired.String() {
		key = sfString(key)
	}
	return r.keyedAsSent(key)
}

// sfString writes s as an RFC 8941 sf-string (section 4.1.6): quoted, with '"' and '\'
// escaped.
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// keyedAsSent is the request with the key text sent exactly as given ("" sends none), and
// the fresh parameters' values of that key.
func (r *request) keyedAsSent(key string) *request {
	c := r.clone()
	c.freshen(key)
	k := r.op.Settings.Key
	switch k.Carrier {
	case model.CarrierBody:
		if key == "" {
			c.json = deletePointer(c.json, k.PointerTokens)
		} else {
			c.json = setPointer(c.json, k.PointerTokens, key)
		}
	case model.CarrierForm:
		c.form = slices.DeleteFunc(c.form, func(f field) bool { return f.name == k.Field })
		if key != "" {
			c.form = append(c.form, field{name: k.Field, value: key})
		}
	case model.CarrierQuery:
		c.query = slices.DeleteFunc(c.query, func(f field) bool { return f.name == k.Query })
		if key != "" {
			c.query = append(c.query, field{name: k.Query, value: key})
		}
	default:
		if key != "" {
			c.header = append(c.header, field{name: k.Header, value: key})
		}
	}
	return c
}

// freshen gives the request's fresh parameters (Options.FreshParams) the values of key.
func (r *request) freshen(key string) {
	for _, p := range r.op.Params {
		v, ok, err := r.fresh.value(p.Name, key)
		if !ok {
			continue
		}
		if err != nil && r.freshErr == nil {
			r.freshErr = err
		}
		switch p.In {
		case model.InPath:
			r.path[p.Name] = v
		case model.InQuery:
			setField(r.query, p.Name, v)
		case model.InHeader:
			setField(r.header, p.Name, v)
		}
	}
}

// setField sets the value of the fields named name.
func setField(fs []field, name, v string) {
	for i := range fs {
		if fs[i].name == name {
			fs[i].value = v
		}
	}
}

// setPointer sets the member at tokens, creating objects on the way; it returns the new root.
func setPointer(root any, tokens []string, v any) any {
	if len(tokens) == 0 {
		return v
	}
	switch x := root.(type) {
	case []any:
		var i int
		if _, err := fmt.Sscanf(tokens[0], "%d", &i); err == nil && i >= 0 && i < len(x) {
			x[i] = setPointer(x[i], tokens[1:], v)
		}
		return x
	case map[string]any:
		x[tokens[0]] = setPointer(x[tokens[0]], tokens[1:], v)
		return x
	}
	m := map[string]any{}
	m[tokens[0]] = setPointer(nil, tokens[1:], v)
	return m
}

// deletePointer removes the member at tokens; it returns the root.
func deletePointer(root any, tokens []string) any {
	if len(tokens) == 0 {
		return nil
	}
	obj, ok := root.(map[string]any)
	if !ok {
		return root
	}
	if len(tokens) == 1 {
		delete(obj, tokens[0])
		return obj
	}
	obj[tokens[0]] = deletePointer(obj[tokens[0]], tokens[1:])
	return obj
}

// getPointer returns the value at tokens.
func getPointer(root any, tokens []string) (any, bool) {
	for _, t := range tokens {
		switch x := root.(type) {
		case map[string]any:
			v, ok := x[t]
			if !ok {
				return nil, false
			}
			root = v
		case []any:
			var i int
			if _, err := fmt.Sscanf(t, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			root = x[i]
		default:
			return nil, false
		}
	}
	return root, true
}

// spelling says how a body is written.
type spelling int

const (
	spellCanonical spelling = iota // compact, members sorted
	spellReversed                  // compact, members in reverse order
	spellIndented                  // two-space indentation, members sorted
)

// encodeBody writes the body in a spelling.
func (r *request) encodeBody(sp spelling) []byte {
	switch {
	case r.content == nil:
		return nil
	case r.content.Kind == model.ContentJSON:
		return writeJSON(nil, r.json, sp, "")
	case r.content.Kind == model.ContentForm:
		fields := slices.Clone(r.form)
		if sp == spellReversed {
			slices.Reverse(fields)
		}
		return encodeForm(fields, false)
	}
	return slices.Clone(r.raw)
}

// encodeForm writes fields as application/x-www-form-urlencoded; escapeAll percent-encodes every
// letter and digit of the values too (%61 for a), which decodes to the same fields.
func encodeForm(fields []field, escapeAll bool) []byte {
	var b bytes.Buffer
	for i, f := range fields {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(f.name))
		b.WriteByte('=')
		if escapeAll {
			for _, c := range []byte(f.value) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		} else {
			b.WriteString(url.QueryEscape(f.value))
		}
	}
	return b.Bytes()
}

// writeJSON writes v in a spelling; indent is the current indentation for spellIndented.
func writeJSON(b []byte, v any, sp spelling, indent string) []byte {
	switch x := v.(type) {
	case map[string]any:
		keys := sortedKeys(x)
		if sp == spellReversed {
			slices.Reverse(keys)
		}
		if len(keys) == 0 {
			return append(b, "{}"...)
		}
		b = append(b, '{')
		inner := indent + "  "
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			if sp == spellIndented {
				b = append(b, '\n')
				b = append(b, inner...)
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			if sp == spellIndented {
				b = append(b, ' ')
			}
			b = writeJSON(b, x[k], sp, inner)
		}
		if sp == spellIndented {
			b = append(b, '\n')
			b = append(b, indent...)
		}
		return append(b, '}')
	case []any:
		if len(x) == 0 {
			return append(b, "[]"...)
		}
		b = append(b, '[')
		inner := indent + "  "
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if sp == spellIndented {
				b = append(b, '\n')
				b = append(b, inner...)
			}
			b = writeJSON(b, e, sp, inner)
		}
		if sp == spellIndented {
			b = append(b, '\n')
			b = append(b, indent...)
		}
		return append(b, ']')
	case string:
		return appendJSONString(b, x)
	case json.Number:
		return append(b, x...)
	}
	out, _ := json.Marshal(v)
	return append(b, out...)
}

func appendJSONString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return append(b, bytes.TrimRight(buf.Bytes(), "\n")...)
}

// wire writes the request with the spelling of its body: the path template filled in, the
// declared query parameters, then the headers (extra first: credentials), then the body.
func (r *request) wire(sp spelling, extra http.Header) *wire {
	w := &wire{method: r.op.Method, target: r.target(), err: r.freshErr}
	for _, name := range sortedKeys(extra) {
		for _, v := range extra[name] {
			w.header = append(w.header, field{name: name, value: v})
		}
	}
	for _, f := range r.header {
		// A header parameter the credentials also set (an Authorization or tenant header the
		// spec declares) is sent once, with the credential's value: two copies are a 400.
		if f.param && extra.Get(f.name) != "" {
			continue
		}
		w.header = append(w.header, f)
	}
	if r.content != nil {
		w.header = append(w.header, field{name: "Content-Type", value: r.content.MediaType})
		w.body = r.encodeBody(sp)
	}
	return w
}

// target is the path with its parameters filled in and the query.
func (r *request) target() string {
	p := r.op.Path
	for name, v := range r.path {
		p = strings.ReplaceAll(p, "{"+name+"}", url.PathEscape(v))
	}
	if len(r.query) == 0 {
		return p
	}
	q := make([]string, 0, len(r.query))
	for _, f := range r.query {
		q = append(q, url.QueryEscape(f.name)+"="+url.QueryEscape(f.value))
	}
	return p + "?" + strings.Join(q, "&")
}
