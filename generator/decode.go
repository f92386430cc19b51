package generator

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
)

// Each operation gets one decode function, decode<Op>(in *gen.Input) (<Op>Request, error): it
// decodes the body strictly with the schema's checks (a JSON struct through the shared struct
// decoders, a flat form inline, a form with bracketed fields through its own struct decoders:
// form.go), adds the body to the fingerprint, reports a body-carried key, then
// reads the parameters. The runtime has framed the request line before (gen.Input.Begin) and
// sums the fingerprint after. JSON is read by canonical.Decoder, a strict tokenizer with a sticky
// first error (duplicate members, bad UTF-8, surrogates, number range, depth), so the generated
// code reads straight on: each struct gets one function that switches on the member name, marks
// it read once, decodes its value and its checks, and keeps undeclared members (canonical form)
// for the fingerprint unless the object is closed. Required members are checked after the
// object, so the error names the object.

func dec() *jen.Statement { return jen.Id("d") }

// emitDecoders writes the per-operation decode functions and the struct decoders.
func (p *plan) emitDecoders(f *jen.File) {
	for _, o := range p.ops {
		p.emitDecodeOp(f, o)
	}
	for _, t := range p.named {
		switch {
		case t.kind == kStruct && t.form:
			p.emitTreeDecoder(f, t)
		case t.kind == kStruct && !t.multipart:
			p.emitStructDecoder(f, t)
		}
	}
}

// emitDecodeOp writes decode<Op>(in).
func (p *plan) emitDecodeOp(f *jen.File, o *opPlan) {
	var what []string
	if o.op.Body != nil {
		what = append(what, "its body (strictly, with the schema's checks), which it adds to the fingerprint")
	}
	if len(o.pparams) > 0 {
		what = append(what, "its parameters")
	}
	if len(what) == 0 {
		what = append(what, "it has neither a body nor parameters")
	}
	comment(f, "%s decodes a request to %s: %s. Errors are 400 body-invalid.", o.decode, o.op.ID, strings.Join(what, ", then "))
	f.Func().Id(o.decode).Params(jen.Id("in").Op("*").Qual(pkgGen, "Input")).Params(jen.Id("r").Id(o.request), jen.Id("_").Error()).BlockFunc(func(grp *jen.Group) {
		if o.op.Body != nil {
			p.emitBody(grp, o)
		}
		p.emitParams(grp, o)
		grp.Return(jen.Id("r"), jen.Id("in").Dot("Err").Call())
	})
	f.Line()
}

// emitBody decodes and frames the body by media type (the runtime has already refused other
// types with 415), then reports a body-carried key. A mixed body records which media type
// arrived, and takes a raw one as its exact bytes.
func (p *plan) emitBody(grp *jen.Group, o *opPlan) {
	frameRaw := o.frameRaw()
	one := func(b *jen.Group, c *contentPlan) {
		if o.mixed {
			b.Id("r").Dot("Body").Dot("MediaType").Op("=").Lit(c.c.MediaType)
			if c.c.Kind == model.ContentRaw {
				b.Id("r").Dot("Body").Dot("Raw").Op("=").Id("in").Dot("Body")
				b.Id("in").Dot("RawBody").Call()
				return
			}
			if o.typedPtr {
				b.Id("r").Dot("Body").Dot(o.typedField).Op("=").New(o.bodyT.code())
			}
		}
		if c.c.Kind == model.ContentForm && o.tree {
			p.emitTreeBody(b, o, frameRaw)
			return
		}
		switch {
		case o.rawBody:
			b.Id("r").Dot("Body").Op("=").Id("in").Dot("Body")
		case c.c.Kind == model.ContentForm:
			p.emitFormBody(b, o)
		case c.c.Kind == model.ContentMultipart:
			p.emitMultipartBody(b, o)
		case o.bodyT.kind == kStruct:
			// in.Err reports the decoder's error; until then everything reads straight on.
			b.Id(o.bodyT.decodeFn).Call(jen.Id("in").Dot("JSON").Call(), o.bodyRef())
		default:
			b.Id("d").Op(":=").Id("in").Dot("JSON").Call()
			p.decodeInto(b, o.bodyT, false, o.bodyVal(), 0, dec())
		}
		switch {
		case frameRaw:
			b.Id("in").Dot("RawBody").Call()
		case c.c.Kind == model.ContentForm:
			b.Id("in").Dot("FormBody").Call(lits(o.formExcl)...)
		case c.c.Kind == model.ContentMultipart:
			b.Id("in").Dot("MultipartBody").Call(p.bodyAppend(o, jen.Id("in").Dot("MultipartStart").Call()))
		default:
			b.Id("in").Dot("JSONBody").Call(p.bodyAppend(o, jen.Id("in").Dot("BodyStart").Call()))
		}
	}
	sw := func(b *jen.Group) {
		if len(o.contents) == 1 || o.rawBody {
			one(b, o.contents[0])
			return
		}
		// Switch on the declared entry that admitted the request (the runtime matches media
		// ranges such as application/*), and never run the handler on an undecoded body.
		b.Switch(jen.Id("in").Dot("Declared")).BlockFunc(func(s *jen.Group) {
			for _, c := range o.contents {
				s.Case(jen.Lit(c.c.MediaType)).BlockFunc(func(cb *jen.Group) { one(cb, c) })
			}
			s.Default().Block(jen.Return(jen.Id("r"), jen.Id("in").Dot("NoDecoder").Call()))
		})
	}
	if !o.op.Body.Required && !o.rawBody {
		// An optional body may be absent: the handler then gets the zero value, and the
		// fingerprint an empty raw body.
		grp.If(jen.Len(jen.Id("in").Dot("Body")).Op("==").Lit(0)).Block(
			jen.Id("in").Dot("RawBody").Call(),
		).Else().BlockFunc(sw)
	} else {
		sw(grp)
	}
	p.emitBodyKey(grp, o)
}

