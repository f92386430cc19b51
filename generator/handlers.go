package generator

import (
	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
)

// emitOpTypes declares an operation's params struct, body alias, request type and handler func
// type.
func (g *gen) emitOpTypes(f *jen.File, o *opPlan) {
	note := ""
	if o.op.Settings.Key.Carrier == model.CarrierHeader {
		note = "; the idempotency key header is not here: the runtime reads and validates it"
	}
	comment(f, "%s holds the parameters of operation %s%s.", o.params, o.op.ID, note)
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
	f.Comment(o.request + " is a decoded request to operation " + o.op.ID + ".")
	f.Type().Id(o.request).StructFunc(func(grp *jen.Group) {
		grp.Id("Params").Id(o.params)
		if o.op.Body != nil {
			grp.Id("Body").Id(o.body)
		}
	})
	f.Line()
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

// emitHandlers writes each operation's handler constructor and the package's handler type.
func (g *gen) emitHandlers(f *jen.File) {
	for _, o := range g.ops {
		g.emitHandler(f, o)
	}
	if len(g.ops) > 0 {
		emitOperationHandler(f)
	}
}

// noinline ends a doc comment with the go:noinline directive. Register calls every handler
// constructor (and each calls its operation function) once; inlined there, a large API's
// Register becomes one huge function that is slow to compile, for nothing at run time.
func noinline(f *jen.File) {
	f.Comment("")
	f.Comment("//go:noinline")
}

// emitHandler writes <Op>Handler(rt, fn): the operation's http.Handler. The closure decodes a
// request and binds it to fn, so the handler type is not generic: a generic one would be
// compiled once per operation (each request type is its own GC shape).
func (g *gen) emitHandler(f *jen.File, o *opPlan) {
	lease := o.op.Settings.Mode == model.ModeLease
	comment(f, "%s serves %s %s through the idempotency runtime: fn runs at most once per idempotency key.", o.handler, o.op.Method, o.op.Path)
	noinline(f)
	call := []jen.Code{jen.Id("ctx")}
	field := "atomic"
	var bound, run jen.Code
	if lease {
		field = "lease"
		call = append(call, jen.Id("lease"), jen.Id("r").Dot("Params"))
		bound = jen.Qual(pkgRuntime, "LeaseFunc")
		run = jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("lease").Op("*").Qual(pkgRuntime, "LeaseHandle")).
			Params(jen.Qual(pkgRuntime, "CompleteFunc"), jen.Error())
	} else {
		call = append(call, jen.Id("tx"), jen.Id("r").Dot("Params"))
		bound = jen.Qual(pkgRuntime, "AtomicFunc")
		run = jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("tx").Qual(pkgPgx, "Tx")).
			Params(jen.Qual(pkgRuntime, "Response"), jen.Error())
	}
	if o.op.Body != nil {
		call = append(call, jen.Id("r").Dot("Body"))
	}
	h := jen.Op("&").Id("operationHandler").Values(jen.Id("rt").Op(":").Id("rt"), jen.Id("op").Op(":").Id(o.operation).Call(),
		jen.Id(field).Op(":").Func().Params(jen.Id("in").Op("*").Qual(pkgGen, "Input")).Params(bound, jen.Error()).Block(
			jen.List(jen.Id("r"), jen.Err()).Op(":=").Id(o.decode).Call(jen.Id("in")),
			jen.Return(jen.Add(run).Block(jen.Return(jen.Id("fn").Call(call...))), jen.Err()),
		))
	aliases := pathAliases(o)
	f.Func().Id(o.handler).Params(jen.Id("rt").Op("*").Qual(pkgRuntime, "Runtime"), jen.Id("fn").Id(o.fn)).Qual("net/http", "Handler").BlockFunc(func(grp *jen.Group) {
		if len(o.segs) == 0 && len(aliases) == 0 {
			grp.Return(h)
			return
		}
		grp.Id("h").Op(":=").Add(h)
		grp.Return(jen.Qual("net/http", "HandlerFunc").Call(jen.Func().Params(
			jen.Id("w").Qual("net/http", "ResponseWriter"), jen.Id("r").Op("*").Qual("net/http", "Request"),
		).BlockFunc(func(b *jen.Group) {
			for _, sp := range o.segs {
				// ServeMux matched the whole segment; its literal part is checked here (404 when it
				// differs), and the parameter values are set under their names.
				lits := []jen.Code{jen.Id("r").Dot("PathValue").Call(jen.Lit(sp.wild))}
				for _, l := range sp.lits {
					lits = append(lits, jen.Lit(l))
				}
				vals := "vals"
				if len(o.segs) > 1 {
					vals = "vals" + sp.wild
				}
				b.List(jen.Id(vals), jen.Id("ok")).Op(":=").Id("matchSegment").Call(lits...)
				b.If(jen.Op("!").Id("ok")).Block(jen.Qual("net/http", "NotFound").Call(jen.Id("w"), jen.Id("r")), jen.Return())
				for i, name := range sp.params {
					b.Id("r").Dot("SetPathValue").Call(jen.Lit(name), jen.Id(vals).Index(jen.Lit(i)))
				}
			}
			for _, pp := range aliases {
				// The wildcard could not carry the parameter's name (not a Go identifier).
				b.Id("r").Dot("SetPathValue").Call(jen.Lit(pp.p.Name), jen.Id("r").Dot("PathValue").Call(jen.Lit(pp.wild)))
			}
			b.Id("h").Dot("ServeHTTP").Call(jen.Id("w"), jen.Id("r"))
		})))
	})
	f.Line()
}

