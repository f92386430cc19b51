package generator

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// Form bodies (application/x-www-form-urlencoded) come in two shapes, decided per operation by
// the body schema:
//
//   - flat: every property is a scalar, an array of scalars or a schema-less value. The body
//     struct is the JSON one (typeOf); gen.Form reads the fields by name in body order, array
//     fields after the loop in element order (List), and the fingerprint is the body's sorted
//     fields (Input.FormBody), a framing that does not change, so records already stored keep
//     matching their retries. A property name is a literal field name (Stripe-era specs declare
//     "metadata[order]" as one).
//   - bracketed: some property is an object, a map, an array of objects, or a oneOf/anyOf with
//     the empty-string sentinel (Stripe's anyOf [X, enum ['']]). The body is decoded by
//     gen.FormTree from bracketed names (OpenAPI's deepObject style: address[city],
//     metadata[k], items[0][price], expand[]) into types of its own (formType: Go structs, maps
//     and slices, canonical.Unsettable for the sentinel). Its fingerprint is the same sorted
//     fields as a flat form's (Input.FormTreeBody), with exclusions below fields: field order
//     and percent-encoding do not count, indices and the order of unindexed elements do. So an
//     operation keeps its fingerprints when its schema gains nested members, and no record
//     stored while its schema was flat is orphaned. Two requests with one fingerprint have
//     the same fields, hence decode to the same value; the converse does not hold for spellings
//     (amount=0100, expand=a beside expand[0]=a), which fingerprint apart, as in a flat form.

// flatField reports whether a form field of schema s decodes to a plain Go value: a scalar, a
// schema-less value or a oneOf/anyOf (kept as a JSON string), or an array of scalars (the field
// repeated).
func flatField(s *model.Schema) bool {
	switch s.Type {
	case model.TypeString, model.TypeInteger, model.TypeNumber, model.TypeBoolean, model.TypeAny:
		return true
	case model.TypeArray:
		return s.Items != nil && s.Items.Type != model.TypeObject && s.Items.Type != model.TypeArray && s.Items.Type != model.TypeAny
	}
	return false
}

// bracketed reports whether a form body of schema s has nested members, so that it is read from
// bracketed fields into types of its own.
func bracketed(s *model.Schema) bool {
	if s.Type != model.TypeObject {
		return false
	}
	for _, p := range s.Properties {
		if !flatField(p.Schema) || p.Schema.EmptyOr != nil {
			return true
		}
	}
	return false
}

// formType plans the Go type of a member of a bracketed form body: structs of their own (the
// JSON structs have no form decoder, and type oneOf/anyOf as raw JSON), maps, slices,
// canonical.Unsettable for a oneOf/anyOf with the "" sentinel, raw JSON for other oneOf/anyOf
// and schema-less values; scalars and enums are the JSON ones.
func (g *planner) formType(s *model.Schema, hint string) *tinfo {
	if t, ok := g.formTypes[s]; ok {
		return t
	}
	if s.EmptyOr != nil {
		t := &tinfo{kind: kUnset, s: s}
		g.formTypes[s] = t
		t.elem = g.formType(s.EmptyOr, hint)
		return t
	}
	switch s.Type {
	case model.TypeObject:
		if len(s.Properties) == 0 && !s.ClosedObject {
			t := &tinfo{kind: kMap, s: s}
			g.formTypes[s] = t
			if s.AdditionalProperties != nil {
				t.elem = g.formType(s.AdditionalProperties, hint+"Value")
			} else {
				t.elem = &tinfo{kind: kRaw, s: s}
			}
			return t
		}
		if s.Name != "" {
			return g.formStruct(s, hint)
		}
		// Vendor specs repeat inline objects (Stripe declares its address object in dozens of
		// operations): one type, decoder and canonicalizer per shape.
		shape := g.formShape(s)
		if t, ok := g.formShapes[shape]; ok {
			t.shared++
			g.formTypes[s] = t
			return t
		}
		t := g.formStruct(s, hint)
		g.formShapes[shape] = t
		return t
	case model.TypeArray:
		t := &tinfo{kind: kSlice, s: s}
		g.formTypes[s] = t
		if s.Items == nil {
			t.elem = &tinfo{kind: kRaw, s: s}
		} else {
			t.elem = g.formType(s.Items, hint+"Item")
		}
		return t
	case model.TypeAny:
		return &tinfo{kind: kRaw, s: s}
	}
	return g.typeOf(s, hint)
}

