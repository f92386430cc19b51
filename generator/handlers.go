package generator

import (
	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
)

// emitOpTypes declares an operation's params struct, body alias and handler func type.
func (g *gen) emitOpTypes(f *jen.File, o *opPlan) {
	note := ""
	if o.op.Settings.Key.Carrier == model.CarrierHeader {
		note = "\n\nThe idempotency key header is not here: the runtime reads and validates it."
	}
	comment(f, "%s holds the parameters of %s%s", o.params, opDoc(o), note)
	f.Type().Id(o.params).StructFunc(func(grp *jen.Group) {
		for _, pp := range o.pparams {
			var t jen.Code = pp.t.code()
			if pp.ptr {
				t = jen.Op("*").Add(t)
			}
			grp.Id(pp.p.GoName).Add(t).Comment(string(pp.p.In) + " parameter " + pp.p.Name)
		}
	})
	f.Line()
	if o.op.Body != nil && o.bodyAlias {
		var target jen.Code
		switch {
		case o.rawBody:
			target = jen.Index().Byte()
			f.Comment(o.body + " is the exact request body of operation " + o.op.ID + ".")
		default:
			target = o.bodyT.code()
			f.Comment(o.body + " is the request body of operation " + o.op.ID + ".")
		}
		f.Type().Id(o.body).Op("=").Add(target)
		f.Line()
	}
	comment(f, "%s is a decoded request to %s", o.request, o.op.ID+".")
	f.Type().Id(o.request).StructFunc(func(grp *jen.Group) {
		grp.Id("Params").Id(o.params)
		if o.op.Body != nil {
			grp.Id("Body").Id(o.body)
		}
	})
	f.Line()
	if g.opts.Target == TargetMiddleware {
		return // the server's own handlers serve the operation
	}
	params := []jen.Code{jen.Id("ctx").Qual("context", "Context")}
	var results []jen.Code
	if o.op.Settings.Mode == model.ModeLease {
		comment(f, "%s is the business function of %s\n\nLease mode: it runs outside any transaction (call external services with lease.ProviderKey), then returns the completion phase, which writes its rows through the transaction that completes the idempotency record.", o.fn, opDoc(o))
		params = append(params, jen.Id("lease").Op("*").Qual(pkgRuntime, "Lease"))
		results = []jen.Code{jen.Qual(pkgRuntime, "CompleteFunc").Types(jen.Qual(pkgPgstore, "DBTX")), jen.Error()}
	} else {
		comment(f, "%s is the business function of %s\n\nAtomic mode: its writes through tx commit together with the stored response; an error, a panic or a non-final status rolls them back.", o.fn, opDoc(o))
		params = append(params, jen.Id("tx").Qual(pkgPgstore, "DBTX"))
		results = []jen.Code{jen.Qual(pkgRuntime, "Response"), jen.Error()}
	}
	params = append(params, jen.Id("p").Id(o.params))
	if o.op.Body != nil {
		params = append(params, jen.Id("body").Id(o.body))
	}
	f.Type().Id(o.fn).Func().Params(params...).Params(results...)
	f.Line()
}

// emitHandlers writes each operation's exported handler constructor.
func (g *gen) emitHandlers(f *jen.File) {
	for _, o := range g.ops {
		g.emitConstructor(f, o)
	}
}

// emitConstructor writes New<Op>Handler(rt, fn): the operation's http.Handler, one call into
// the runtime with the operation's settings, its decoder and an adapter to the typed handler.
func (g *gen) emitConstructor(f *jen.File, o *opPlan) {
	ctor := "New" + o.name + "Handler"
	comment(f, "%s returns the http.Handler of %s It serves the operation through the idempotency runtime: the decoder, the fingerprint and the state machine run before fn. Register mounts it; mount it yourself on another router at the pattern %q.", ctor, opDoc(o), o.pattern)
	args := []jen.Code{jen.Id("ctx"), jen.Id("db"), jen.Id("in").Dot("Params")}
	if o.op.Body != nil {
		args = append(args, jen.Id("in").Dot("Body"))
	}
	var adapter jen.Code
	var run string
	if o.op.Settings.Mode == model.ModeLease {
		run = "LeaseHandler"
		args[1] = jen.Id("lease")
		adapter = jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("lease").Op("*").Qual(pkgRuntime, "Lease"), jen.Id("in").Op("*").Id(o.request)).
			Params(jen.Qual(pkgRuntime, "CompleteFunc").Types(jen.Qual(pkgPgstore, "DBTX")), jen.Error()).Block(jen.Return(jen.Id("fn").Call(args...)))
	} else {
		run = "AtomicHandler"
		adapter = jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("db").Qual(pkgPgstore, "DBTX"), jen.Id("in").Op("*").Id(o.request)).
			Params(jen.Qual(pkgRuntime, "Response"), jen.Error()).Block(jen.Return(jen.Id("fn").Call(args...)))
	}
	f.Func().Id(ctor).Params(jen.Id("rt").Op("*").Qual(pkgRuntime, "Runtime"), jen.Id("fn").Id(o.fn)).Qual("net/http", "Handler").Block(
		jen.Return(jen.Qual(pkgRuntime, run).Call(jen.Id("rt"), jen.Id(o.operation).Call(), jen.Id(o.decodeReq), adapter)),
	)
	f.Line()
}