// pathAliases are the path parameters whose ServeMux wildcard has another name: the decode
// function and the fingerprint read path values by the parameter's name.
func pathAliases(o *opPlan) []*paramPlan {
	var out []*paramPlan
	for _, pp := range o.pparams {
		if pp.p.In == model.InPath && pp.wild != "" && pp.wild != pp.p.Name {
			out = append(out, pp)
		}
	}
	return out
}

// emitOperationHandler writes operationHandler, the http.Handler of every operation on the
// runtime's Exchange API: Begin (401, 413, 415), the operation's decode function on a pooled
// gen.Input framed by Begin (400 body-invalid), then the key and the state machine.
func emitOperationHandler(f *jen.File) {
	f.Comment("operationHandler serves one operation: exactly one of atomic and lease decodes a request and")
	f.Comment("binds it to the business function.")
	f.Type().Id("operationHandler").Struct(
		jen.Id("rt").Op("*").Qual(pkgRuntime, "Runtime"),
		jen.Id("op").Op("*").Qual(pkgRuntime, "Operation"),
		jen.Id("atomic").Func().Params(jen.Op("*").Qual(pkgGen, "Input")).Params(jen.Qual(pkgRuntime, "AtomicFunc"), jen.Error()),
		jen.Id("lease").Func().Params(jen.Op("*").Qual(pkgGen, "Input")).Params(jen.Qual(pkgRuntime, "LeaseFunc"), jen.Error()),
		jen.Id("inputs").Qual("sync", "Pool").Comment("*gen.Input, reused across requests"),
	)
	f.Line()
	x := func() *jen.Statement { return jen.Id("x") }
	in := func() *jen.Statement { return jen.Id("in") }
	f.Func().Params(jen.Id("h").Op("*").Id("operationHandler")).Id("ServeHTTP").Params(
		jen.Id("w").Qual("net/http", "ResponseWriter"), jen.Id("r").Op("*").Qual("net/http", "Request"),
	).Block(
		jen.Comment("Begin answers 401 (no scope), 413 (body over the limit) and 415 itself."),
		jen.List(x(), jen.Id("ok")).Op(":=").Id("h").Dot("rt").Dot("Begin").Call(jen.Id("w"), jen.Id("r"), jen.Id("h").Dot("op")),
		jen.If(jen.Op("!").Id("ok")).Block(jen.Return()),
		jen.List(in(), jen.Id("_")).Op(":=").Id("h").Dot("inputs").Dot("Get").Call().Assert(jen.Op("*").Qual(pkgGen, "Input")),
		jen.If(in().Op("==").Nil()).Block(in().Op("=").New(jen.Qual(pkgGen, "Input"))),
		in().Dot("Reset").Call(jen.Id("r"), x().Dot("Body").Call(), x().Dot("MediaType").Call(), x().Dot("DeclaredMediaType").Call(), jen.Nil(), h("rt").Dot("Matcher").Call()),
		in().Dot("Begin").Call(h("op").Dot("ID"), h("op").Dot("Method"), h("op").Dot("Path"), h("op").Dot("Query"), h("op").Dot("FingerprintHeaders")),
		jen.Var().Id("atomic").Qual(pkgRuntime, "AtomicFunc"),
		jen.Var().Id("lease").Qual(pkgRuntime, "LeaseFunc"),
		jen.Var().Err().Error(),
		jen.If(h("lease").Op("!=").Nil()).Block(
			jen.List(jen.Id("lease"), jen.Err()).Op("=").Id("h").Dot("lease").Call(in()),
		).Else().Block(
			jen.List(jen.Id("atomic"), jen.Err()).Op("=").Id("h").Dot("atomic").Call(in()),
		),
		jen.Var().Id("fp").Qual(pkgCanonical, "Fingerprint"),
		jen.If(jen.Err().Op("==").Nil()).Block(jen.Id("fp").Op("=").Add(in()).Dot("Sum").Call()).Else().Block(in().Dot("Release").Call()),
		jen.Id("key").Op(":=").Add(x()).Dot("HeaderKey").Call(),
		jen.If(h("op").Dot("Key").Dot("Header").Op("==").Lit("")).Block(
			jen.List(jen.Id("key").Dot("Value"), jen.Id("key").Dot("Present")).Op("=").Add(in()).Dot("BodyKey").Call(),
		),
		in().Dot("Reset").Call(jen.Nil(), jen.Nil(), jen.Lit(""), jen.Lit(""), jen.Nil(), jen.Nil()).Comment("keep no request alive in the pool"),
		jen.Id("h").Dot("inputs").Dot("Put").Call(in()),
		jen.Switch().Block(
			jen.Case(jen.Err().Op("!=").Nil()).Block(x().Dot("Fail").Call(jen.Err())),
			jen.Case(jen.Id("lease").Op("!=").Nil()).Block(x().Dot("RunLease").Call(jen.Id("key"), jen.Id("fp"), jen.Id("lease"))),
			jen.Default().Block(x().Dot("RunAtomic").Call(jen.Id("key"), jen.Id("fp"), jen.Id("atomic"))),
		),
	)
	f.Line()
}

func h(field string) *jen.Statement { return jen.Id("h").Dot(field) }

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