// formShape is a digest of everything about a schema that its form type, decoder and
// canonicalizer depend on (types, constraints, members with their names, requiredness, key and
// ignore marks, recursively; named schemas by name), so that two inline schemas of the same
// shape can share their generated code. Descriptions and locations do not count.
func (g *planner) formShape(s *model.Schema) string {
	switch {
	case s == nil:
		return "-"
	case s.Name != "":
		return "#" + s.Name
	}
	if k, ok := g.shapes[s]; ok {
		return k
	}
	g.shapes[s] = "@cycle" // an inline schema cannot reach itself; guard anyway
	var b strings.Builder
	num := func(f *float64) string {
		if f == nil {
			return "-"
		}
		return strconv.FormatFloat(*f, 'g', -1, 64)
	}
	inum := func(n *int64) string {
		if n == nil {
			return "-"
		}
		return strconv.FormatInt(*n, 10)
	}
	fmt.Fprintf(&b, "%s|%s|%t|%t|%s|%v|%q|%q|%v|", s.Type, s.Format, s.Nullable, s.Composite, s.CompositeOf, s.Variants, s.Enum, s.EnumJSON, s.Types)
	fmt.Fprintf(&b, "%s|%s|%t|%t|%s|%s|%s|%s|%q|%t|%t|", num(s.Minimum), num(s.Maximum), s.ExclusiveMin, s.ExclusiveMax,
		inum(s.MinLength), inum(s.MaxLength), inum(s.MinItems), inum(s.MaxItems), s.Pattern, s.Ignore, s.ClosedObject)
	if s.MultipleOf != nil {
		fmt.Fprintf(&b, "mo %s|", num(s.MultipleOf))
	}
	for _, p := range s.Properties {
		fmt.Fprintf(&b, "(%q %s %t %t %t %s)", p.Name, p.GoName, p.Required, p.Ignore, g.keyProps[p], g.formShape(p.Schema))
	}
	fmt.Fprintf(&b, "|ap %s|items %s|unset %s", g.formShape(s.AdditionalProperties), g.formShape(s.Items), g.formShape(s.EmptyOr))
	sum := sha256.Sum256([]byte(b.String()))
	k := hex.EncodeToString(sum[:16])
	g.shapes[s] = k
	return k
}

// formStruct plans the struct of an object in a bracketed form body. A named schema's is named
// after it with a Form suffix (its JSON struct, if any, keeps the plain name).
func (g *planner) formStruct(s *model.Schema, hint string) *tinfo {
	if s.Name != "" && s.GoName != "" {
		hint = s.GoName + "Form"
	}
	t := &tinfo{kind: kStruct, s: s, name: g.names.take(hint), form: true}
	g.formTypes[s] = t // before the fields, so recursive references find it
	g.named = append(g.named, t)
	fnames := newNamer()
	for _, p := range s.Properties {
		fnames.take(p.GoName)
	}
	for _, p := range s.Properties {
		f := &field{p: p, name: p.GoName, bodyKey: g.keyProps[p]}
		f.t = g.formType(p.Schema, t.name+p.GoName)
		// A form has no null: optional members are pointers (nil when absent), maps and slices
		// are nil when absent.
		f.ptr = f.t.pointerable() && (!p.Required || f.bodyKey || (f.t.kind == kStruct && g.cyclic[p.Schema]))
		t.fields = append(t.fields, f)
	}
	if !s.ClosedObject {
		if ap := s.AdditionalProperties; ap != nil && ap.Type != model.TypeAny {
			t.extra = fnames.take("AdditionalProperties")
			t.addl = g.formType(ap, t.name+"Value")
		} else {
			t.extra = fnames.take("Extra")
		}
	}
	t.decodeFn = g.names.take("decode" + t.name)
	return t
}

