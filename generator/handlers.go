package generator

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
)

// emitOpTypes declares an operation's params struct, body alias, request type and (with
// handlers) its handler func type.
func (p *plan) emitOpTypes(f *jen.File, o *opPlan) {
	note := ""
	switch o.op.Settings.Key.Carrier {
	case model.CarrierHeader:
		note = "; the idempotency key header is not here: the runtime reads and validates it"
	case model.CarrierQuery:
		note = "; the idempotency key query parameter is not here: the runtime reads and validates it"
	}
	comment(f, "%s holds the parameters of operation %s%s.", o.params, o.op.ID, note)
	f.Type().Id(o.params).StructFunc(func(grp *jen.Group) {
		for _, pp := range o.pparams {
			var t jen.Code = pp.t.code()
			if pp.ptr {
				t = jen.Op("*").Add(t)
			}
			c := string(pp.p.In) + " parameter " + pp.p.Name
			switch {
			case pp.union != nil:
				c += " (" + pp.p.Schema.CompositeOf + " of scalars: the text as sent)"
			case pp.deep:
				c += " (deepObject: " + pp.p.Name + "[member]=value)"
			}
			grp.Id(pp.p.GoName).Add(t).Comment(c)
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
	if o.op.Body != nil && o.mixed {
		emitMixedBody(f, o)
	}
	f.Comment(o.request + " is a decoded request to operation " + o.op.ID + ".")
	f.Type().Id(o.request).StructFunc(func(grp *jen.Group) {
		grp.Id("Params").Id(o.params)
		if o.op.Body != nil {
			grp.Id("Body").Id(o.body)
		}
	})
	f.Line()
	if p.opts.Target == TargetMiddleware {
		return // the server's own handlers serve the operation
	}
	params := []jen.Code{jen.Id("ctx").Qual("context", "Context")}
	var results []jen.Code
	if o.op.Settings.Mode == model.ModeLease {
		comment(f, "%s is the business function of %s\n\nLease mode: it runs outside any transaction (call external services with lease.ProviderKey), then returns the completion phase, which writes its rows through the transaction that completes the idempotency record.", o.fn, opDoc(o))
		params = append(params, jen.Id("lease").Op("*").Qual(pkgRuntime, "Lease"))
		results = []jen.Code{jen.Qual(pkgRuntime, "CompleteFunc").Types(jen.Id(dbAlias)), jen.Error()}
	} else {
		comment(f, "%s is the business function of %s\n\nAtomic mode: its writes through tx commit together with the stored response; an error, a panic or a non-final status rolls them back.", o.fn, opDoc(o))
		params = append(params, jen.Id("tx").Id(dbAlias))
		results = []jen.Code{jen.Qual(pkgRuntime, "Response"), jen.Error()}
	}
	params = append(params, jen.Id("p").Id(o.params))
	if o.op.Body != nil {
		params = append(params, jen.Id("body").Id(o.body))
	}
	f.Type().Id(o.fn).Func().Params(params...).Params(results...)
	f.Line()
}

// emitMixedBody declares the body struct of an operation with typed and raw media types: which
// one arrived, the typed value, and the exact bytes of a raw one.
func emitMixedBody(f *jen.File, o *opPlan) {
	var typed, raw, all []string
	for _, c := range o.contents {
		all = append(all, c.c.MediaType)
		if c.c.Kind == model.ContentRaw {
			raw = append(raw, c.c.MediaType)
		} else {
			typed = append(typed, c.c.MediaType)
		}
	}
	absent := "."
	if !o.op.Body.Required {
		absent = `; "" when the request has no body (it is optional).`
	}
	nilWhen := ", else nil."
	if !o.typedPtr {
		nilWhen = ", else its zero value."
	}
	which := "Exactly one of them is set."
	if !o.op.Body.Required {
		which = "One of them is set, unless the request has no body (it is optional)."
	}
	comment(f, "%s is the request body of operation %s in the media type the request's Content-Type named: the decoded %s body (%s), or the exact bytes of %s (Raw). %s",
		o.body, o.op.ID, orList(typed), o.typedField, orList(raw), which)
	var t jen.Code = o.bodyT.code()
	if o.typedPtr {
		t = jen.Op("*").Add(t)
	}
	f.Type().Id(o.body).StructFunc(func(grp *jen.Group) {
		for _, line := range wrapText(fmt.Sprintf("MediaType is the operation's media type that admitted the request: %s%s", quotedList(all), absent), 93) {
			grp.Comment(line)
		}
		grp.Id("MediaType").String()
		for _, line := range wrapText(fmt.Sprintf("%s is the decoded body when MediaType is %s%s", o.typedField, orList(typed), nilWhen), 93) {
			grp.Comment(line)
		}
		grp.Id(o.typedField).Add(t)
		for _, line := range wrapText(fmt.Sprintf("Raw is the body as sent when MediaType is %s, else nil: the fingerprint covers these bytes exactly (a signed or encrypted body cannot be re-encoded).", orList(raw)), 93) {
			grp.Comment(line)
		}
		grp.Id("Raw").Index().Byte()
	})
	f.Line()
}

// orList joins media types as "a", "a or b", "a, b or c".
func orList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// quotedList is orList of the items as Go strings.
func quotedList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = strconv.Quote(s)
	}
	return orList(q)
}

// emitHandlers writes each operation's exported handler constructor.
func (p *plan) emitHandlers(f *jen.File) {
	for _, o := range p.ops {
		p.emitHandler(f, o)
	}
}

// noinline ends a doc comment with the go:noinline directive. Register calls every handler
// constructor (and each calls its operation function) once; inlined there, a large API's
// Register becomes one huge function that is slow to compile, for nothing at run time.
func noinline(f *jen.File) {
	f.Comment("")
	f.Comment("//go:noinline")
}

// emitHandler writes <Op>Handler(rt, fn): the operation's http.Handler, one call into the
// runtime with the operation's settings and a closure that decodes a request and binds it to
// fn. Nothing is generic over the request type: a generic handler would be compiled once per
// operation (each request type is its own GC shape), which doubled a large API's build.
func (p *plan) emitHandler(f *jen.File, o *opPlan) {
	comment(f, "%s returns the http.Handler of %s %s (%s): fn runs at most once per idempotency key. Register mounts it at %q; mount it yourself on another router the same way.", o.handler, o.op.Method, o.op.Path, o.op.ID, o.pattern)
	noinline(f)
	call := []jen.Code{jen.Id("ctx"), jen.Id("db"), jen.Id("r").Dot("Params")}
	if o.op.Body != nil {
		call = append(call, jen.Id("r").Dot("Body"))
	}
	run, bound := "AtomicHandler", "AtomicFunc"
	inner := jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("db").Id(dbAlias)).
		Params(jen.Qual(pkgRuntime, "Response"), jen.Error())
	if o.op.Settings.Mode == model.ModeLease {
		run, bound = "LeaseHandler", "LeaseFunc"
		call[1] = jen.Id("lease")
		inner = jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("lease").Op("*").Qual(pkgRuntime, "Lease")).
			Params(jen.Qual(pkgRuntime, "CompleteFunc").Types(jen.Id(dbAlias)), jen.Error())
	}
	f.Func().Id(o.handler).Params(jen.Id("rt").Op("*").Qual(pkgRuntime, "Runtime"), jen.Id("fn").Id(o.fn)).Qual("net/http", "Handler").Block(
		jen.Return(jen.Qual(pkgRuntime, run).Call(jen.Id("rt"), jen.Id(o.operation).Call(),
			jen.Func().Params(jen.Id("in").Op("*").Qual(pkgGen, "Input")).Params(jen.Qual(pkgRuntime, bound).Types(jen.Id(dbAlias)), jen.Error()).Block(
				jen.List(jen.Id("r"), jen.Err()).Op(":=").Id(o.decode).Call(jen.Id("in")),
				jen.Return(jen.Add(inner).Block(jen.Return(jen.Id("fn").Call(call...))), jen.Err()),
			))),
	)
	f.Line()
}
