package generator

import (
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
)

// Parameters and form fields are text. gen.Params and gen.Form read them with sticky errors:
// select a parameter or field, convert it (readExpr: the text forms of OpenAPI's simple and form
// styles, decimal integers, JSON-style numbers, true/false), then check it (checks), all on the
// same reader, whose first error names the parameter ("/query/limit", `query parameter "limit":
// must be at most 100`) or the form field ("/amount").

// emitParams reads the path, query and header parameters into r.Params.
func (p *plan) emitParams(grp *jen.Group, o *opPlan) {
	if len(o.pparams) == 0 {
		return
	}
	grp.Id("p").Op(":=").Id("in").Dot("Params").Call()
	par := func() *jen.Statement { return jen.Id("p") }
	for _, pp := range o.pparams {
		dst := jen.Id("r").Dot("Params").Dot(pp.p.GoName)
		name := jen.Lit(pp.p.Name)
		req := jen.Lit(pp.p.Required)
		if pp.deep {
			p.emitDeepObject(grp, o, pp)
			continue
		}
		switch {
		case pp.union != nil && pp.p.In == model.InPath:
			grp.Add(dst).Op("=").Add(unionRead(pp.union, par().Dot("Path").Call(name)))
		case pp.p.In == model.InPath:
			convert(grp, pp.t, par().Dot("Path").Call(name), par(), dst)
		case pp.t.kind == kSlice:
			sel := par().Dot("HeaderList").Call(name, req)
			if pp.p.In == model.InQuery {
				sel = par().Dot("QueryList").Call(name, jen.Lit(listSep(pp.p)), req)
			}
			items := func(b *jen.Group, sel jen.Code) {
				b.For(sel, par().Dot("Next").Call(), jen.Empty()).BlockFunc(func(lb *jen.Group) { appendItem(lb, pp.t.elem, par(), par(), dst) })
			}
			cs := checks(pp.t, dst, par())
			if len(cs) == 0 {
				items(grp, sel)
				continue
			}
			// minItems and maxItems apply to a present array only.
			grp.If(sel.Dot("Present").Call()).BlockFunc(func(b *jen.Group) {
				items(b, jen.Empty())
				for _, c := range cs {
					b.Add(c)
				}
			})
		default:
			sel := par().Dot("Query").Call(name, req)
			if pp.p.In == model.InHeader {
				sel = par().Dot("Header").Call(name, req)
			}
			switch {
			case pp.union != nil && !pp.ptr:
				grp.Add(dst).Op("=").Add(unionRead(pp.union, sel))
				continue
			case pp.union != nil:
				grp.If(sel.Dot("Present").Call()).Block(
					dst.Clone().Op("=").Qual(pkgCanonical, "Ptr").Call(unionRead(pp.union, par())))
				continue
			case !pp.ptr:
				convert(grp, pp.t, sel, par(), dst)
				continue
			}
			grp.If(sel.Dot("Present").Call()).BlockFunc(func(b *jen.Group) {
				b.Add(dst.Clone()).Op("=").Qual(pkgCanonical, "Ptr").Call(readExpr(pp.t, par()))
				for _, c := range checks(pp.t, jen.Op("*").Add(dst.Clone()), par()) {
					b.Add(c)
				}
			})
		}
	}
}

