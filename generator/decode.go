package generator

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
)

// The JSON decoders are straight-line code over canonical.Decoder, a strict tokenizer with a
// sticky first error (duplicate members, bad UTF-8, surrogates, number range, depth): each
// struct gets one function that switches on the member name, marks it seen once, decodes its
// value with the schema's checks, and keeps undeclared members (canonical form) for the
// fingerprint unless the object is closed. Required members are checked after the object, so
// the error names the object.

func dec() *jen.Statement { return jen.Id("d") }

// emitDecoders writes the per-operation entry points, the struct decoders, the parameter
// parsers and the form decoders.
func (g *gen) emitDecoders(f *jen.File) {
	for _, o := range g.ops {
		g.emitDecodeRequest(f, o)
		for _, c := range o.contents {
			switch c.c.Kind {
			case model.ContentJSON:
				g.emitJSONEntry(f, o, c)
			case model.ContentForm:
				g.emitFormDecoder(f, o, c)
			}
		}
		g.emitParamParser(f, o)
	}
	for _, t := range g.named {
		if t.kind == kStruct && !t.form {
			g.emitStructDecoder(f, t)
		}
	}
	if len(g.patterns) > 0 {
		f.Comment("Schema patterns (JSON Schema \"pattern\", unanchored), compiled once.")
		f.Var().DefsFunc(func(d *jen.Group) {
			for _, t := range g.patterns {
				d.Id(t.pattern).Op("=").Qual("regexp", "MustCompile").Call(jen.Lit(t.s.Pattern))
			}
		})
	}
	if g.needSegMatch {
		emitMatchSegment(f)
		f.Comment("segmentMatches reports whether matchSegment accepts seg.")
		f.Func().Id("segmentMatches").Params(jen.Id("seg").String(), jen.Id("lits").Op("...").String()).Bool().Block(
			jen.List(jen.Id("_"), jen.Id("ok")).Op(":=").Id("matchSegment").Call(jen.Id("seg"), jen.Id("lits").Op("...")),
			jen.Return(jen.Id("ok")),
		)
	}
}

// emitJSONEntry writes decode<Op>JSON(data) (Body, error).
func (g *gen) emitJSONEntry(f *jen.File, o *opPlan, c *contentPlan) {
	comment(f, "%s decodes a %s request body of operation %s strictly and checks the schema's constraints; errors are *canonical.Error (400 body-invalid).", c.decode, c.c.MediaType, o.op.ID)
	f.Func().Id(c.decode).Params(jen.Id("data").Index().Byte()).Params(jen.Id(o.body), jen.Error()).BlockFunc(func(grp *jen.Group) {
		grp.Var().Id("dv").Qual(pkgCanonical, "Decoder")
		grp.Id("d").Op(":=").Op("&").Id("dv").Comment("stays on the stack: nothing keeps it")
		grp.Id("d").Dot("Reset").Call(jen.Id("data"))
		grp.Var().Id("v").Id(o.body)
		g.decodeInto(grp, o.bodyT, false, jen.Id("v"), 0)
		grp.Return(jen.Id("v"), jen.Id("d").Dot("Finish").Call())
	})
	f.Line()
}

