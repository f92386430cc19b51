package spec

import (
	"slices"
	"strings"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// Recognised idempotency carriers (docs/cli.md, "What --infer and check recognise"). Header
// names compare ignoring case; body and form field names ignoring case, "_" and "-".
var keyHeaders = []string{"idempotency-key", "x-idempotency-key", "paypal-request-id", "idempotency",
	"x-idempotence-uuid", repeatabilityRequestID}

// keyHeaderSuffix recognises vendor-prefixed forms of the header (Checkout.com's
// Cko-Idempotency-Key).
const keyHeaderSuffix = "-idempotency-key"

// OASIS Repeatable Requests Version 1.0 headers.
const (
	repeatabilityRequestID = "repeatability-request-id"
	repeatabilityFirstSent = "repeatability-first-sent"
)

const (
	keyField     = "idempotencykey" // Square, Unit, Twilio, Circle, ...
	aip155Field  = "requestid"      // Google AIP-155 request_id
	maybeKeyPart = "idempot"        // any other spelling: a warning, never inferred
)

// aip155Evidence are words a request_id field's description (or its operation's) uses when the
// field is an idempotency key, as AIP-155 describes it ("so that if you must retry your
// request, the server will know to ignore the request if it has already been completed").
// request_id is a common name for other things (Adyen's Cash App "request id"), so the name
// alone is not enough.
// "processed multiple times" and its kin say the same in other words ("the same request_id
// should be used for retries so that it is not processed multiple times").
var aip155Evidence = []string{"idempot", "retry", "retries", "duplicate", "already been completed", "de-dup", "dedup",
	"processed multiple times", "processed more than once", "processed twice", "at most once", "only once", "exactly once"}

func normalizeField(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r != '_' && r != '-' && r != ' ' {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// isKeyHeader reports whether a header name is a recognised idempotency key header.
func isKeyHeader(name string) bool {
	low := strings.ToLower(name)
	return slices.Contains(keyHeaders, low) || strings.HasSuffix(low, keyHeaderSuffix)
}

// detection is an idempotency-looking header or field an operation declares.
type detection struct {
	carrier  model.Carrier
	header   string // as declared
	query    string // the query parameter, as declared
	pointer  string // JSON pointer (body) or field name (form)
	required bool
	loc      diag.Loc
	standard model.Standard
}

// maxKeyDepth bounds the search for a body key (unit-openapi nests it at /data/attributes/…).
const maxKeyDepth = 4

// detect finds the first recognised carrier: a header parameter, else a query parameter named
// like a key (Lob's idempotency_key), else a property of a JSON body (breadth first, objects
// only), else a field of a form body, else an AIP-155 request_id in the body or, as Google's
// REST APIs carry it on methods whose body is the resource, in the query.
//
// A field with a key's name that names another request is not this request's key: Square's
// CancelPaymentByIdempotencyKey takes the idempotency_key of the payment to cancel. An operation
// whose operationId, summary or path says "by <field name>" is such a lookup.
func (b *builder) detect(o *opSource) *detection {
	for _, p := range o.m.Params {
		if p.In == model.InHeader && isKeyHeader(p.Name) {
			d := &detection{carrier: model.CarrierHeader, header: p.Name, required: p.Required, loc: p.Loc, standard: model.StandardIdempotencyKey}
			if strings.EqualFold(p.Name, repeatabilityRequestID) {
				d.standard = model.StandardRepeatable
			}
			return d
		}
	}
	if p := b.queryParam(o, keyField, false); p != nil {
		return &detection{carrier: model.CarrierQuery, query: p.Name, required: p.Required, loc: p.Loc, standard: model.StandardIdempotencyKey}
	}
	if d := b.bodyCarrier(o); d != nil {
		return d
	}
	// AIP-155 in the query: request_id described as a retry key, as for the body field.
	if p := b.queryParam(o, aip155Field, true); p != nil {
		return &detection{carrier: model.CarrierQuery, query: p.Name, required: p.Required, loc: p.Loc, standard: model.StandardAIP155}
	}
	return nil
}

// queryParam is the operation's string query parameter whose normalized name is want; with
// evidence, only one whose own description says it is a retry key (an operation's text says
// too many other things: "duplicate" names an action of some APIs).
func (b *builder) queryParam(o *opSource, want string, evidence bool) *model.Param {
	for _, p := range o.m.Params {
		if p.In != model.InQuery || normalizeField(p.Name) != want {
			continue
		}
		if ks := o.kinParam[p]; ks.ref != nil && ks.ref.Value != nil && !ks.ref.Value.Type.IsEmpty() && !isStringSchema(ks.ref) {
			continue
		}
		if !evidence || hasEvidence(o.paramDoc[p]) {
			return p
		}
	}
	return nil
}

// bodyCarrier finds a key field in a JSON, form or multipart body, else an AIP-155 request_id
// in a JSON body.
func (b *builder) bodyCarrier(o *opSource) *detection {
	if o.m.Body == nil {
		return nil
	}
	for _, c := range o.m.Body.Contents {
		if c.Kind != model.ContentJSON && c.Kind != model.ContentForm && c.Kind != model.ContentMultipart {
			continue
		}
		depth := maxKeyDepth
		if c.Kind == model.ContentForm {
			depth = 1
		}
		if toks := findKeyField(o.kinBody[c].ref, depth, keyField); toks != nil && !namesAnotherRequest(o, toks[len(toks)-1]) {
			return b.bodyDetection(o, c, toks, model.StandardIdempotencyKey)
		}
	}
	for _, c := range o.m.Body.Contents {
		if c.Kind != model.ContentJSON {
			continue
		}
		// AIP-155: the field is on the request message itself (depth 1) and says what it is for.
		toks := findKeyField(o.kinBody[c].ref, 1, aip155Field)
		if toks == nil {
			continue
		}
		// Generators that have no description field write the text in title instead
		// (grpc-gateway's Swagger 2.0 output puts a comment's first paragraph there).
		prop, _ := findProperty(o.kinBody[c].ref, toks)
		if hasEvidence(prop.Value.Description) || hasEvidence(prop.Value.Title) || hasEvidence(o.m.Description) || hasEvidence(o.op.Summary) {
			return b.bodyDetection(o, c, toks, model.StandardAIP155)
		}
	}
	return nil
}

func (b *builder) bodyDetection(o *opSource, c *model.Content, toks []string, std model.Standard) *detection {
	d := &detection{carrier: model.CarrierBody, pointer: pointerOf(toks), loc: c.Loc, standard: std}
	if c.Kind == model.ContentForm {
		d.carrier, d.pointer = model.CarrierForm, toks[0]
	}
	_, d.required = findProperty(o.kinBody[c].ref, toks)
	return d
}

func hasEvidence(text string) bool {
	low := strings.ToLower(text)
	for _, w := range aip155Evidence {
		if strings.Contains(low, w) {
			return true
		}
	}
	return false
}

// namesAnotherRequest reports whether the operation looks a resource up by the key field, so the
// field is another request's key: its operationId, summary or path contains "by" followed by the
// field's name (CancelPaymentByIdempotencyKey, /payments/cancel-by-idempotency-key).
func namesAnotherRequest(o *opSource, field string) bool {
	by := "by" + normalizeField(field)
	for _, s := range []string{o.m.ID, o.m.Summary, o.m.Path} {
		if strings.Contains(normalizeField(strings.ReplaceAll(s, "/", "")), by) {
			return true
		}
	}
	return false
}

// findKeyField searches object properties breadth first for a string property whose normalized
// name is want.
func findKeyField(root *openapi3.SchemaRef, depth int, want string) []string {
	var found []string
	searchFields(root, depth, func(path []string, ref *openapi3.SchemaRef) bool {
		if normalizeField(path[len(path)-1]) == want && isStringSchema(ref) {
			found = path
			return true
		}
		return false
	})
	return found
}

// searchFields visits the properties of an object schema breadth first, up to depth objects
// deep, until visit returns true.
func searchFields(root *openapi3.SchemaRef, depth int, visit func(path []string, ref *openapi3.SchemaRef) bool) {
	type item struct {
		ref  *openapi3.SchemaRef
		path []string
	}
	queue := []item{{root, nil}}
	seen := map[*openapi3.Schema]bool{}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		if it.ref == nil || it.ref.Value == nil || seen[it.ref.Value] || len(it.path) >= depth {
			continue
		}
		seen[it.ref.Value] = true
		for _, p := range commonProperties(it.ref.Value) {
			path := append(append([]string{}, it.path...), p.name)
			if visit(path, p.ref) {
				return
			}
			queue = append(queue, item{p.ref, path})
		}
	}
}

// commonProperties are an object's properties; for a oneOf/anyOf of objects, those every
// member declares (the first member's declaration of each), since only a member every shape
// of the body has can carry its key.
func commonProperties(s *openapi3.Schema) []kinProp {
	members := append(append(openapi3.SchemaRefs{}, s.OneOf...), s.AnyOf...)
	if len(members) == 0 {
		props, _ := objectParts(s, src{})
		return props
	}
	var common []kinProp
	for i, m := range members {
		if m == nil || m.Value == nil {
			return nil
		}
		props := commonProperties(m.Value)
		if i == 0 {
			common = props
			continue
		}
		names := map[string]bool{}
		for _, p := range props {
			names[p.name] = true
		}
		common = slices.DeleteFunc(common, func(p kinProp) bool { return !names[p.name] })
	}
	return common
}

// possibleKey finds a header or a string body field that looks like an idempotency key in a
// spelling idemgen does not recognise (idempotentHash, idempotencyToken, X-Idempotence-Key):
// check warns about it, --infer does not take it. It is "" when there is none.
func (b *builder) possibleKey(o *opSource) (what, field, value string) {
	for _, p := range o.m.Params {
		if p.In == model.InHeader && strings.Contains(normalizeField(p.Name), maybeKeyPart) {
			return "header " + p.Name, "header", p.Name
		}
	}
	if o.m.Body == nil {
		return "", "", ""
	}
	for _, c := range o.m.Body.Contents {
		if c.Kind != model.ContentJSON && c.Kind != model.ContentForm && c.Kind != model.ContentMultipart {
			continue
		}
		var found []string
		searchFields(o.kinBody[c].ref, maxKeyDepth, func(path []string, ref *openapi3.SchemaRef) bool {
			if n := normalizeField(path[len(path)-1]); strings.Contains(n, maybeKeyPart) && n != keyField && isStringSchema(ref) {
				found = path
				return true
			}
			return false
		})
		if found != nil {
			if c.Kind == model.ContentForm {
				return "form field " + found[0], "body", found[0]
			}
			return "body field " + pointerOf(found), "body", pointerOf(found)
		}
	}
	return "", "", ""
}

// warnUnmarked reports an unmarked operation that looks like it takes an idempotency key, with
// the config entry that would mark it.
func (b *builder) warnUnmarked(o *opSource, det *detection) {
	selector := o.m.ID
	if o.m.IDDerived {
		selector = o.m.Method + " " + o.m.Path
	}
	var what, field, value string
	switch det.carrier {
	case model.CarrierHeader:
		what, field, value = "header "+det.header, "header", det.header
	case model.CarrierBody:
		what, field, value = "body field "+det.pointer, "body", det.pointer
	case model.CarrierQuery:
		what, field, value = "query parameter "+det.query, "query", det.query
	default:
		what, field, value = "form field "+det.pointer, "body", det.pointer
	}
	req := det.required
	b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "unmarked-idempotency-key", Loc: o.m.Loc,
		Message: o.m.Method + " " + o.m.Path + " declares the idempotency-looking " + what + " but is not marked x-idempotent",
		Hint:    configHint(selector, field, value, &req)})
}