// nested reports whether a form member of type t is sent as bracketed fields.
func nested(t *tinfo) bool {
	switch t.kind {
	case kStruct, kMap:
		return true
	case kSlice:
		return !scalar(t.elem)
	case kUnset:
		return nested(t.elem)
	}
	return false
}

// checkFormEncoding refuses what a bracketed form body cannot decode: a nested member whose
// encoding declares another style than deepObject (style form spreads an object's members as
// top-level fields) or a content type (a JSON document in a field), and a property name with
// brackets (it would read as a nested member).
func (g *planner) checkFormEncoding(o *opPlan, c *model.Content) {
	for _, f := range o.bodyT.fields {
		name := f.p.Name
		if strings.ContainsAny(name, "[]") {
			g.diags.Add(diag.Diagnostic{Severity: diag.Error, Code: "unsupported-schema", Loc: f.p.Schema.Loc,
				Message: fmt.Sprintf("operation %s: form field %q has brackets in its name, while the body has nested members sent as bracketed fields (name[key]=value)", o.op.ID, name),
				Hint:    "declare it as a member of an object property with an overlay, or set fingerprint.body: raw (the handler then gets the exact bytes)"})
			continue
		}
		e, ok := c.Encoding[name]
		if !ok || !nested(f.t) {
			continue
		}
		switch {
		case e.ContentType != "":
			g.diags.Add(diag.Diagnostic{Severity: diag.Error, Code: "unsupported-schema", Loc: e.Loc,
				Message: fmt.Sprintf("operation %s: form field %q is encoded as %s; idemgen decodes nested form members from bracketed fields only (style deepObject)", o.op.ID, name, e.ContentType),
				Hint:    "set its encoding to {style: deepObject, explode: true} with an overlay if clients send bracketed fields, or set fingerprint.body: raw"})
		case e.Style != "" && (e.Style != "deepObject" || !e.Explode):
			g.diags.Add(diag.Diagnostic{Severity: diag.Error, Code: "unsupported-schema", Loc: e.Loc,
				Message: fmt.Sprintf("operation %s: form field %q has style %s (explode %t); idemgen decodes nested form members from bracketed fields only (style deepObject, explode true)", o.op.ID, name, e.Style, e.Explode),
				Hint:    "set its encoding to {style: deepObject, explode: true} with an overlay if clients send bracketed fields, or set fingerprint.body: raw"})
		}
	}
}

// formTreeExclusions are the bracketed paths left out of a bracketed form body's fingerprint:
// fingerprint.exclude (a field, a member below one: metadata[trace_id], or every element's:
// items[*][note]) and the form-carried key, sorted. A path token with brackets cannot be
// written as a bracketed path.
func (g *planner) formTreeExclusions(o *opPlan) []string {
	var paths []string
	for _, p := range o.op.Settings.Fingerprint.Exclude {
		var b strings.Builder
		for i, tok := range p.Tokens {
			if strings.ContainsAny(tok, "[]") {
				g.unsupportedExclusion(o, "a form member whose name has brackets ("+p.Raw+")")
			}
			if i == 0 {
				b.WriteString(tok)
			} else {
				b.WriteString("[" + tok + "]")
			}
		}
		paths = append(paths, b.String())
	}
	if o.op.Settings.Key.Carrier == model.CarrierForm {
		paths = append(paths, o.op.Settings.Key.Field)
	}
	return sortedStrings(paths)
}

// emitTreeBody decodes a bracketed form body into r.Body and adds its sorted fields to the
// fingerprint (as a flat form's), leaving out the excluded ones.
func (p *plan) emitTreeBody(b *jen.Group, o *opPlan, frameRaw bool) {
	b.Id(o.bodyT.decodeFn).Call(jen.Id("in").Dot("FormTree").Call(), o.bodyRef())
	if frameRaw {
		b.Id("in").Dot("RawBody").Call()
		return
	}
	b.Id("in").Dot("FormTreeBody").Call(lits(o.treeExcl)...)
}

// ft is the generated code's FormTree.
func ft() *jen.Statement { return jen.Id("f") }