// unionRead reads the selected parameter of a oneOf/anyOf of scalars through reader: its text,
// which must satisfy one of the members (gen.Params.AnyOf, with each member's type and
// constraints as a gen.Scalar).
func unionRead(members []*model.Schema, reader *jen.Statement) jen.Code {
	var args []jen.Code
	for _, m := range members {
		d := jen.Dict{jen.Id("Type"): jen.Lit(string(m.Type))}
		if m.Type == model.TypeInteger && m.Format == "int32" {
			d[jen.Id("Int32")] = jen.True()
		}
		enum := m.Enum
		if m.Type != model.TypeString {
			enum = m.EnumJSON
		}
		if m.Type == model.TypeString && m.MaxLength != nil && *m.MaxLength == 0 {
			enum = []string{""} // Scalar's MaxLength 0 is "no maximum"
		}
		if len(enum) > 0 {
			var vals []jen.Code
			for _, v := range enum {
				vals = append(vals, jen.Lit(v))
			}
			d[jen.Id("Enum")] = jen.Index().String().Values(vals...)
		}
		if m.Type == model.TypeString {
			if m.MinLength != nil && *m.MinLength > 0 {
				d[jen.Id("MinLength")] = jen.Lit(int(*m.MinLength))
			}
			if m.MaxLength != nil && *m.MaxLength > 0 {
				d[jen.Id("MaxLength")] = jen.Lit(int(*m.MaxLength))
			}
			if m.Pattern != "" {
				d[jen.Id("Pattern")] = jen.Lit(m.Pattern)
			}
		}
		if m.Type == model.TypeInteger || m.Type == model.TypeNumber {
			if m.Minimum != nil {
				d[jen.Id("Minimum")] = jen.Qual(pkgCanonical, "Ptr").Call(jen.Float64().Call(jen.Lit(*m.Minimum)))
			}
			if m.Maximum != nil {
				d[jen.Id("Maximum")] = jen.Qual(pkgCanonical, "Ptr").Call(jen.Float64().Call(jen.Lit(*m.Maximum)))
			}
			if m.ExclusiveMin && m.Minimum != nil {
				d[jen.Id("ExclusiveMin")] = jen.True()
			}
			if m.ExclusiveMax && m.Maximum != nil {
				d[jen.Id("ExclusiveMax")] = jen.True()
			}
			if m.MultipleOf != nil {
				d[jen.Id("MultipleOf")] = jen.Qual(pkgCanonical, "Ptr").Call(jen.Float64().Call(jen.Lit(*m.MultipleOf)))
			}
		}
		args = append(args, jen.Qual(pkgGen, "Scalar").Values(d))
	}
	return jen.Add(reader).Dot("AnyOf").Call(args...)
}

// emitDeepObject decodes a deepObject query parameter (gen.Params.DeepObject) into its struct
// or map: one switch on the member path ("status", "created][gte") over every leaf of the
// schema, maps and undeclared members in the default branch, then the required members of each
// object present, then the canonical value into the fingerprint (after the body).
func (p *plan) emitDeepObject(grp *jen.Group, o *opPlan, pp *paramPlan) {
	par := func() *jen.Statement { return jen.Id("p") }
	dst := jen.Id("r").Dot("Params").Dot(pp.p.GoName)
	grp.If(par().Dot("DeepObject").Call(jen.Lit(pp.p.Name), jen.Lit(pp.p.Required)).Dot("Present").Call()).BlockFunc(func(b *jen.Group) {
		// Members are set through dst whether it is a value or a pointer (Go dereferences a
		// pointer to a struct for a field selector).
		switch {
		case pp.t.kind == kMap:
			b.Add(dst.Clone()).Op("=").Add(pp.t.code()).Values()
		case pp.ptr:
			b.Add(dst.Clone()).Op("=").New(pp.t.code())
		}
		var cases []jen.Code
		var maps []jen.Code // default-branch statements: map entries, then Undeclared
		var required []jen.Code
		p.deepMembers(pp.t, "", func() *jen.Statement { return dst.Clone() }, nil, nil, &cases, &maps, &required)
		b.For(par().Dot("NextMember").Call()).Block(
			jen.Switch(par().Dot("Member").Call()).BlockFunc(func(sw *jen.Group) {
				for _, c := range cases {
					sw.Add(c)
				}
				sw.Default().BlockFunc(func(d *jen.Group) {
					for _, m := range maps {
						d.Add(m)
					}
					d.Add(par().Dot("Undeclared").Call())
				})
			}),
		)
		for _, r := range required {
			b.Add(r)
		}
		start := jen.Id("in").Dot("QueryObjectStart").Call(jen.Lit(pp.p.Name))
		value := p.appendExpr(pp.canon, dst.Clone(), start, 0)
		if pp.ptr {
			value = jen.Id(pp.canon.fn.name).Call(start, dst.Clone())
		}
		b.Id("in").Dot("QueryObjectEnd").Call(value)
	})
}

