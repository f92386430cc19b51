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
	params := []jen.Code{jen.Id("ctx").Qual("context", "Context")}
	var results []jen.Code
	if o.op.Settings.Mode == model.ModeLease {
		comment(f, "%s is the business function of %s\n\nLease mode: it runs outside any transaction (call external services with lease.ProviderKey), then returns the completion phase, which writes its rows through the transaction that completes the idempotency record.", o.fn, opDoc(o))
		params = append(params, jen.Id("lease").Op("*").Qual(pkgRuntime, "LeaseHandle"))
		results = []jen.Code{jen.Qual(pkgRuntime, "CompleteFunc"), jen.Error()}
	} else {
		comment(f, "%s is the business function of %s\n\nAtomic mode: its writes through tx commit together with the stored response.", o.fn, opDoc(o))
		params = append(params, jen.Id("tx").Qual(pkgPgx, "Tx"))
		results = []jen.Code{jen.Qual(pkgRuntime, "Response"), jen.Error()}
	}
	params = append(params, jen.Id("p").Id(o.params))
	if o.op.Body != nil {
		params = append(params, jen.Id("body").Id(o.body))
	}
	f.Type().Id(o.fn).Func().Params(params...).Params(results...)
	f.Line()
}

// emitHandlers writes each operation's http.Handler wrapper and fingerprint function.
func (g *gen) emitHandlers(f *jen.File) {
	for _, o := range g.ops {
		g.emitHandler(f, o)
	}
}

func (g *gen) emitHandler(f *jen.File, o *opPlan) {
	f.Comment(o.handler + " serves " + o.op.Method + " " + o.op.Path + " through the idempotency runtime.")
	f.Type().Id(o.handler).Struct(
		jen.Id("rt").Op("*").Qual(pkgRuntime, "Runtime"),
		jen.Id("fn").Id(o.fn),
	)
	f.Line()
	f.Func().Params(jen.Id("h").Id(o.handler)).Id("ServeHTTP").Params(
		jen.Id("w").Qual("net/http", "ResponseWriter"),
		jen.Id("r").Op("*").Qual("net/http", "Request"),
	).BlockFunc(func(grp *jen.Group) {
		for _, sp := range o.segs {
			// ServeMux matched the whole segment; its literal part is checked here (404 when it
			// differs), and the parameter values are set for the parser and the fingerprint.
			grp.BlockFunc(func(b *jen.Group) {
				var lits []jen.Code
				lits = append(lits, jen.Id("r").Dot("PathValue").Call(jen.Lit(sp.wild)))
				for _, l := range sp.lits {
					lits = append(lits, jen.Lit(l))
				}
				b.List(jen.Id("vals"), jen.Id("ok")).Op(":=").Id("matchSegment").Call(lits...)
				b.If(jen.Op("!").Id("ok")).Block(
					jen.Qual("net/http", "NotFound").Call(jen.Id("w"), jen.Id("r")),
					jen.Return(),
				)
				for i, name := range sp.params {
					b.Id("r").Dot("SetPathValue").Call(jen.Lit(name), jen.Id("vals").Index(jen.Lit(i)))
				}
			})
		}
		grp.Comment("Begin answers 401 (no scope), 413 (body over the limit) and 415 itself.")
		grp.List(jen.Id("x"), jen.Id("ok")).Op(":=").Id("h").Dot("rt").Dot("Begin").Call(
			jen.Id("w"), jen.Id("r"), jen.Op("&").Id("Operations").Dot(o.name))
		grp.If(jen.Op("!").Id("ok")).Block(jen.Return()) // Begin has answered 401, 413 or 415
		if o.op.Body != nil {
			g.emitBodyDecode(grp, o)
		}
		grp.List(jen.Id("params"), jen.Err()).Op(":=").Id(o.parseParams).Call(jen.Id("r"))
		grp.If(jen.Err().Op("!=").Nil()).Block(jen.Id("x").Dot("Fail").Call(jen.Err()), jen.Return())
		g.emitKey(grp, o)
		bodyArg := []jen.Code{jen.Id("r"), jen.Id("x").Dot("MediaType").Call(), jen.Id("x").Dot("Body").Call(), jen.Op("&").Id("params")}
		if o.op.Body != nil {
			bodyArg = append(bodyArg, jen.Op("&").Id("body"))
		}
		grp.Id("fp").Op(":=").Id(o.fingerprint).Call(bodyArg...)
		callArgs := []jen.Code{jen.Id("ctx")}
		if o.op.Settings.Mode == model.ModeLease {
			callArgs = append(callArgs, jen.Id("lease"), jen.Id("params"))
			if o.op.Body != nil {
				callArgs = append(callArgs, jen.Id("body"))
			}
			grp.Id("x").Dot("RunLease").Call(jen.Id("key"), jen.Id("fp"),
				jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("lease").Op("*").Qual(pkgRuntime, "LeaseHandle")).
					Params(jen.Qual(pkgRuntime, "CompleteFunc"), jen.Error()).Block(
					jen.Return(jen.Id("h").Dot("fn").Call(callArgs...))))
		} else {
			callArgs = append(callArgs, jen.Id("tx"), jen.Id("params"))
			if o.op.Body != nil {
				callArgs = append(callArgs, jen.Id("body"))
			}
			grp.Id("x").Dot("RunAtomic").Call(jen.Id("key"), jen.Id("fp"),
				jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("tx").Qual(pkgPgx, "Tx")).
					Params(jen.Qual(pkgRuntime, "Response"), jen.Error()).Block(
					jen.Return(jen.Id("h").Dot("fn").Call(callArgs...))))
		}
	})
	f.Line()
}