// bodyVal is the typed body as an addressable value: r.Body, or the typed field of a mixed
// body ((*r.Body.JSON) when it is a pointer, allocated before decoding).
func (o *opPlan) bodyVal() *jen.Statement {
	switch {
	case !o.mixed:
		return jen.Id("r").Dot("Body")
	case o.typedPtr:
		return jen.Parens(jen.Op("*").Id("r").Dot("Body").Dot(o.typedField))
	}
	return jen.Id("r").Dot("Body").Dot(o.typedField)
}

// bodyAppend is the expression that appends the canonical form of the typed body to start.
func (p *plan) bodyAppend(o *opPlan, start jen.Code) jen.Code {
	if o.bodyCanon.t.kind == kStruct {
		return jen.Id(o.bodyCanon.fn.name).Call(start, o.bodyRef())
	}
	return p.appendExpr(o.bodyCanon, o.bodyVal(), start, 0)
}

// bodyRef is a pointer to the typed body (&r.Body, or the typed field of a mixed body).
func (o *opPlan) bodyRef() *jen.Statement {
	if o.mixed && o.typedPtr {
		return jen.Id("r").Dot("Body").Dot(o.typedField)
	}
	return jen.Op("&").Add(o.bodyVal())
}

// emitBodyKey reports the decoded body member that carries the key; every pointer on the way
// must be non-nil. Header keys, and raw bodies (whose key the runtime cannot see), report none.
func (p *plan) emitBodyKey(grp *jen.Group, o *opPlan) {
	if k := o.op.Settings.Key.Carrier; k == model.CarrierHeader || k == model.CarrierQuery {
		return
	}
	if o.keyRaw != nil {
		args := []jen.Code{o.bodyVal()}
		for _, tok := range o.keyRaw {
			args = append(args, jen.Lit(tok))
		}
		grp.Id("in").Dot("SetBodyKeyAt").Call(args...)
		return
	}
	if len(o.keyPath) == 0 {
		return
	}
	var cond *jen.Statement
	expr := o.bodyVal()
	and := func(c *jen.Statement) {
		if cond == nil {
			cond = c
		} else {
			cond = cond.Op("&&").Add(c)
		}
	}
	for _, fl := range o.keyPath {
		expr = expr.Clone().Dot(fl.name)
		switch {
		case fl.three:
			and(expr.Clone().Op("!=").Nil())
			and(jen.Op("!").Add(expr.Clone()).Dot("Null"))
			expr = expr.Clone().Dot("Value")
		case fl.ptr:
			and(expr.Clone().Op("!=").Nil())
		}
	}
	grp.If(cond).Block(jen.Id("in").Dot("SetBodyKey").Call(jen.Op("*").Add(expr), jen.True()))
}

