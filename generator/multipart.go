package generator

import (
	"strings"

	"github.com/dave/jennifer/jen"
)

// emitMultipartBody decodes a multipart/form-data body (gen.Multipart) into r.Body, part by part
// in body order, switching on the part's name: a file part (string, format binary) is a
// gen.File, an array of them the part repeated; a scalar is a text part converted and checked
// like a form field, an array of scalars the part repeated; a schema-less value is a JSON part
// or text (Raw); objects, maps and other arrays are JSON parts decoded strictly by the JSON
// decoders, also when they arrive as one text part per nested field (metadata[order],
// accounting.class_id: gen.Input.Multipart's nested names). Undeclared parts are refused for
// closed objects and kept for the fingerprint otherwise. Parts above limits.part are refused
// with 413.
func (p *plan) emitMultipartBody(grp *jen.Group, o *opPlan) {
	t := o.bodyT
	bits, required := fieldBits(t)
	n := len(t.fields)
	m := func() *jen.Statement { return jen.Id("m") }
	grp.Id("v").Op(":=").Add(o.bodyRef())
	seenDecl(grp, n)
	args := []jen.Code{jen.Lit(int(o.op.Settings.PartLimit))}
	for _, name := range nestedParts(t) {
		args = append(args, jen.Lit(name))
	}
	grp.Id("m").Op(":=").Id("in").Dot("Multipart").Call(args...)
	var after []jen.Code // array checks, once every part is read
	field := func(cb *jen.Group, i int) {
		fl := t.fields[i]
		seen := seenRef(n, bits[i])
		dst := jen.Id("v").Dot(fl.name)
		switch {
		case fl.t.kind == kFile && fl.ptr:
			cb.Add(dst).Op("=").Qual(pkgCanonical, "Ptr").Call(m().Dot("File").Call(seen...))
		case fl.t.kind == kFile:
			cb.Add(dst).Op("=").Add(m().Dot("File").Call(seen...))
		case fl.t.kind == kSlice && fl.t.elem.kind == kFile:
			cb.Add(dst.Clone()).Op("=").Append(dst.Clone(), m().Dot("FileItem").Call(seen...))
		case fl.t.kind == kSlice && formScalar(fl.t.elem):
			appendItem(cb, fl.t.elem, m().Dot("Item").Call(seen...), m(), dst)
			if cs := checks(fl.t, dst, m()); len(cs) > 0 {
				after = append(after, jen.If(dst.Clone().Op("!=").Nil()).Block(cs...))
			}
		case fl.t.kind == kRaw:
			cb.Add(dst).Op("=").Add(m().Dot("Raw").Call(seen...))
		case formScalar(fl.t) && fl.three:
			// A text part has no null: a part sent holds a value.
			cb.Add(dst.Clone()).Op("=").Op("&").Qual(pkgCanonical, "Nullable").Types(fl.t.code()).Values()
			convert(cb, fl.t, m().Dot("Text").Call(seen...), m(), dst.Clone().Dot("Value"))
		case formScalar(fl.t) && fl.ptr:
			cb.Add(dst.Clone()).Op("=").Qual(pkgCanonical, "Ptr").Call(readExpr(fl.t, m().Dot("Text").Call(seen...)))
			for _, c := range checks(fl.t, jen.Op("*").Add(dst.Clone()), m()) {
				cb.Add(c)
			}
		case formScalar(fl.t):
			convert(cb, fl.t, m().Dot("Text").Call(seen...), m(), dst)
		default:
			// A JSON part, read by the JSON decoders (d is what they read from).
			cb.Id("d").Op(":=").Add(m().Dot("JSON").Call(seen...))
			p.decodeField(cb, fl, jen.Id("d"))
		}
	}
	grp.For(m().Dot("Next").Call()).BlockFunc(func(loop *jen.Group) {
		loop.Switch(m().Dot("Name").Call()).BlockFunc(func(sw *jen.Group) {
			for i, fl := range t.fields {
				sw.Case(jen.Lit(fl.p.Name)).BlockFunc(func(cb *jen.Group) { field(cb, i) })
			}
			sw.Default().BlockFunc(func(d *jen.Group) {
				if t.extra != "" && t.addl == nil {
					d.Add(m().Dot("Unknown").Call(append([]jen.Code{jen.Op("&").Id("v").Dot(t.extra)}, declaredNames(t)...)...))
				} else {
					d.Add(m().Dot("Reject").Call())
				}
			})
		})
	})
	for _, c := range after {
		grp.Add(c)
	}
	if len(required) == 0 {
		grp.Add(m().Dot("End").Call())
		return
	}
	requiredCalls(grp, m(), n, required)
}

// nestedParts names the members of a multipart body that are read as JSON parts and hold
// objects, maps or arrays, so that their nested text parts (metadata[order], metadata.order)
// are read as their value too; not one whose nested names a declared member spells literally
// (a property named "metadata[order]" beside metadata keeps its own part).
func nestedParts(t *tinfo) []string {
	var names []string
	for _, fl := range t.fields {
		switch fl.t.kind {
		case kStruct, kMap:
		case kSlice:
			if fl.t.elem.kind == kFile || formScalar(fl.t.elem) {
				continue // repeated parts
			}
		default:
			continue
		}
		literal := false
		for _, other := range t.fields {
			if strings.HasPrefix(other.p.Name, fl.p.Name+"[") || strings.HasPrefix(other.p.Name, fl.p.Name+".") {
				literal = true
			}
		}
		if !literal {
			names = append(names, fl.p.Name)
		}
	}
	return names
}
