package spec

import (
	"strings"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// Recognised idempotency carriers (docs/design.md section 2): header names compared ignoring case,
// body and form field names compared ignoring case, "_" and "-".
var keyHeaders = []string{"idempotency-key", "x-idempotency-key", "paypal-request-id", "idempotency"}

const keyField = "idempotencykey"

func normalizeField(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r != '_' && r != '-' {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// detection is an idempotency-looking header or field an operation declares.
type detection struct {
	carrier  model.Carrier
	header   string // as declared
	pointer  string // JSON pointer (body) or field name (form)
	required bool
	loc      diag.Loc
}

// maxKeyDepth bounds the search for a body key (unit-openapi nests it at /data/attributes/…).
const maxKeyDepth = 4

// detect finds the first recognised carrier: a header parameter, else a property of a JSON body
// (breadth first, objects only), else a field of a form body.
func (b *builder) detect(o *opSource) *detection {
	for _, p := range o.m.Params {
		if p.In != model.InHeader {
			continue
		}
		for _, h := range keyHeaders {
			if strings.EqualFold(p.Name, h) {
				return &detection{carrier: model.CarrierHeader, header: p.Name, required: p.Required, loc: p.Loc}
			}
		}
	}
	if o.m.Body == nil {
		return nil
	}
	for _, c := range o.m.Body.Contents {
		if c.Kind != model.ContentJSON && c.Kind != model.ContentForm {
			continue
		}
		depth := maxKeyDepth
		if c.Kind == model.ContentForm {
			depth = 1
		}
		if toks := findKeyField(o.kinBody[c].ref, depth); toks != nil {
			d := &detection{carrier: model.CarrierBody, pointer: pointerOf(toks), loc: c.Loc}
			if c.Kind == model.ContentForm {
				d.carrier, d.pointer = model.CarrierForm, toks[0]
			}
			_, d.required = findProperty(o.kinBody[c].ref, toks)
			return d
		}
	}
	return nil
}

// findKeyField searches object properties breadth first for a recognised key field name.
func findKeyField(root *openapi3.SchemaRef, depth int) []string {
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
		props, _ := objectParts(it.ref.Value, src{})
		for _, p := range props {
			path := append(append([]string{}, it.path...), p.name)
			if normalizeField(p.name) == keyField && isStringSchema(p.ref) {
				return path
			}
			queue = append(queue, item{p.ref, path})
		}
	}
	return nil
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
	default:
		what, field, value = "form field "+det.pointer, "body", det.pointer
	}
	req := det.required
	b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "unmarked-idempotency-key", Loc: o.m.Loc,
		Message: o.m.Method + " " + o.m.Path + " declares the idempotency-looking " + what + " but is not marked x-idempotent",
		Hint:    configHint(selector, field, value, &req)})
}