// fieldBits numbers the fields of a struct for its seen bits: required fields first, in schema
// order, so that one Required call names them all; then the others.
func fieldBits(t *tinfo) (bits []int, required []string) {
	bits = make([]int, len(t.fields))
	n := 0
	for pass := 0; pass < 2; pass++ {
		for i, fl := range t.fields {
			if req := fl.p.Required && !fl.bodyKey; req == (pass == 0) {
				bits[i] = n
				n++
				if req {
					required = append(required, fl.p.Name)
				}
			}
		}
	}
	return bits, required
}

// seenDecl declares the seen bits of n fields; seenRef is the address of bit's word and the bit
// within it.
func seenDecl(grp *jen.Group, n int) {
	switch {
	case n == 0:
	case n <= 64:
		grp.Var().Id("seen").Uint64().Comment("one bit per declared member")
	default:
		grp.Var().Id("seen").Index(jen.Lit((n + 63) / 64)).Uint64().Comment("one bit per declared member")
	}
}

func seenRef(n, bit int) []jen.Code {
	if n <= 64 {
		return []jen.Code{jen.Op("&").Id("seen"), jen.Lit(bit)}
	}
	return []jen.Code{jen.Op("&").Id("seen").Index(jen.Lit(bit / 64)), jen.Lit(bit % 64)}
}

// requiredCalls checks the required fields (bits 0..len-1) with recv.Required, one call per
// word of seen bits.
func requiredCalls(grp *jen.Group, recv jen.Code, n int, required []string) {
	for w := 0; w*64 < len(required); w++ {
		names := required[w*64 : min(len(required), w*64+64)]
		args := []jen.Code{jen.Id("seen")}
		if n > 64 {
			args[0] = jen.Id("seen").Index(jen.Lit(w))
		}
		for _, name := range names {
			args = append(args, jen.Lit(name))
		}
		grp.Add(recv).Dot("Required").Call(args...)
	}
}

// emitStructDecoder writes decode<T>(d, v) for one struct type.
func (p *plan) emitStructDecoder(f *jen.File, t *tinfo) {
	f.Func().Id(t.decodeFn).Params(
		jen.Id("d").Op("*").Qual(pkgCanonical, "Decoder"),
		jen.Id("v").Op("*").Id(t.name),
	).BlockFunc(func(grp *jen.Group) {
		bits, required := fieldBits(t)
		n := len(t.fields)
		seenDecl(grp, n)
		var other jen.Code
		names := declaredNames(t)
		addl := func(b *jen.Group) {
			if len(names) > 0 {
				b.Add(dec()).Dot("Undeclared").Call(names...)
			}
			p.decodeAddl(b, t)
		}
		switch {
		case t.addl != nil:
			other = jen.BlockFunc(addl)
		case t.extra != "":
			other = dec().Dot("Unknown").Call(append([]jen.Code{jen.Op("&").Id("v").Dot(t.extra)}, names...)...)
		default:
			other = dec().Dot("Reject").Call()
		}
		// Errors are sticky: when BeginObject fails, NextMember is false at once.
		grp.For(dec().Dot("BeginObject").Call(), dec().Dot("NextMember").Call(), jen.Empty()).BlockFunc(func(loop *jen.Group) {
			if n == 0 {
				loop.Add(other)
				return
			}
			loop.Switch(jen.String().Parens(dec().Dot("Name").Call())).BlockFunc(func(sw *jen.Group) {
				for i, fl := range t.fields {
					first := dec().Dot("Field").Call(seenRef(n, bits[i])...)
					sw.Case(jen.Lit(fl.p.Name)).BlockFunc(func(cg *jen.Group) { p.decodeField(cg, fl, first) })
				}
				if t.addl != nil {
					sw.Default().BlockFunc(addl)
				} else {
					sw.Default().Add(other)
				}
			})
		})
		grp.Add(dec().Dot("EndObject").Call())
		requiredCalls(grp, dec(), n, required)
	})
	f.Line()
}

// declaredNames are the names of t's declared members as literals, for Undeclared: an
// undeclared member equal to one of them up to letter case is refused.
func declaredNames(t *tinfo) []jen.Code {
	var out []jen.Code
	for _, fl := range t.fields {
		out = append(out, jen.Lit(fl.p.Name))
	}
	return out
}

