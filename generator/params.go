package generator

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
)

// convert emits statements that parse the text src into dst (t is a scalar kind), reporting a
// bad value with fail. The text forms are those of OpenAPI's simple and form styles: decimal
// integers, JSON-style numbers, true/false.
func convert(grp *jen.Group, t *tinfo, src jen.Code, dst *jen.Statement, fail func(reason string) jen.Code) {
	switch t.kind {
	case kString:
		grp.Add(dst.Clone()).Op("=").Add(src)
	case kEnum:
		grp.Add(dst.Clone()).Op("=").Id(t.name).Call(src)
	case kInt64, kInt32:
		bits := 64
		if t.kind == kInt32 {
			bits = 32
		}
		grp.List(jen.Id("n"), jen.Err()).Op(":=").Qual("strconv", "ParseInt").Call(src, jen.Lit(10), jen.Lit(bits))
		grp.If(jen.Err().Op("!=").Nil()).Block(fail(fmt.Sprintf("must be an integer (int%d)", bits)))
		if bits == 32 {
			grp.Add(dst.Clone()).Op("=").Int32().Call(jen.Id("n"))
		} else {
			grp.Add(dst.Clone()).Op("=").Id("n")
		}
	case kFloat:
		grp.List(jen.Id("n"), jen.Err()).Op(":=").Qual("strconv", "ParseFloat").Call(src, jen.Lit(64))
		grp.If(jen.Err().Op("!=").Nil().Op("||").Qual("math", "IsInf").Call(jen.Id("n"), jen.Lit(0)).Op("||").Qual("math", "IsNaN").Call(jen.Id("n"))).
			Block(fail("must be a number"))
		grp.Add(dst.Clone()).Op("=").Id("n")
	case kBool:
		grp.Switch(src).Block(
			jen.Case(jen.Lit("true")).Block(jen.Add(dst.Clone()).Op("=").True()),
			jen.Case(jen.Lit("false")).Block(jen.Add(dst.Clone()).Op("=").False()),
			jen.Default().Block(fail("must be true or false")),
		)
	}
	for _, c := range checks(t, dst, fail) {
		grp.Add(c)
	}
}

// bodyError is the *canonical.Error literal for a non-JSON value (a form field or a parameter).
func bodyError(pointer string, reason string) jen.Code {
	return jen.Op("&").Qual(pkgCanonical, "Error").Values(jen.Dict{
		jen.Id("Pointer"): jen.Lit(pointer),
		jen.Id("Reason"):  jen.Lit(reason),
	})
}

// paramError is the *runtime.BodyError literal for a bad parameter: its pointer is
// "/<in>/<name>" (the runtime contract, runtime.BodyError) and its reason, which is the whole
// problem detail, names the parameter ("query parameter \"limit\": must be an integer"). A
// *canonical.Error would read "invalid body at document root (byte 0)", which is wrong for a
// parameter.
func paramError(p *model.Param, reason string) jen.Code {
	return jen.Op("&").Qual(pkgGen, "BodyError").Values(jen.Dict{
		jen.Id("At"):     jen.Lit("/" + string(p.In) + "/" + p.Name),
		jen.Id("Reason"): jen.Lit(fmt.Sprintf("%s parameter %q: %s", p.In, p.Name, reason)),
	})
}