// emitTreeDecoder writes decode<T>(f, v) for a struct of a bracketed form body: a loop over its
// members, like the JSON struct decoders.
func (p *plan) emitTreeDecoder(f *jen.File, t *tinfo) {
	f.Func().Id(t.decodeFn).Params(
		jen.Id("f").Op("*").Qual(pkgGen, "FormTree"),
		jen.Id("v").Op("*").Id(t.name),
	).BlockFunc(func(grp *jen.Group) {
		bits, required := fieldBits(t)
		n := len(t.fields)
		seenDecl(grp, n)
		names := declaredNames(t)
		other := func(b *jen.Group) {
			switch {
			case t.addl != nil:
				if len(names) > 0 {
					b.Add(ft()).Dot("Undeclared").Call(names...)
				}
				m := jen.Id("v").Dot(t.extra)
				b.If(m.Clone().Op("==").Nil()).Block(m.Clone().Op("=").Map(jen.String()).Add(t.addl.code()).Values())
				p.treeEntry(b, t.addl, m, 1)
			case t.extra != "":
				b.Add(ft()).Dot("Unknown").Call(append([]jen.Code{jen.Op("&").Id("v").Dot(t.extra)}, names...)...)
			default:
				b.Add(ft()).Dot("Reject").Call()
			}
		}
		grp.For(ft().Dot("BeginObject").Call(), ft().Dot("NextMember").Call(), jen.Empty()).BlockFunc(func(loop *jen.Group) {
			if n == 0 {
				other(loop)
				return
			}
			loop.Switch(ft().Dot("Key").Call()).BlockFunc(func(sw *jen.Group) {
				for i, fl := range t.fields {
					sw.Case(jen.Lit(fl.p.Name)).BlockFunc(func(cg *jen.Group) { p.treeField(cg, fl, seenRef(n, bits[i])) })
				}
				sw.Default().BlockFunc(other)
			})
		})
		grp.Add(ft()).Dot("EndObject").Call()
		requiredCalls(grp, ft(), n, required)
	})
	f.Line()
}

// treeField decodes the current member into v.<field>, marking its seen bit.
func (p *plan) treeField(grp *jen.Group, fl *field, seen []jen.Code) {
	dst := jen.Id("v").Dot(fl.name)
	t := fl.t
	if scalar(t) && t.kind != kRaw && t.kind != kUnset {
		read := readExpr(t, ft().Dot("Scalar").Call(seen...))
		if fl.ptr && t.kind == kEnum {
			// (*T)(canonical.Ptr(string)): Ptr is compiled once, not once per enum type.
			var vals []jen.Code
			for _, v := range t.s.Enum {
				vals = append(vals, jen.Lit(v))
			}
			read = jen.Parens(jen.Op("*").Id(t.name)).Call(jen.Qual(pkgCanonical, "Ptr").Call(ft().Dot("Scalar").Call(seen...).Dot("Enum").Call(vals...)))
			grp.Add(dst.Clone()).Op("=").Add(read)
			return
		}
		if fl.ptr {
			grp.Add(dst.Clone()).Op("=").Qual(pkgCanonical, "Ptr").Call(read)
			dst = jen.Op("*").Add(dst)
		} else {
			grp.Add(dst.Clone()).Op("=").Add(read)
		}
		for _, c := range checks(t, dst, ft()) {
			grp.Add(c)
		}
		return
	}
	first := ft().Dot("Field").Call(seen...)
	if fl.ptr {
		// A present struct or Unsettable member: allocated, then decoded in place.
		grp.Add(dst.Clone()).Op("=").New(t.code())
		if t.kind == kStruct {
			grp.Id(t.decodeFn).Call(first, dst)
			return
		}
	}
	p.treeInto(grp, t, dst, 1, first)
}