// decodeAddl decodes an undeclared member into the typed additionalProperties map, allocated on
// the first one.
func (p *plan) decodeAddl(b *jen.Group, t *tinfo) {
	m := jen.Id("v").Dot(t.extra)
	b.If(m.Clone().Op("==").Nil()).Block(m.Clone().Op("=").Map(jen.String()).Add(t.addl.code()).Values())
	p.decodeEntry(b, t.addl, m, 1)
}

// decodeField decodes one member into v.<field>; first reads its value (d.Field(&seen, bit), which
// marks the member read).
func (p *plan) decodeField(grp *jen.Group, fl *field, first *jen.Statement) {
	dst := jen.Id("v").Dot(fl.name)
	nullable := fl.p.Schema.Nullable || fl.p.Nullable
	if fl.three {
		// Three states: nil (absent, never assigned here), Null, or the value.
		grp.Add(dst.Clone()).Op("=").Op("&").Qual(pkgCanonical, "Nullable").Types(fl.t.code()).Values(jen.Dict{
			jen.Id("Null"): jen.Add(first).Dot("Null").Call(),
		})
		grp.If(jen.Op("!").Add(dst.Clone()).Dot("Null")).BlockFunc(func(b *jen.Group) {
			p.decodeInto(b, fl.t, false, dst.Clone().Dot("Value"), 1, dec())
		})
		return
	}
	if !fl.ptr {
		p.decodeInto(grp, fl.t, nullable, dst, 1, first)
		return
	}
	// Pointer fields: absent and null both leave nil.
	body := func(b *jen.Group, first *jen.Statement) {
		if fl.t.kind == kStruct {
			b.Add(dst.Clone()).Op("=").New(jen.Id(fl.t.name))
			b.Id(fl.t.decodeFn).Call(first, dst.Clone())
			return
		}
		b.Add(dst.Clone()).Op("=").Qual(pkgCanonical, "Ptr").Call(readExpr(fl.t, first))
		if fl.bodyKey && fl.t.kind == kString {
			// The idempotency key is checked by the runtime against the key rules (400
			// key-invalid), which take the declared length and pattern unless key.* replaces
			// them: the decoder checking the declaration too would undo a replacement.
			return
		}
		for _, c := range checks(fl.t, jen.Op("*").Add(dst.Clone()), dec()) {
			b.Add(c)
		}
	}
	if nullable {
		grp.If(jen.Op("!").Add(first).Dot("Null").Call()).BlockFunc(func(b *jen.Group) { body(b, dec()) })
		return
	}
	body(grp, first)
}

// readExpr is the expression that reads a scalar of t through r (a canonical.Decoder, or a
// gen.Params or gen.Form for text values); enums are read and checked at once.
func readExpr(t *tinfo, reader *jen.Statement) jen.Code {
	r := func() *jen.Statement { return jen.Add(reader) }
	switch t.kind {
	case kString:
		return r().Dot("Str").Call()
	case kEnum:
		var vals []jen.Code
		for _, v := range t.s.Enum {
			vals = append(vals, jen.Lit(v))
		}
		return jen.Id(t.name).Call(r().Dot("Enum").Call(vals...))
	case kInt64:
		return r().Dot("Int64").Call()
	case kInt32:
		return r().Dot("Int32").Call()
	case kFloat:
		return r().Dot("Float64").Call()
	case kBool:
		return r().Dot("Bool").Call()
	case kFile:
		return jen.Qual(pkgGen, "FileValue").Call(r())
	}
	return r().Dot("Raw").Call()
}

// scalar kinds are read by one expression.
func scalar(t *tinfo) bool {
	switch t.kind {
	case kStruct, kSlice, kMap, kNullable:
		return false
	}
	return true
}

