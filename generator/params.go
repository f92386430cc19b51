package generator

import (
	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
)

// Parameters and form fields are text. gen.Params and gen.Form read them with sticky errors:
// select a parameter or field, convert it (readExpr: the text forms of OpenAPI's simple and form
// styles, decimal integers, JSON-style numbers, true/false), then check it (checks), all on the
// same reader, whose first error names the parameter ("/query/limit", `query parameter "limit":
// must be at most 100`) or the form field ("/amount").

// emitParams reads the path, query and header parameters into r.Params.
func (g *gen) emitParams(grp *jen.Group, o *opPlan) {
	if len(o.pparams) == 0 {
		return
	}
	grp.Id("p").Op(":=").Id("in").Dot("Params").Call()
	p := func() *jen.Statement { return jen.Id("p") }
	for _, pp := range o.pparams {
		dst := jen.Id("r").Dot("Params").Dot(pp.p.GoName)
		name := jen.Lit(pp.p.Name)
		req := jen.Lit(pp.p.Required)
		switch {
		case pp.p.In == model.InPath:
			convert(grp, pp.t, p().Dot("Path").Call(name), p(), dst)
		case pp.t.kind == kSlice:
			sel := p().Dot("HeaderList").Call(name, req)
			if pp.p.In == model.InQuery {
				sel = p().Dot("QueryList").Call(name, jen.Lit(listSep(pp.p)), req)
			}
			items := func(b *jen.Group, sel jen.Code) {
				b.For(sel, p().Dot("Next").Call(), jen.Empty()).BlockFunc(func(lb *jen.Group) { appendItem(lb, pp.t.elem, p(), p(), dst) })
			}
			cs := checks(pp.t, dst, p())
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
			sel := p().Dot("Query").Call(name, req)
			if pp.p.In == model.InHeader {
				sel = p().Dot("Header").Call(name, req)
			}
			if !pp.ptr {
				convert(grp, pp.t, sel, p(), dst)
				continue
			}
			grp.If(sel.Dot("Present").Call()).BlockFunc(func(b *jen.Group) {
				b.Add(dst.Clone()).Op("=").Qual(pkgCanonical, "Ptr").Call(readExpr(pp.t, p()))
				for _, c := range checks(pp.t, jen.Op("*").Add(dst.Clone()), p()) {
					b.Add(c)
				}
			})
		}
	}
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