// emitParamParser writes parse<Op>Params(r): path, query and header parameters converted and
// checked; a bad or missing value is a *runtime.BodyError (400 body-invalid) whose pointer is
// "/<in>/<name>" and whose reason names the parameter.
func (g *gen) emitParamParser(f *jen.File, o *opPlan) {
	comment(f, "%s reads the path, query and header parameters of %s.", o.parseParams, o.op.ID)
	f.Func().Id(o.parseParams).Params(jen.Id("r").Op("*").Qual("net/http", "Request")).Params(jen.Id(o.params), jen.Error()).BlockFunc(func(grp *jen.Group) {
		grp.Var().Id("p").Id(o.params)
		hasQuery := false
		for _, pp := range o.pparams {
			if pp.p.In == model.InQuery {
				hasQuery = true
			}
		}
		if hasQuery {
			grp.Id("q").Op(":=").Id("r").Dot("URL").Dot("Query").Call()
		}
		for _, pp := range o.pparams {
			pp := pp
			fail := func(reason string) jen.Code {
				return jen.Return(jen.Id("p"), paramError(pp.p, reason))
			}
			dst := jen.Id("p").Dot(pp.p.GoName)
			grp.BlockFunc(func(b *jen.Group) {
				switch pp.p.In {
				case model.InPath:
					b.Id("s").Op(":=").Id("r").Dot("PathValue").Call(jen.Lit(pathKey(pp)))
					convert(b, pp.t, jen.Id("s"), dst, fail)
					return
				case model.InQuery:
					b.Id("vs").Op(":=").Id("q").Index(jen.Lit(pp.p.Name))
				default:
					b.Id("vs").Op(":=").Id("r").Dot("Header").Dot("Values").Call(jen.Lit(pp.p.Name))
				}
				body := func(b *jen.Group) {
					if pp.t.kind == kSlice {
						g.convertList(b, pp, dst, fail)
						return
					}
					b.If(jen.Len(jen.Id("vs")).Op(">").Lit(1)).Block(fail("given more than once"))
					if pp.ptr {
						b.Var().Id("x").Add(pp.t.code())
						convert(b, pp.t, jen.Id("vs").Index(jen.Lit(0)), jen.Id("x"), fail)
						b.Add(dst).Op("=").Op("&").Id("x")
					} else {
						convert(b, pp.t, jen.Id("vs").Index(jen.Lit(0)), dst, fail)
					}
				}
				if pp.p.Required {
					b.If(jen.Len(jen.Id("vs")).Op("==").Lit(0)).Block(fail("missing"))
					body(b)
				} else {
					b.If(jen.Len(jen.Id("vs")).Op(">").Lit(0)).BlockFunc(body)
				}
			})
		}
		grp.Return(jen.Id("p"), jen.Nil())
	})
	f.Line()
}

// convertList fills an array parameter: exploded query values are one item each; otherwise
// (and for headers) items are separated by ',' (simple, form), '|' (pipeDelimited) or ' '
// (spaceDelimited).
func (g *gen) convertList(b *jen.Group, pp *paramPlan, dst *jen.Statement, fail func(string) jen.Code) {
	items := jen.Id("vs")
	if !(pp.p.In == model.InQuery && pp.p.Explode) {
		sep := ","
		switch pp.p.Style {
		case "pipeDelimited":
			sep = "|"
		case "spaceDelimited":
			sep = " "
		}
		b.Var().Id("items").Index().String()
		b.For(jen.List(jen.Id("_"), jen.Id("v")).Op(":=").Range().Id("vs")).Block(
			jen.For(jen.List(jen.Id("_"), jen.Id("it")).Op(":=").Range().Qual("strings", "Split").Call(jen.Id("v"), jen.Lit(sep))).Block(
				jen.Id("items").Op("=").Append(jen.Id("items"), jen.Qual("strings", "TrimSpace").Call(jen.Id("it"))),
			),
		)
		items = jen.Id("items")
	}
	b.For(jen.List(jen.Id("_"), jen.Id("it")).Op(":=").Range().Add(items)).BlockFunc(func(lb *jen.Group) {
		lb.Var().Id("e").Add(pp.t.elem.code())
		convert(lb, pp.t.elem, jen.Id("it"), jen.Id("e"), fail)
		lb.Add(dst.Clone()).Op("=").Append(dst.Clone(), jen.Id("e"))
	})
	for _, c := range checks(pp.t, dst, fail) {
		b.Add(c)
	}
}