// shapeKey finds a string field named like a key (idempot…) that only some shapes of a JSON or
// multipart body declare (a oneOf of a note with an idempotency_key and one without): --infer
// takes a key every shape carries, since a request in another shape would have none. It is ""
// when there is none.
func (b *builder) shapeKey(o *opSource) string {
	if o.m.Body == nil {
		return ""
	}
	for _, c := range o.m.Body.Contents {
		root := o.kinBody[c].ref
		if (c.Kind != model.ContentJSON && c.Kind != model.ContentMultipart) || root == nil || root.Value == nil {
			continue
		}
		for _, m := range append(append(openapi3.SchemaRefs{}, root.Value.OneOf...), root.Value.AnyOf...) {
			var found []string
			searchFields(m, maxKeyDepth, func(path []string, ref *openapi3.SchemaRef) bool {
				name := path[len(path)-1]
				if strings.Contains(normalizeField(name), maybeKeyPart) && isStringSchema(ref) && !namesAnotherRequest(o, name) {
					found = path
					return true
				}
				return false
			})
			if found != nil {
				return pointerOf(found)
			}
		}
	}
	return ""
}

// warnPossibleKey reports an unmarked operation whose header or body field looks like an
// idempotency key in an unrecognised spelling, or that only some shapes of its body carry, else
// one whose description says it is one (warnDescribedKey), else a body whose items carry keys
// (warnItemKeys); none is ever inferred.
func (b *builder) warnPossibleKey(o *opSource) {
	what, field, value := b.possibleKey(o)
	if what == "" {
		if ptr := b.shapeKey(o); ptr != "" {
			b.warnShapeKey(o, ptr)
		} else if !b.warnDescribedKey(o) {
			b.warnItemKeys(o)
		}
		return
	}
	selector := o.m.ID
	if o.m.IDDerived {
		selector = o.m.Method + " " + o.m.Path
	}
	b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "possible-idempotency-key", Loc: o.m.Loc,
		Message: o.m.Method + " " + o.m.Path + " declares the " + what + ", which looks like an idempotency key in a spelling --infer does not recognise; it is not marked",
		Hint:    "if clients send the operation's idempotency key there, mark it in idemgen.yaml:\n" + configKeyEntry(selector, field, value, nil)})
}

// warnShapeKey reports an unmarked operation whose key field only some shapes of its body
// declare; marked, the key is optional (a request in another shape runs unguarded).
func (b *builder) warnShapeKey(o *opSource, ptr string) {
	selector := o.m.ID
	if o.m.IDDerived {
		selector = o.m.Method + " " + o.m.Path
	}
	no := false
	b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "possible-idempotency-key", Loc: o.m.Loc,
		Message: o.m.Method + " " + o.m.Path + " declares the body field " + ptr + " in some shapes of its body only (oneOf/anyOf), and --infer takes a key only when every shape carries it; it is not marked",
		Hint: "if clients send the operation's idempotency key there, mark it in idemgen.yaml (the key optional: a request in a shape without it runs unguarded):\n" +
			configKeyEntry(selector, "body", ptr, &no)})
}