// decodeInto emits statements that decode the next JSON value into dst (an addressable Go
// expression of t's type); first is the decoder for the first read (d, or d.Field(...) for a
// struct member), depth keeps loop variables unique in nested arrays and maps.
func (p *plan) decodeInto(grp *jen.Group, t *tinfo, nullable bool, dst *jen.Statement, depth int, first *jen.Statement) {
	if nullable && t.kind != kRaw {
		// A null slice, map or (non-pointer) value is left at its zero value.
		grp.If(jen.Op("!").Add(first).Dot("Null").Call()).BlockFunc(func(b *jen.Group) {
			p.decodeInto(b, t, false, dst, depth, dec())
		})
		return
	}
	switch t.kind {
	case kNullable:
		// null is Null, never the zero value of the element's type.
		grp.If(first.Clone().Dot("Null").Call()).Block(
			dst.Clone().Dot("Null").Op("=").True(),
		).Else().BlockFunc(func(b *jen.Group) {
			p.decodeInto(b, t.elem, false, dst.Clone().Dot("Value"), depth, dec())
		})
	case kStruct:
		grp.Id(t.decodeFn).Call(first, jen.Op("&").Add(dst))
	case kSlice:
		// Present but empty is [] (not nil), so the fingerprint tells it from absent.
		grp.Add(dst.Clone()).Op("=").Add(t.code()).Values()
		grp.For(first.Clone().Dot("BeginArray").Call(), dec().Dot("NextElement").Call(), jen.Empty()).BlockFunc(func(lb *jen.Group) {
			el := t.elem
			elNull := elemNull(el)
			switch {
			case el.kind == kStruct && !elNull:
				lb.Id(el.decodeFn).Call(dec(), jen.Qual(pkgCanonical, "Grow").Call(jen.Op("&").Add(dst.Clone())))
			case scalar(el) && !elNull:
				appendItem(lb, el, dec(), dec(), dst)
			default:
				e := fmt.Sprintf("e%d", depth)
				lb.Var().Id(e).Add(el.code())
				p.decodeInto(lb, el, elNull, jen.Id(e), depth+1, dec())
				lb.Add(dst.Clone()).Op("=").Append(dst.Clone(), jen.Id(e))
			}
		})
		grp.Add(dec().Dot("EndArray").Call())
		for _, c := range checks(t, dst, dec()) {
			grp.Add(c)
		}
	case kMap:
		grp.Add(dst.Clone()).Op("=").Add(t.code()).Values()
		grp.For(first.Clone().Dot("BeginObject").Call(), dec().Dot("NextMember").Call(), jen.Empty()).BlockFunc(func(lb *jen.Group) {
			p.decodeEntry(lb, t.elem, dst, depth)
		})
		grp.Add(dec().Dot("EndObject").Call())
	default:
		grp.Add(dst.Clone()).Op("=").Add(readExpr(t, first))
		for _, c := range checks(t, dst, dec()) {
			grp.Add(c)
		}
	}
}

// elemNull reports whether an element or map value of type el is nullable without a type that
// says so (canonical.Nullable, elemOf): only a schema-less value, whose null is its canonical
// JSON, is never wrapped.
func elemNull(el *tinfo) bool {
	return el.s != nil && el.s.Nullable && el.kind != kRaw && el.kind != kNullable
}

// decodeEntry decodes the current member of an object into the (allocated) map m, refusing a
// key that is already there.
func (p *plan) decodeEntry(b *jen.Group, el *tinfo, m *jen.Statement, depth int) {
	elNull := elemNull(el)
	// MapKey is called before the value is read: the key is the member's name.
	key := jen.Qual(pkgCanonical, "MapKey").Call(dec(), m.Clone())
	cs := checks(el, jen.Id(fmt.Sprintf("e%d", depth)), dec())
	switch {
	case scalar(el) && !elNull && len(cs) == 0:
		b.Add(m.Clone()).Index(key).Op("=").Add(readExpr(el, dec()))
		return
	case scalar(el) && !elNull:
		k, e := fmt.Sprintf("k%d", depth), fmt.Sprintf("e%d", depth)
		b.Id(k).Op(":=").Add(key)
		b.Id(e).Op(":=").Add(readExpr(el, dec()))
		for _, c := range cs {
			b.Add(c)
		}
		b.Add(m.Clone()).Index(jen.Id(k)).Op("=").Id(e)
		return
	}
	k, e := fmt.Sprintf("k%d", depth), fmt.Sprintf("e%d", depth)
	b.Id(k).Op(":=").Add(key)
	b.Var().Id(e).Add(el.code())
	p.decodeInto(b, el, elNull, jen.Id(e), depth+1, dec())
	b.Add(m.Clone()).Index(jen.Id(k)).Op("=").Id(e)
}