// treeInto emits statements that decode the current member (first is the FormTree, or the call
// that marks the member) into dst, an addressable expression of t's type; depth keeps loop
// variables unique in nested arrays and maps.
func (p *plan) treeInto(grp *jen.Group, t *tinfo, dst *jen.Statement, depth int, first *jen.Statement) {
	switch t.kind {
	case kStruct:
		grp.Id(t.decodeFn).Call(first, jen.Op("&").Add(dst))
	case kUnset:
		unset := dst.Clone().Dot("Unset")
		grp.If(unset.Clone().Op("=").Add(first).Dot("Unset").Call(), jen.Op("!").Add(unset)).BlockFunc(func(b *jen.Group) {
			p.treeInto(b, t.elem, dst.Clone().Dot("Value"), depth, ft())
		})
	case kSlice:
		// Present but empty is not possible in a form, yet the value is non-nil when present,
		// as in a JSON body.
		grp.Add(dst.Clone()).Op("=").Add(t.code()).Values()
		grp.For(first.Clone().Dot("BeginArray").Call(), ft().Dot("NextElement").Call(), jen.Empty()).BlockFunc(func(lb *jen.Group) {
			el := t.elem
			switch {
			case el.kind == kStruct:
				// Decoded in place (not canonical.Grow, which is compiled once per element type).
				lb.Add(dst.Clone()).Op("=").Append(dst.Clone(), jen.Id(el.name).Values())
				lb.Id(el.decodeFn).Call(ft(), jen.Op("&").Add(dst.Clone()).Index(jen.Len(dst.Clone()).Op("-").Lit(1)))
			case scalar(el) && el.kind != kRaw && el.kind != kUnset:
				appendItem(lb, el, ft().Dot("Text").Call(), ft(), dst)
			default:
				e := fmt.Sprintf("e%d", depth)
				lb.Var().Id(e).Add(el.code())
				p.treeInto(lb, el, jen.Id(e), depth+1, ft())
				lb.Add(dst.Clone()).Op("=").Append(dst.Clone(), jen.Id(e))
			}
		})
		grp.Add(ft()).Dot("EndArray").Call()
		for _, c := range checks(t, dst, ft()) {
			grp.Add(c)
		}
	case kMap:
		grp.Add(dst.Clone()).Op("=").Add(t.code()).Values()
		grp.For(first.Clone().Dot("BeginObject").Call(), ft().Dot("NextMember").Call(), jen.Empty()).BlockFunc(func(lb *jen.Group) {
			p.treeEntry(lb, t.elem, dst, depth)
		})
		grp.Add(ft()).Dot("EndObject").Call()
	case kRaw:
		grp.Add(dst).Op("=").Add(first).Dot("Raw").Call()
	default:
		grp.Add(dst.Clone()).Op("=").Add(readExpr(t, first.Clone().Dot("Text").Call()))
		for _, c := range checks(t, dst, ft()) {
			grp.Add(c)
		}
	}
}

// treeEntry decodes the current member into the (allocated) map m under its key; keys are
// unique in a FormTree (a key given twice is one member).
func (p *plan) treeEntry(b *jen.Group, el *tinfo, m *jen.Statement, depth int) {
	key := ft().Dot("Key").Call()
	cs := checks(el, jen.Id(fmt.Sprintf("e%d", depth)), ft())
	plain := scalar(el) && el.kind != kRaw && el.kind != kUnset
	switch {
	case plain && len(cs) == 0:
		b.Add(m.Clone()).Index(key).Op("=").Add(readExpr(el, ft().Dot("Text").Call()))
		return
	case el.kind == kRaw:
		b.Add(m.Clone()).Index(key).Op("=").Add(ft()).Dot("Raw").Call()
		return
	}
	k, e := fmt.Sprintf("k%d", depth), fmt.Sprintf("e%d", depth)
	b.Id(k).Op(":=").Add(key)
	if plain {
		b.Id(e).Op(":=").Add(readExpr(el, ft().Dot("Text").Call()))
		for _, c := range cs {
			b.Add(c)
		}
	} else {
		b.Var().Id(e).Add(el.code())
		p.treeInto(b, el, jen.Id(e), depth+1, ft())
	}
	b.Add(m.Clone()).Index(jen.Id(k)).Op("=").Id(e)
}