// emitDecodeRequest writes decode<Op>(in): the operation's decoder as the runtime calls it. It
// decodes the body and the parameters, adds the canonical body to the fingerprint framing the
// runtime began, and reports a body-carried key.
func (g *gen) emitDecodeRequest(f *jen.File, o *opPlan) {
	comment(f, "%s reads a request to %s: the body and the parameters, checked against the schema (errors name the offending value: 400 body-invalid), then the canonical body for the fingerprint.", o.decodeReq, o.op.ID)
	f.Func().Id(o.decodeReq).Params(jen.Id("in").Op("*").Qual(pkgGen, "Input")).Params(jen.Id("v").Id(o.request), jen.Err().Error()).BlockFunc(func(grp *jen.Group) {
		if o.op.Body != nil {
			g.emitBodyDecode(grp, o)
		}
		for _, pp := range o.pparams {
			if pp.p.In == model.InPath {
				grp.Id("in").Dot("Request").Dot("SetPathValue").Call(jen.Lit(pathKey(pp)), jen.Id("in").Dot("PathValue").Call(jen.Lit(pp.p.Name)))
			}
		}
		grp.If(jen.List(jen.Id("v").Dot("Params"), jen.Err()).Op("=").Id(o.parseParams).Call(jen.Id("in").Dot("Request")), jen.Err().Op("!=").Nil()).Block(jen.Return())
		if o.op.Body != nil {
			g.emitFingerprintBody(grp, o)
		}
		g.emitKey(grp, o)
		grp.Return()
	})
	f.Line()
}

// emitBodyDecode decodes the body into v.Body by media type (the runtime has already refused
// other types).
func (g *gen) emitBodyDecode(grp *jen.Group, o *opPlan) {
	if o.rawBody {
		grp.Id("v").Dot("Body").Op("=").Id("in").Dot("Body")
		return
	}
	decode := func(b *jen.Group, c *contentPlan) {
		b.If(jen.List(jen.Id("v").Dot("Body"), jen.Err()).Op("=").Id(c.decode).Call(jen.Id("in").Dot("Body")), jen.Err().Op("!=").Nil()).Block(jen.Return())
	}
	sw := func(b *jen.Group) {
		if len(o.contents) == 1 {
			decode(b, o.contents[0])
			return
		}
		// Switch on the declared entry that admitted the request (the runtime matches media
		// ranges such as application/*), and never run the handler on an undecoded body.
		b.Switch(jen.Id("in").Dot("Declared")).BlockFunc(func(s *jen.Group) {
			for _, c := range o.contents {
				s.Case(jen.Lit(c.c.MediaType)).BlockFunc(func(cb *jen.Group) { decode(cb, c) })
			}
			s.Default().Block(jen.Return(jen.Id("v"), jen.Op("&").Qual(pkgGen, "BodyError").Values(jen.Dict{
				jen.Id("Reason"): jen.Lit("no decoder for media type ").Op("+").Id("in").Dot("MediaType"),
			})))
		})
	}
	if !o.op.Body.Required {
		// An optional body may be absent: the handler then gets the zero value.
		grp.If(jen.Len(jen.Id("in").Dot("Body")).Op(">").Lit(0)).BlockFunc(sw)
		return
	}
	sw(grp)
}

// emitKey reports a body-carried key to the runtime (header keys the runtime reads itself).
func (g *gen) emitKey(grp *jen.Group, o *opPlan) {
	k := o.op.Settings.Key
	if k.Carrier == model.CarrierHeader || len(o.keyPath) == 0 {
		return
	}
	// Walk the path; every pointer on the way must be non-nil.
	var cond *jen.Statement
	expr := jen.Id("v").Dot("Body")
	for _, fl := range o.keyPath {
		expr = expr.Clone().Dot(fl.name)
		if fl.ptr {
			c := expr.Clone().Op("!=").Nil()
			if cond == nil {
				cond = c
			} else {
				cond = cond.Op("&&").Add(c)
			}
		}
	}
	grp.If(cond).Block(
		jen.Id("in").Dot("SetBodyKey").Call(jen.Op("*").Add(expr), jen.True()),
	).Else().Block(
		jen.Id("in").Dot("SetBodyKey").Call(jen.Lit(""), jen.False()),
	)
}