// emitStructDecoder writes decode<T>(d, v) for one struct type.
func (g *gen) emitStructDecoder(f *jen.File, t *tinfo) {
	f.Func().Id(t.decodeFn).Params(
		jen.Id("d").Op("*").Qual(pkgCanonical, "Decoder"),
		jen.Id("v").Op("*").Id(t.name),
	).BlockFunc(func(grp *jen.Group) {
		grp.If(jen.Op("!").Add(dec()).Dot("BeginObject").Call()).Block(jen.Return())
		n := len(t.fields)
		seen := func(i int) jen.Code {
			if n <= 64 {
				return jen.Op("&").Id("seen")
			}
			return jen.Op("&").Id("seen").Index(jen.Lit(i / 64))
		}
		if n > 0 {
			if n <= 64 {
				grp.Var().Id("seen").Uint64().Comment("one bit per declared member")
			} else {
				grp.Var().Id("seen").Index(jen.Lit((n + 63) / 64)).Uint64().Comment("one bit per declared member")
			}
		}
		grp.For(dec().Dot("NextMember").Call()).Block(
			jen.Switch(jen.String().Parens(dec().Dot("Name").Call())).BlockFunc(func(sw *jen.Group) {
				for i, fl := range t.fields {
					sw.Case(jen.Lit(fl.p.Name)).BlockFunc(func(cg *jen.Group) {
						cg.If(jen.Op("!").Add(dec()).Dot("Once").Call(seen(i), jen.Lit(i%64))).Block(jen.Return())
						g.decodeField(cg, fl)
					})
				}
				if t.addl != nil {
					sw.Default().BlockFunc(func(b *jen.Group) {
						m := jen.Id("v").Dot(t.extra)
						// Key shares the decoder's copy of the document: no allocation per key.
						b.Id("k").Op(":=").Add(dec()).Dot("Key").Call()
						b.If(jen.List(jen.Id("_"), jen.Id("dup")).Op(":=").Add(m.Clone()).Index(jen.Id("k")), jen.Id("dup")).Block(
							dec().Dot("Duplicate").Call())
						b.If(m.Clone().Op("==").Nil()).Block(m.Clone().Op("=").Map(jen.String()).Add(t.addl.code()).Values())
						b.Var().Id("e").Add(t.addl.code())
						g.decodeInto(b, t.addl, t.addl.s != nil && t.addl.s.Nullable && t.addl.kind != kRaw, jen.Id("e"), 1)
						b.Add(m.Clone()).Index(jen.Id("k")).Op("=").Id("e")
					})
				} else if t.extra != "" {
					sw.Default().Add(dec().Dot("Unknown").Call(jen.Op("&").Id("v").Dot(t.extra)))
				} else {
					sw.Default().Add(dec().Dot("Reject").Call())
				}
			}),
		)
		grp.Add(dec().Dot("EndObject").Call())
		var req []int
		for i, fl := range t.fields {
			if fl.p.Required && !fl.bodyKey {
				req = append(req, i)
			}
		}
		if len(req) > 0 {
			grp.Switch().BlockFunc(func(sw *jen.Group) {
				for _, i := range req {
					var bits jen.Code
					if n <= 64 {
						bits = jen.Id("seen")
					} else {
						bits = jen.Id("seen").Index(jen.Lit(i / 64))
					}
					sw.Case(jen.Add(bits).Op("&").Parens(jen.Lit(1).Op("<<").Lit(i % 64)).Op("==").Lit(0)).Block(
						dec().Dot("Missing").Call(jen.Lit(t.fields[i].p.Name)))
				}
			})
		}
	})
	f.Line()
}

// decodeField decodes one member into v.<field>.
func (g *gen) decodeField(grp *jen.Group, fl *field) {
	dst := jen.Id("v").Dot(fl.name)
	nullable := fl.p.Schema.Nullable
	if fl.ptr {
		// Pointer fields: decode into a local, then take its address; null leaves nil.
		body := func(b *jen.Group) {
			b.Var().Id("x").Add(fl.t.code())
			g.decodeInto(b, fl.t, false, jen.Id("x"), 1)
			b.Add(dst.Clone()).Op("=").Op("&").Id("x")
		}
		if nullable {
			grp.If(jen.Op("!").Add(dec()).Dot("Null").Call()).BlockFunc(body)
		} else {
			body(grp)
		}
		return
	}
	g.decodeInto(grp, fl.t, nullable, dst, 1)
}