// emitFormDecoder writes decode<Op>Form(data): the fields of an
// application/x-www-form-urlencoded body (canonical.ParseForm: strict percent-decoding, UTF-8)
// into the body struct. A declared scalar field appears at most once; an array of scalars is the
// field repeated (name, name[] or name[N]); a nested member (form structs only) collects its
// bracketed fields. Undeclared fields are refused for closed objects and otherwise left to the
// fingerprint, which covers every field.
func (g *gen) emitFormDecoder(f *jen.File, o *opPlan, c *contentPlan) {
	t := o.bodyT
	comment(f, "%s decodes an application/x-www-form-urlencoded body of %s; errors are *canonical.Error (400 body-invalid).", c.decode, o.op.ID)
	f.Func().Id(c.decode).Params(jen.Id("data").Index().Byte()).Params(jen.Id(o.body), jen.Error()).BlockFunc(func(grp *jen.Group) {
		grp.Var().Id("v").Id(o.body)
		grp.List(jen.Id("fields"), jen.Err()).Op(":=").Qual(pkgCanonical, "ParseForm").Call(jen.Id("data"))
		grp.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id("v"), jen.Err()))
		if len(t.fields) > 0 {
			grp.Var().Id("seen").Index(jen.Lit(len(t.fields))).Bool()
		}
		var nested []int // fields matched by their base name (before '[')
		for i, fl := range t.fields {
			if fl.bag || fl.t.kind == kSlice {
				nested = append(nested, i)
			}
		}
		reject := jen.Return(jen.Id("v"), jen.Op("&").Qual(pkgCanonical, "Error").Values(jen.Dict{
			jen.Id("Pointer"): jen.Lit("/").Op("+").Id("fl").Dot("Name"),
			jen.Id("Reason"):  jen.Lit("field not allowed by the schema"),
		}))
		grp.For(jen.List(jen.Id("_"), jen.Id("fl")).Op(":=").Range().Id("fields")).BlockFunc(func(loop *jen.Group) {
			loop.Switch(jen.Id("fl").Dot("Name")).BlockFunc(func(sw *jen.Group) {
				for i, fl := range t.fields {
					if fl.bag {
						continue
					}
					sw.Case(jen.Lit(fl.p.Name)).BlockFunc(func(cb *jen.Group) {
						g.formField(cb, fl, i)
						cb.Continue()
					})
				}
			})
			if len(nested) > 0 {
				loop.List(jen.Id("base"), jen.Id("_"), jen.Id("_")).Op(":=").Qual("strings", "Cut").Call(jen.Id("fl").Dot("Name"), jen.Lit("["))
				loop.Switch(jen.Id("base")).BlockFunc(func(sw *jen.Group) {
					for _, i := range nested {
						fl := t.fields[i]
						sw.Case(jen.Lit(fl.p.Name)).BlockFunc(func(cb *jen.Group) {
							if fl.bag {
								cb.Id("seen").Index(jen.Lit(i)).Op("=").True()
								cb.Id("v").Dot(fl.name).Op("=").Append(jen.Id("v").Dot(fl.name), jen.Id("fl"))
							} else {
								g.formField(cb, fl, i)
							}
							cb.Continue()
						})
					}
				})
			}
			if t.s.ClosedObject {
				loop.Add(reject)
			}
		})
		for i, fl := range t.fields {
			if fl.p.Required && !fl.bodyKey {
				grp.If(jen.Op("!").Id("seen").Index(jen.Lit(i))).Block(
					jen.Return(jen.Id("v"), bodyError("/"+fl.p.Name, "missing required field")))
			}
		}
		grp.Return(jen.Id("v"), jen.Nil())
	})
	f.Line()
}

// formField decodes the form field fl (a canonical.FormField) into the member f.
func (g *gen) formField(cb *jen.Group, f *field, i int) {
	fail := func(reason string) jen.Code {
		return jen.Return(jen.Id("v"), bodyError("/"+f.p.Name, reason))
	}
	dst := jen.Id("v").Dot(f.name)
	if f.t.kind == kSlice {
		// An array is the field repeated, in body order.
		cb.Id("seen").Index(jen.Lit(i)).Op("=").True()
		cb.Var().Id("e").Add(f.t.elem.code())
		convert(cb, f.t.elem, jen.Id("fl").Dot("Value"), jen.Id("e"), fail)
		cb.Add(dst.Clone()).Op("=").Append(dst.Clone(), jen.Id("e"))
		return
	}
	cb.If(jen.Id("seen").Index(jen.Lit(i))).Block(fail("field given more than once"))
	cb.Id("seen").Index(jen.Lit(i)).Op("=").True()
	switch {
	case f.t.kind == kRaw:
		// A schema-less field holds its text as a JSON string.
		cb.Add(dst).Op("=").Qual(pkgCanonical, "AppendString").Call(jen.Nil(), jen.Id("fl").Dot("Value"))
	case f.ptr:
		cb.Var().Id("x").Add(f.t.code())
		convert(cb, f.t, jen.Id("fl").Dot("Value"), jen.Id("x"), fail)
		cb.Add(dst).Op("=").Op("&").Id("x")
	default:
		convert(cb, f.t, jen.Id("fl").Dot("Value"), dst, fail)
	}
}