// emitFormBody decodes a flat application/x-www-form-urlencoded body (gen.Form: strict
// percent-decoding, UTF-8) into r.Body. A declared scalar field appears at most once; an array
// of scalars is the field repeated (name or name[], in body order) or indexed (name[N], in index
// order), read after the loop by List. Undeclared fields are refused for closed objects and
// otherwise left to the fingerprint, which covers every field.
func (p *plan) emitFormBody(grp *jen.Group, o *opPlan) {
	t := o.bodyT
	bits, required := fieldBits(t)
	n := len(t.fields)
	grp.Id("v").Op(":=").Add(o.bodyRef())
	seenDecl(grp, n)
	grp.Id("f").Op(":=").Id("in").Dot("Form").Call()
	var exact, arrays []int // fields matched by their name, and by their name before '['
	for i, fl := range t.fields {
		if fl.t.kind == kSlice {
			arrays = append(arrays, i)
		} else {
			exact = append(exact, i)
		}
	}
	field := func(cb *jen.Group, i int) {
		fl := t.fields[i]
		seen := seenRef(n, bits[i])
		dst := jen.Id("v").Dot(fl.name)
		switch {
		case fl.t.kind == kSlice:
			// Read by List after the loop, in element order.
			cb.Id("f").Dot("Item").Call(seen...)
		case fl.t.kind == kRaw:
			// A schema-less field holds its text as a JSON string.
			cb.Add(dst).Op("=").Qual(pkgCanonical, "AppendString").Call(jen.Nil(), jen.Id("f").Dot("Once").Call(seen...).Dot("Str").Call())
		case fl.ptr:
			cb.Add(dst.Clone()).Op("=").Qual(pkgCanonical, "Ptr").Call(readExpr(fl.t, jen.Id("f").Dot("Once").Call(seen...)))
			for _, c := range checks(fl.t, jen.Op("*").Add(dst.Clone()), jen.Id("f")) {
				cb.Add(c)
			}
		default:
			convert(cb, fl.t, jen.Id("f").Dot("Once").Call(seen...), jen.Id("f"), dst)
		}
	}
	names := declaredNames(t)
	other := func(b *jen.Group) {
		switch {
		case t.s.ClosedObject:
			b.Id("f").Dot("Reject").Call()
		case len(names) > 0:
			b.Id("f").Dot("Undeclared").Call(names...)
		}
	}
	byBase := func(b *jen.Group) {
		if len(arrays) == 0 {
			other(b)
			return
		}
		b.Switch(jen.Id("f").Dot("Base").Call()).BlockFunc(func(sw *jen.Group) {
			for _, i := range arrays {
				sw.Case(jen.Lit(t.fields[i].p.Name)).BlockFunc(func(cb *jen.Group) { field(cb, i) })
			}
			if t.s.ClosedObject || len(names) > 0 {
				sw.Default().BlockFunc(other)
			}
		})
	}
	grp.For(jen.Id("f").Dot("Next").Call()).BlockFunc(func(loop *jen.Group) {
		if len(exact) == 0 {
			byBase(loop)
			return
		}
		loop.Switch(jen.Id("f").Dot("Name").Call()).BlockFunc(func(sw *jen.Group) {
			for _, i := range exact {
				sw.Case(jen.Lit(t.fields[i].p.Name)).BlockFunc(func(cb *jen.Group) { field(cb, i) })
			}
			if len(arrays) > 0 || t.s.ClosedObject || len(names) > 0 {
				sw.Default().BlockFunc(byBase)
			}
		})
	})
	for _, i := range arrays {
		fl := t.fields[i]
		dst := jen.Id("v").Dot(fl.name)
		grp.If(jen.Id("f").Dot("List").Call(jen.Lit(fl.p.Name))).BlockFunc(func(b *jen.Group) {
			b.For(jen.Id("f").Dot("NextItem").Call()).BlockFunc(func(lb *jen.Group) { appendItem(lb, fl.t.elem, jen.Id("f"), jen.Id("f"), dst) })
			for _, c := range checks(fl.t, dst, jen.Id("f")) {
				b.Add(c)
			}
		})
	}
	requiredCalls(grp, jen.Id("f"), n, required)
}