// emitBodyDecode decodes the body by media type (Begin has already refused other types).
func (g *gen) emitBodyDecode(grp *jen.Group, o *opPlan) {
	if o.rawBody {
		grp.Id("body").Op(":=").Id("x").Dot("Body").Call()
		return
	}
	if len(o.contents) == 1 && o.op.Body.Required {
		grp.List(jen.Id("body"), jen.Err()).Op(":=").Id(o.contents[0].decode).Call(jen.Id("x").Dot("Body").Call())
		grp.If(jen.Err().Op("!=").Nil()).Block(jen.Id("x").Dot("Fail").Call(jen.Err()), jen.Return())
		return
	}
	grp.Var().Id("body").Id(o.body)
	grp.Var().Err().Error()
	decode := func(b *jen.Group, c *contentPlan) {
		b.List(jen.Id("body"), jen.Err()).Op("=").Id(c.decode).Call(jen.Id("x").Dot("Body").Call())
	}
	sw := func(b *jen.Group) {
		if len(o.contents) == 1 {
			decode(b, o.contents[0])
			return
		}
		// Switch on the declared entry that admitted the request (the runtime matches media
		// ranges such as application/*), and never run the handler on an undecoded body.
		b.Switch(jen.Id("x").Dot("DeclaredMediaType").Call()).BlockFunc(func(s *jen.Group) {
			for _, c := range o.contents {
				s.Case(jen.Lit(c.c.MediaType)).BlockFunc(func(cb *jen.Group) { decode(cb, c) })
			}
			s.Default().Block(jen.Err().Op("=").Op("&").Qual(pkgRuntime, "BodyError").Values(jen.Dict{
				jen.Id("Reason"): jen.Lit("no decoder for media type ").Op("+").Id("x").Dot("MediaType").Call(),
			}))
		})
	}
	if !o.op.Body.Required {
		// An optional body may be absent: the handler then gets the zero value.
		grp.If(jen.Len(jen.Id("x").Dot("Body").Call()).Op(">").Lit(0)).BlockFunc(sw)
	} else {
		sw(grp)
	}
	grp.If(jen.Err().Op("!=").Nil()).Block(jen.Id("x").Dot("Fail").Call(jen.Err()), jen.Return())
}

// emitKey sets key: from the header (the runtime reads it), or from the decoded body member.
func (g *gen) emitKey(grp *jen.Group, o *opPlan) {
	k := o.op.Settings.Key
	if k.Carrier == model.CarrierHeader || len(o.keyPath) == 0 {
		// Header keys, and raw bodies (whose key, if any, the runtime cannot see) use the header.
		grp.Id("key").Op(":=").Id("x").Dot("HeaderKey").Call()
		return
	}
	grp.Var().Id("key").Qual(pkgRuntime, "Key")
	// Walk the path; every pointer on the way must be non-nil.
	var cond *jen.Statement
	expr := jen.Id("body")
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
		jen.Id("key").Op("=").Qual(pkgRuntime, "Key").Values(jen.Dict{
			jen.Id("Value"):   jen.Op("*").Add(expr),
			jen.Id("Present"): jen.True(),
		}),
	)
}