// deepMembers plans the members of the deepObject value at path prefix ("" or "created]["):
// val is the addressable Go value of t there, ensure the statements that allocate the optional
// objects on the way and present the conditions that they were. Leaves become switch cases, map entries default-branch statements (each
// continues the loop), required members Required calls (guarded by ensure's objects being
// present).
func (p *plan) deepMembers(t *tinfo, prefix string, val func() *jen.Statement, ensure []jen.Code, present []jen.Code, cases, maps, required *[]jen.Code) {
	par := func() *jen.Statement { return jen.Id("p") }
	mapEntry := func(elem *tinfo, m *jen.Statement, at string, ensure []jen.Code) {
		*maps = append(*maps, jen.If(jen.List(jen.Id("k"), jen.Id("ok")).Op(":=").Add(par()).Dot("MapKey").Call(jen.Lit(at)), jen.Id("ok")).BlockFunc(func(b *jen.Group) {
			for _, e := range ensure {
				b.Add(e)
			}
			b.If(m.Clone().Op("==").Nil()).Block(m.Clone().Op("=").Map(jen.String()).Add(elem.code()).Values())
			if elem.kind == kNullable {
				// Text has no null: a value sent is a value.
				b.Var().Id("e").Add(elem.code())
				convert(b, elem.elem, par().Dot("Once").Call(), par(), jen.Id("e").Dot("Value"))
				b.Add(m.Clone()).Index(jen.Id("k")).Op("=").Id("e")
			} else if elem.kind == kRaw {
				b.Add(m.Clone()).Index(jen.Id("k")).Op("=").Qual(pkgCanonical, "AppendString").Call(jen.Nil(), par().Dot("Once").Call().Dot("Str").Call())
			} else if cs := checks(elem, jen.Id("e"), par()); len(cs) > 0 {
				b.Id("e").Op(":=").Add(readExpr(elem, par().Dot("Once").Call()))
				for _, c := range cs {
					b.Add(c)
				}
				b.Add(m.Clone()).Index(jen.Id("k")).Op("=").Id("e")
			} else {
				b.Add(m.Clone()).Index(jen.Id("k")).Op("=").Add(readExpr(elem, par().Dot("Once").Call()))
			}
			b.Continue()
		}))
	}
	if t.kind == kMap {
		mapEntry(t.elem, val(), strings.TrimSuffix(prefix, "]["), ensure)
		return
	}
	var names []jen.Code
	for _, f := range t.fields {
		if f.p.Required {
			names = append(names, jen.Lit(f.p.Name))
		}
	}
	if len(names) > 0 {
		call := par().Dot("Required").Call(append([]jen.Code{jen.Lit(prefix)}, names...)...)
		*required = append(*required, guard(present, call))
	}
	for _, f := range t.fields {
		path := prefix + f.p.Name
		dst := val().Dot(f.name)
		fensure, fpresent := ensure, present
		if f.three {
			// A query has no null: a member that is sent holds its value.
			fensure = append(slices.Clone(ensure), jen.If(dst.Clone().Op("==").Nil()).Block(
				dst.Clone().Op("=").Op("&").Qual(pkgCanonical, "Nullable").Types(f.t.code()).Values()))
			fpresent = append(slices.Clone(present), dst.Clone().Op("!=").Nil())
			dst = dst.Clone().Dot("Value")
		}
		switch {
		case f.t.kind == kStruct:
			sub, cond := fensure, fpresent
			next := func() *jen.Statement { return val().Dot(f.name) }
			if f.three {
				next = func() *jen.Statement { return val().Dot(f.name).Dot("Value") }
			}
			if f.ptr {
				sub = append(slices.Clone(ensure), jen.If(dst.Clone().Op("==").Nil()).Block(dst.Clone().Op("=").New(jen.Id(f.t.name))))
				cond = append(slices.Clone(present), dst.Clone().Op("!=").Nil())
			}
			p.deepMembers(f.t, path+"][", next, sub, cond, cases, maps, required)
		case f.t.kind == kMap:
			mapEntry(f.t.elem, dst, path, fensure)
		default:
			*cases = append(*cases, jen.Case(jen.Lit(path)).BlockFunc(func(b *jen.Group) {
				for _, e := range fensure {
					b.Add(e)
				}
				switch {
				case f.t.kind == kSlice:
					b.Add(dst.Clone()).Op("=").Add(f.t.code()).Values()
					b.For(par().Dot("Values").Call(), par().Dot("Next").Call(), jen.Empty()).BlockFunc(func(lb *jen.Group) {
						appendItem(lb, f.t.elem, par(), par(), dst)
					})
					for _, c := range checks(f.t, dst, par()) {
						b.Add(c)
					}
				case f.t.kind == kRaw:
					b.Add(dst).Op("=").Qual(pkgCanonical, "AppendString").Call(jen.Nil(), par().Dot("Once").Call().Dot("Str").Call())
				case f.ptr:
					b.Add(dst.Clone()).Op("=").Qual(pkgCanonical, "Ptr").Call(readExpr(f.t, par().Dot("Once").Call()))
					for _, c := range checks(f.t, jen.Op("*").Add(dst.Clone()), par()) {
						b.Add(c)
					}
				default:
					convert(b, f.t, par().Dot("Once").Call(), par(), dst)
				}
			}))
		}
	}
	if t.addl != nil {
		mapEntry(t.addl, val().Dot(t.extra), strings.TrimSuffix(prefix, "]["), ensure)
	}
}