// decodeInto emits statements that decode the next JSON value into dst (an addressable Go
// expression of t's type). depth keeps loop variables unique in nested arrays and maps.
func (g *gen) decodeInto(grp *jen.Group, t *tinfo, nullable bool, dst *jen.Statement, depth int) {
	fail := func(reason string) jen.Code { return dec().Dot("Invalid").Call(jen.Lit(reason)) }
	if nullable && t.kind != kRaw {
		// A null slice, map or (non-pointer) value is left at its zero value.
		grp.If(jen.Op("!").Add(dec()).Dot("Null").Call()).BlockFunc(func(b *jen.Group) {
			g.decodeInto(b, t, false, dst, depth)
		})
		return
	}
	switch t.kind {
	case kStruct:
		grp.Id(t.decodeFn).Call(dec(), jen.Op("&").Add(dst))
	case kString:
		grp.Add(dst.Clone()).Op("=").Add(dec()).Dot("Str").Call()
		for _, c := range checks(t, dst, fail) {
			grp.Add(c)
		}
	case kEnum:
		grp.Add(dst.Clone()).Op("=").Id(t.name).Call(dec().Dot("Str").Call())
		for _, c := range checks(t, dst, fail) {
			grp.Add(c)
		}
	case kInt64:
		grp.Add(dst.Clone()).Op("=").Add(dec()).Dot("Int64").Call()
		for _, c := range checks(t, dst, fail) {
			grp.Add(c)
		}
	case kInt32:
		// format int32: the decoder reads int64 exactly, then the range is checked.
		grp.Block(
			jen.Id("n").Op(":=").Add(dec()).Dot("Int64").Call(),
			jen.If(jen.Id("n").Op("<").Qual("math", "MinInt32").Op("||").Id("n").Op(">").Qual("math", "MaxInt32")).Block(
				fail("outside the int32 range")),
			jen.Add(dst.Clone()).Op("=").Int32().Call(jen.Id("n")),
		)
		for _, c := range checks(t, dst, fail) {
			grp.Add(c)
		}
	case kFloat:
		grp.Add(dst.Clone()).Op("=").Add(dec()).Dot("Float64").Call()
		for _, c := range checks(t, dst, fail) {
			grp.Add(c)
		}
	case kBool:
		grp.Add(dst.Clone()).Op("=").Add(dec()).Dot("Bool").Call()
		for _, c := range checks(t, dst, fail) {
			grp.Add(c)
		}
	case kRaw:
		grp.Add(dst.Clone()).Op("=").Add(dec()).Dot("Raw").Call()
		for _, c := range checks(t, dst, fail) {
			grp.Add(c)
		}
	case kSlice:
		e := fmt.Sprintf("e%d", depth)
		grp.If(dec().Dot("BeginArray").Call()).BlockFunc(func(b *jen.Group) {
			// Present but empty is [] (not nil), so the fingerprint tells it from absent.
			b.Add(dst.Clone()).Op("=").Add(t.code()).Values()
			b.For(dec().Dot("NextElement").Call()).BlockFunc(func(lb *jen.Group) {
				lb.Var().Id(e).Add(t.elem.code())
				g.decodeInto(lb, t.elem, t.elem.s != nil && t.elem.s.Nullable, jen.Id(e), depth+1)
				lb.Add(dst.Clone()).Op("=").Append(dst.Clone(), jen.Id(e))
			})
			b.Add(dec().Dot("EndArray").Call())
			for _, c := range checks(t, dst, fail) {
				b.Add(c)
			}
		})
	case kMap:
		e := fmt.Sprintf("e%d", depth)
		grp.If(dec().Dot("BeginObject").Call()).BlockFunc(func(b *jen.Group) {
			b.Add(dst.Clone()).Op("=").Add(t.code()).Values()
			b.For(dec().Dot("NextMember").Call()).BlockFunc(func(lb *jen.Group) {
				// Key shares the decoder's copy of the document: no allocation per key.
				lb.Id("k" + e).Op(":=").Add(dec()).Dot("Key").Call()
				lb.If(jen.List(jen.Id("_"), jen.Id("dup")).Op(":=").Add(dst.Clone()).Index(jen.Id("k"+e)), jen.Id("dup")).Block(
					// The error is sticky: every later decoder call is a no-op.
					dec().Dot("Duplicate").Call(),
				)
				lb.Var().Id(e).Add(t.elem.code())
				g.decodeInto(lb, t.elem, t.elem.s != nil && t.elem.s.Nullable && t.elem.kind != kRaw, jen.Id(e), depth+1)
				lb.Add(dst.Clone()).Index(jen.Id("k" + e)).Op("=").Id(e)
			})
			b.Add(dec().Dot("EndObject").Call())
		})
	}
}