// pathKey is the name the path parameter's value is stored under in the request: its wildcard,
// or (for mixed segments) its own name set by the wrapper.
func pathKey(pp *paramPlan) string {
	if pp.wild != "" {
		return pp.wild
	}
	return pp.p.Name
}

func (g *gen) emitFingerprintBody(grp *jen.Group, o *opPlan) {
	op := o.op
	raw := o.rawBody || op.Settings.Fingerprint.Body == model.BodyRaw
	if raw {
		grp.Id("in").Dot("RawBody").Call()
		return
	}
	one := func(b *jen.Group, c *contentPlan) {
		switch c.c.Kind {
		case model.ContentForm:
			var args []jen.Code
			for _, e := range formExclusions(op) {
				args = append(args, jen.Lit(e))
			}
			// The decoder parsed the same bytes with the same parser, so this cannot fail.
			b.Id("_").Op("=").Id("in").Dot("FormBody").Call(args...)
		default:
			if o.bodyT.kind == kStruct {
				b.Id("in").Dot("JSONBody").Call(jen.Id(g.canonFor(o.bodyT, opExclusions(op), o)).Call(jen.Id("in").Dot("BodyStart").Call(), jen.Op("&").Id("v").Dot("Body")))
				return
			}
			b.Id("b").Op(":=").Id("in").Dot("BodyStart").Call()
			g.appendVal(b, o.bodyT, jen.Id("v").Dot("Body"), opExclusions(op), 0, o)
			b.Id("in").Dot("JSONBody").Call(jen.Id("b"))
		}
	}
	sw := func(b *jen.Group) {
		if len(o.contents) == 1 {
			one(b, o.contents[0])
			return
		}
		b.Switch(jen.Id("in").Dot("Declared")).BlockFunc(func(s *jen.Group) {
			for _, c := range o.contents {
				s.Case(jen.Lit(c.c.MediaType)).BlockFunc(func(cb *jen.Group) { one(cb, c) })
			}
		})
	}
	if !op.Body.Required {
		grp.If(jen.Len(jen.Id("in").Dot("Body")).Op("==").Lit(0)).Block(
			jen.Id("in").Dot("RawBody").Call().Comment("absent"),
		).Else().BlockFunc(sw)
		return
	}
	sw(grp)
}

// emitMatchSegment writes the helper that splits a path segment such as "CA123.json" around
// its literal pieces ("", ".json"). It is emitted only when some path needs it.
func emitMatchSegment(f *jen.File) {
	f.Comment("matchSegment splits one path segment into parameter values around the literal pieces lits")
	f.Comment("(one more than there are parameters): each value ends at the first occurrence of the next")
	f.Comment("literal, the last one at the suffix. ok is false when a literal does not match or a value is")
	f.Comment("empty; the wrapper then answers 404, as ServeMux would for a path it does not know.")
	f.Func().Id("matchSegment").Params(jen.Id("seg").String(), jen.Id("lits").Op("...").String()).Params(jen.Id("vals").Index().String(), jen.Id("ok").Bool()).Block(
		jen.Id("last").Op(":=").Id("lits").Index(jen.Len(jen.Id("lits")).Op("-").Lit(1)),
		jen.If(jen.Op("!").Qual("strings", "HasPrefix").Call(jen.Id("seg"), jen.Id("lits").Index(jen.Lit(0))).Op("||").
			Len(jen.Id("seg")).Op("<").Len(jen.Id("lits").Index(jen.Lit(0))).Op("+").Len(jen.Id("last")).Op("||").
			Op("!").Qual("strings", "HasSuffix").Call(jen.Id("seg"), jen.Id("last"))).Block(
			jen.Return(jen.Nil(), jen.False()),
		),
		jen.Id("rest").Op(":=").Id("seg").Index(jen.Len(jen.Id("lits").Index(jen.Lit(0))).Op(":").Len(jen.Id("seg")).Op("-").Len(jen.Id("last"))),
		jen.For(jen.List(jen.Id("_"), jen.Id("lit")).Op(":=").Range().Id("lits").Index(jen.Lit(1).Op(":").Len(jen.Id("lits")).Op("-").Lit(1))).Block(
			jen.Id("i").Op(":=").Qual("strings", "Index").Call(jen.Id("rest"), jen.Id("lit")),
			jen.If(jen.Id("i").Op("<=").Lit(0)).Block(jen.Return(jen.Nil(), jen.False())),
			jen.Id("vals").Op("=").Append(jen.Id("vals"), jen.Id("rest").Index(jen.Op(":").Id("i"))),
			jen.Id("rest").Op("=").Id("rest").Index(jen.Id("i").Op("+").Len(jen.Id("lit")).Op(":")),
		),
		jen.If(jen.Id("rest").Op("==").Lit("")).Block(jen.Return(jen.Nil(), jen.False())),
		jen.Return(jen.Append(jen.Id("vals"), jen.Id("rest")), jen.True()),
	)
	f.Line()
}