// guard runs call when every condition holds (a nested optional object's required members are
// checked only when the object was sent).
func guard(present []jen.Code, call jen.Code) jen.Code {
	if len(present) == 0 {
		return call
	}
	cond := jen.Add(present[0])
	for _, c := range present[1:] {
		cond = cond.Op("&&").Add(c)
	}
	return jen.If(cond).Block(call)
}

// listSep separates the items of one value of an array query parameter: "" when each value is
// one item (explode), else by style.
func listSep(p *model.Param) string {
	switch {
	case p.Explode:
		return ""
	case p.Style == "pipeDelimited":
		return "|"
	case p.Style == "spaceDelimited":
		return " "
	}
	return ","
}

// convert reads a text value into dst through first (the reader call that selects the value)
// and checks it with r.
func convert(grp *jen.Group, t *tinfo, first *jen.Statement, r jen.Code, dst *jen.Statement) {
	grp.Add(dst.Clone()).Op("=").Add(readExpr(t, first))
	for _, c := range checks(t, dst, r) {
		grp.Add(c)
	}
}

// appendItem appends an item read through first, converted and checked with r, to the slice dst.
func appendItem(grp *jen.Group, el *tinfo, first *jen.Statement, r jen.Code, dst *jen.Statement) {
	if el.kind == kNullable {
		// Text has no null: an item sent is a value.
		grp.Var().Id("e").Add(el.code())
		convert(grp, el.elem, first, r, jen.Id("e").Dot("Value"))
		grp.Add(dst.Clone()).Op("=").Append(dst.Clone(), jen.Id("e"))
		return
	}
	if cs := checks(el, jen.Id("e"), r); len(cs) > 0 {
		grp.Id("e").Op(":=").Add(readExpr(el, first))
		for _, c := range cs {
			grp.Add(c)
		}
		grp.Add(dst.Clone()).Op("=").Append(dst.Clone(), jen.Id("e"))
		return
	}
	grp.Add(dst.Clone()).Op("=").Append(dst.Clone(), readExpr(el, first))
}