// emitFingerprint writes fingerprint<Op>(x, p, body): the framing of docs/design.md section 3.
func (g *gen) emitFingerprint(f *jen.File, o *opPlan) {
	op := o.op
	params := []jen.Code{
		jen.Id("r").Op("*").Qual("net/http", "Request"),
		jen.Id("mediaType").String(),
		jen.Id("raw").Index().Byte(),
		jen.Id("p").Op("*").Id(o.params),
	}
	if op.Body != nil {
		params = append(params, jen.Id("v").Op("*").Id(o.body))
	}
	comment(f, "%s is the fingerprint of a request to %s (docs/design.md section 3): operation, method, path template and path values, declared query parameters (sorted), media type, fingerprint.headers and the canonical body. r is the request, mediaType its media type without parameters, raw its body bytes and v the decoded body.", o.fingerprint, op.ID)
	f.Func().Id(o.fingerprint).Params(params...).Qual(pkgCanonical, "Fingerprint").BlockFunc(func(grp *jen.Group) {
		grp.Var().Id("f").Qual(pkgCanonical, "Framer")
		grp.Id("f").Dot("Begin").Call(jen.Lit(op.ID), jen.Lit(op.Method), jen.Lit(op.Path))
		var query []*paramPlan
		for _, pp := range o.pparams {
			switch pp.p.In {
			case model.InPath:
				grp.Id("f").Dot("PathParam").Call(jen.Lit(pp.p.Name), jen.Id("r").Dot("PathValue").Call(jen.Lit(pathKey(pp))))
			case model.InQuery:
				query = append(query, pp)
			}
		}
		if len(query) > 0 {
			grp.Id("q").Op(":=").Id("r").Dot("URL").Dot("Query").Call()
			// Params are sorted by name within each location already (model invariant).
			for _, pp := range query {
				grp.Id("f").Dot("Query").Call(jen.Lit(pp.p.Name), jen.Id("q").Index(jen.Lit(pp.p.Name)))
			}
		}
		grp.Id("f").Dot("MediaType").Call(jen.Id("mediaType"))
		for _, h := range op.Settings.Fingerprint.Headers {
			grp.Id("f").Dot("Header").Call(jen.Lit(h), jen.Id("r").Dot("Header").Dot("Values").Call(jen.Lit(h)))
		}
		if op.Body != nil {
			g.emitFingerprintBody(grp, o)
		}
		grp.Return(jen.Id("f").Dot("Sum").Call())
	})
	f.Line()
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
		grp.Id("f").Dot("RawBody").Call(jen.Id("raw"))
		return
	}
	one := func(b *jen.Group, c *contentPlan) {
		switch c.c.Kind {
		case model.ContentForm:
			var args []jen.Code
			args = append(args, jen.Id("raw"))
			for _, e := range formExclusions(op) {
				args = append(args, jen.Lit(e))
			}
			// The decoder parsed the same bytes with the same parser, so this cannot fail.
			b.Id("_").Op("=").Id("f").Dot("FormBody").Call(args...)
		default:
			if o.bodyT.kind == kStruct {
				b.Id("f").Dot("BodyEnd").Call(jen.Id(g.canonFor(o.bodyT, opExclusions(op), o)).Call(jen.Id("f").Dot("BodyStart").Call(), jen.Id("v")))
				return
			}
			b.Id("b").Op(":=").Id("f").Dot("BodyStart").Call()
			g.appendVal(b, o.bodyT, jen.Parens(jen.Op("*").Id("v")), opExclusions(op), 0, o)
			b.Id("f").Dot("BodyEnd").Call(jen.Id("b"))
		}
	}
	sw := func(b *jen.Group) {
		if len(o.contents) == 1 {
			one(b, o.contents[0])
			return
		}
		b.Switch(jen.Id("mediaType")).BlockFunc(func(s *jen.Group) {
			for _, c := range o.contents {
				s.Case(jen.Lit(c.c.MediaType)).BlockFunc(func(cb *jen.Group) { one(cb, c) })
			}
		})
	}
	if !op.Body.Required {
		grp.If(jen.Len(jen.Id("raw")).Op("==").Lit(0)).Block(
			jen.Id("f").Dot("RawBody").Call(jen.Nil()).Comment("absent"),
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
