package generator

import (
	"fmt"
	"strings"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// emitOperations writes one constructor per operation returning its resolved settings as a
// runtime.Operation, the Operations list, the Handlers struct and Register. Nothing here is a
// package-level variable: every call builds fresh values, so no caller can change what
// another reads.
func (p *plan) emitOperations(f *jen.File) {
	// The stringer trick: the canonicalizers were generated for this version of the canonical
	// form and framing; when runtime/canonical moves to another version, the index is out of
	// range and the build stops until the code is regenerated.
	comment(f, "This code was generated for fingerprint version %d of runtime/canonical; a different version stops the build here until the code is regenerated.", canonical.Version)
	f.Var().Id("_").Op("=").Index(jen.Lit(1)).Struct().Values().Index(jen.Qual(pkgCanonical, "Version").Op("-").Lit(int(canonical.Version)))
	f.Line()
	for _, o := range p.ops {
		comment(f, "%s returns the resolved idempotency settings of %s; fields left out take the runtime's defaults.", o.operation, o.op.ID)
		noinline(f)
		f.Func().Id(o.operation).Params().Op("*").Qual(pkgRuntime, "Operation").Block(
			jen.Return(jen.Op("&").Add(p.operationValue(o))),
		)
		f.Line()
	}
	f.Comment("Operations returns the resolved idempotency settings of every marked operation, in path")
	f.Comment("order, as `idemgen list` prints them: for metrics labels, documentation and tools. Each call")
	f.Comment("returns new values.")
	f.Func().Id("Operations").Params().Index().Op("*").Qual(pkgRuntime, "Operation").Block(
		jen.Return(jen.Index().Op("*").Qual(pkgRuntime, "Operation").ValuesFunc(func(grp *jen.Group) {
			for _, o := range p.ops {
				grp.Line().Id(o.operation).Call()
			}
			grp.Line()
		})),
	)
	f.Line()

	f.Comment("Routes returns every marked operation with its decoder, for runtime.Middleware: an existing")
	f.Comment("server's handlers get the same checks, fingerprint and state machine as the generated ones.")
	f.Comment("Each call returns new values.")
	f.Func().Id("Routes").Params().Index().Qual(pkgRuntime, "Route").Block(
		jen.Return(jen.Index().Qual(pkgRuntime, "Route").ValuesFunc(func(grp *jen.Group) {
			for _, o := range p.ops {
				grp.Line().Qual(pkgRuntime, "NewRoute").Call(jen.Id(o.operation).Call(), jen.Id(o.decode))
			}
			grp.Line()
		})),
	)
	f.Line()

	if p.opts.Target == TargetMiddleware {
		return
	}
	f.Comment("Handlers holds the business function of each marked operation. A nil field is not mounted by")
	f.Comment("Register (the router then answers 404 or 405 for that route), so a service may implement a")
	f.Comment("subset of a large API; an operation is never served without its idempotency wrapper.")
	f.Type().Id("Handlers").StructFunc(func(grp *jen.Group) {
		for _, o := range p.ops {
			grp.Id(o.name).Id(o.fn)
		}
	})
	f.Line()

	f.Comment("Register mounts the handler of every non-nil function in h on mux (an http.ServeMux, or any")
	f.Comment("router whose Handle takes Go 1.22 patterns, \"METHOD /path/{param}\"). It returns an error,")
	f.Comment("instead of panicking, when mux or rt is nil, when rt's store cannot run the handlers' writes in")
	f.Comment("its transactions, or when a pattern conflicts with one already registered on mux (routes")
	f.Comment("mounted before the conflict stay mounted).")
	if len(p.ops) > 0 {
		o := p.ops[0]
		f.Comment("")
		if p.db.pgstore() {
			f.Comment("\trt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: tenantOf})")
		} else {
			f.Comment("\trt, err := runtime.New(runtime.Config{Store: st, Scope: tenantOf}) // st: a store.Transactional[" + dbAlias + "]")
		}
		f.Comment("\t...")
		f.Comment("\tmux := http.NewServeMux()")
		f.Comment(fmt.Sprintf("\terr = %s.Register(mux, rt, %s.Handlers{%s: %s})", p.opts.Package, p.opts.Package, o.name, lowerFirst(o.name)))
	}
	f.Func().Id("Register").Params(
		jen.Id("mux").Qual(pkgRuntime, "Router"),
		jen.Id("rt").Op("*").Qual(pkgRuntime, "Runtime"),
		jen.Id("h").Id("Handlers"),
	).Params(jen.Err().Error()).BlockFunc(func(grp *jen.Group) {
		grp.If(jen.Id("mux").Op("==").Nil().Op("||").Id("rt").Op("==").Nil()).Block(
			jen.Return(jen.Qual("errors", "New").Call(jen.Lit("register: mux and runtime must not be nil"))),
		)
		if len(p.ops) > 0 {
			// Every operation writes through DBTX: one check covers them all.
			grp.If(jen.Err().Op(":=").Qual(pkgRuntime, "CheckStore").Types(jen.Id(dbAlias)).Call(jen.Id("rt"), jen.Id(p.ops[0].operation).Call()), jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("register: %w"), jen.Err())),
			)
		}
		grp.Var().Id("pattern").String()
		grp.Defer().Func().Params().Block(
			// ServeMux panics on conflicting patterns; turn that into an error naming the route.
			jen.If(jen.Id("r").Op(":=").Recover(), jen.Id("r").Op("!=").Nil()).Block(
				jen.Err().Op("=").Qual("fmt", "Errorf").Call(jen.Lit("register %s: %v"), jen.Id("pattern"), jen.Id("r")),
			),
		).Call()
		p.emitRegisterRoutes(grp)
		grp.Return(jen.Nil())
	})
}

// kv is one field of a struct literal written in a chosen order (jen.Dict sorts by name).
type kv struct {
	key string
	val jen.Code
}

// literal writes Type{k: v, ...} one field per line, in the order given.
func literal(typ jen.Code, fields []kv) jen.Code {
	return jen.Add(typ).ValuesFunc(func(g *jen.Group) {
		for _, f := range fields {
			g.Line().Id(f.key).Op(":").Add(f.val)
		}
		g.Line()
	})
}

// inline writes Type{k: v, ...} on one line.
func inline(typ jen.Code, fields []kv) jen.Code {
	var items []jen.Code
	for _, f := range fields {
		items = append(items, jen.Id(f.key).Op(":").Add(f.val))
	}
	return jen.Add(typ).Values(items...)
}

// sizeLit writes a byte count as 64 << 10 or 1 << 20 when it is whole KiB or MiB.
func sizeLit(n int64) jen.Code {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return jen.Lit(int(n >> 20)).Op("<<").Lit(20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return jen.Lit(int(n >> 10)).Op("<<").Lit(10)
	}
	return jen.Lit(int(n))
}

// operationValue is the runtime.Operation literal of one operation, fields in the order of
// runtime.Operation's declaration; a setting equal to its default (runtime/defaults, which the
// runtime applies to a zero field) is left out.
func (p *plan) operationValue(o *opPlan) jen.Code {
	s := o.op.Settings
	var key []kv
	switch s.Key.Carrier {
	case model.CarrierBody:
		key = append(key, kv{"BodyPointer", jen.Lit(s.Key.Pointer)})
	case model.CarrierForm:
		key = append(key, kv{"BodyPointer", jen.Lit(s.Key.Field)})
	case model.CarrierQuery:
		key = append(key, kv{"Query", jen.Lit(s.Key.Query)})
	default:
		key = append(key, kv{"Header", jen.Lit(s.Key.Header)})
	}
	if s.Key.Required {
		key = append(key, kv{"Required", jen.True()})
	}
	if s.Key.MinLength != defaults.KeyMinLength {
		key = append(key, kv{"MinLength", jen.Lit(s.Key.MinLength)})
	}
	if s.Key.MaxLength != defaults.KeyMaxLength {
		key = append(key, kv{"MaxLength", jen.Lit(s.Key.MaxLength)})
	}
	if s.Key.Pattern != "" {
		// The runtime anchors it: the whole key must match.
		key = append(key, kv{"Pattern", jen.Lit(s.Key.Pattern)})
	}
	if c, ok := defaults.ParseKeyCharacters(s.Key.Characters); ok && c != defaults.KeyVisible {
		key = append(key, kv{"Characters", jen.Qual(pkgRuntime, map[defaults.KeyCharacters]string{defaults.KeyOpaque: "KeyOpaque"}[c])})
	}
	if q, ok := defaults.ParseKeyQuoting(s.Key.Quoted); ok && q != defaults.KeyQuotedAccepted {
		key = append(key, kv{"Quoted", jen.Qual(pkgRuntime, map[defaults.KeyQuoting]string{
			defaults.KeyQuotedRequired: "KeyQuotedRequired", defaults.KeyQuotedLiteral: "KeyQuotedLiteral"}[q])})
	}
	if s.Key.Echo {
		key = append(key, kv{"Echo", jen.True()})
	}
	if s.Key.Standard == model.StandardRepeatable {
		firstSent := s.Key.FirstSent
		if firstSent == "" {
			firstSent = "Repeatability-First-Sent" // clients send it whether or not the spec declares it
		}
		key = append(key, kv{"FirstSent", jen.Lit(firstSent)})
	}
	// Fields at the runtime's default are left out: a zero value means the default.
	fields := []kv{
		{"ID", jen.Lit(o.op.ID)},
		{"Method", jen.Lit(o.op.Method)},
		{"Path", jen.Lit(o.op.Path)},
	}
	if s.Mode == model.ModeLease {
		fields = append(fields, kv{"Mode", jen.Qual(pkgRuntime, "ModeLease")})
	}
	switch s.Scope {
	case model.ScopeOperation:
		fields = append(fields, kv{"Scope", jen.Qual(pkgRuntime, "ScopeOperation")})
	case model.ScopePath:
		fields = append(fields, kv{"Scope", jen.Qual(pkgRuntime, "ScopePath")})
	}
	fields = append(fields, kv{"Key", inline(jen.Qual(pkgRuntime, "KeyRule"), key)})
	if s.Retention != defaults.Retention {
		fields = append(fields, kv{"Retention", durationLit(s.Retention)})
	}
	if s.Mode == model.ModeLease && s.Lease != defaults.Lease {
		fields = append(fields, kv{"Lease", durationLit(s.Lease)})
	}
	switch {
	case s.Tombstone == 0:
		fields = append(fields, kv{"Tombstone", jen.Qual(pkgRuntime, "NoTombstone")})
	case s.Tombstone != defaults.Tombstone:
		fields = append(fields, kv{"Tombstone", durationLit(s.Tombstone)})
	}
	if s.Wait > 0 {
		fields = append(fields, kv{"Wait", durationLit(s.Wait)})
	}
	if s.ExecutionLimit != defaults.ExecutionLimit {
		fields = append(fields, kv{"ExecutionLimit", durationLit(s.ExecutionLimit)})
	}
	if !s.Detach {
		fields = append(fields, kv{"Attached", jen.True()})
	}
	if s.BodyLimit != defaults.BodyLimit {
		fields = append(fields, kv{"BodyLimit", sizeLit(s.BodyLimit)})
	}
	if s.ResponseLimit != defaults.ResponseLimit {
		fields = append(fields, kv{"ResponseLimit", sizeLit(s.ResponseLimit)})
	}
	if o.op.Body != nil {
		var mts []string
		for _, c := range o.op.Body.Contents {
			mts = append(mts, c.MediaType)
		}
		fields = append(fields, kv{"MediaTypes", stringsLit(mts)})
	}
	if len(s.Replay.Headers) > 0 {
		fields = append(fields, kv{"ReplayHeaders", stringsLit(s.Replay.Headers)})
	}
	if len(s.Replay.Statuses) > 0 && !defaultStatuses(s.Replay.Statuses) {
		fields = append(fields, kv{"Statuses", jen.Index().Qual(pkgRuntime, "StatusRule").ValuesFunc(func(grp *jen.Group) {
			for _, r := range s.Replay.Statuses {
				var rf []kv
				if r.Code != 0 {
					rf = append(rf, kv{"Code", jen.Lit(r.Code)})
				}
				if r.Class != 0 {
					rf = append(rf, kv{"Class", jen.Lit(r.Class)})
				}
				if r.Exclude {
					rf = append(rf, kv{"Exclude", jen.True()})
				}
				grp.Add(inline(jen.Null(), rf))
			}
		})})
	}
	var query []string
	for _, pp := range o.pparams {
		if pp.p.In == model.InQuery {
			query = append(query, pp.p.Name) // sorted within their location (model invariant)
		}
	}
	if len(query) > 0 {
		fields = append(fields, kv{"Query", stringsLit(query)})
	}
	if len(s.Fingerprint.Headers) > 0 {
		fields = append(fields, kv{"FingerprintHeaders", stringsLit(s.Fingerprint.Headers)})
	}
	if len(s.Fingerprint.Exclude) > 0 {
		var ex []string
		for _, p := range s.Fingerprint.Exclude {
			ex = append(ex, p.Raw)
		}
		fields = append(fields, kv{"Exclude", stringsLit(ex)})
	}
	if s.Fingerprint.Body == model.BodyRaw || o.rawBody {
		fields = append(fields, kv{"RawBody", jen.True()})
	}
	if len(s.ScopeHeaders) > 0 {
		fields = append(fields, kv{"ScopeHeaders", stringsLit(s.ScopeHeaders)})
	}
	switch {
	case o.errors != nil:
		fields = append(fields, kv{"Profile", errorsProfile(o)})
	case s.Profile != "":
		fields = append(fields, kv{"Profile", namedProfile(s.Profile)})
	}
	return literal(jen.Qual(pkgRuntime, "Operation"), fields)
}

// namedProfile is the runtime's profile of the contract table's row p (`profile:` in the
// spec): runtime.NamedProfile("stripe"). The row's settings are already in the operation's
// fields (internal/spec applies them); the value carries what the runtime does with every
// answer: errors, headers, request ids.
func namedProfile(p model.Profile) *jen.Statement {
	return jen.Qual(pkgRuntime, "NamedProfile").Call(jen.Lit(string(p)))
}

func stringsLit(ss []string) jen.Code {
	return jen.Index().String().ValuesFunc(func(grp *jen.Group) {
		for _, s := range ss {
			grp.Lit(s)
		}
	})
}

// durationLit writes a duration as readable arithmetic on time constants (24 * time.Hour), or
// nanoseconds when it is not a whole number of milliseconds.
func durationLit(d time.Duration) jen.Code {
	ns := d.Nanoseconds()
	for _, u := range []struct {
		n    int64
		name string
	}{{3600e9, "Hour"}, {60e9, "Minute"}, {1e9, "Second"}, {1e6, "Millisecond"}} {
		if ns%u.n == 0 {
			return jen.Lit(int(ns/u.n)).Op("*").Qual("time", u.name)
		}
	}
	return jen.Qual("time", "Duration").Call(jen.Lit(ns))
}

// opDoc is the doc comment of an operation's exported names: the spec's summary and its
// idempotency settings.
func opDoc(o *opPlan) string {
	s := o.op.Settings
	var b strings.Builder
	fmt.Fprintf(&b, "operation %s (%s %s)", o.op.ID, o.op.Method, o.op.Path)
	if o.op.Summary != "" {
		fmt.Fprintf(&b, ": %s", o.op.Summary)
	}
	b.WriteString(".\n\nIdempotency: ")
	fmt.Fprintf(&b, "mode %s, scope %s, retention %s", s.Mode, s.Scope, model.DurationText(s.Retention))
	if s.Mode == model.ModeLease {
		fmt.Fprintf(&b, ", lease %s", model.DurationText(s.Lease))
	}
	switch s.Key.Carrier {
	case model.CarrierBody:
		fmt.Fprintf(&b, "; key in body member %s", s.Key.Pointer)
	case model.CarrierForm:
		fmt.Fprintf(&b, "; key in form field %s", s.Key.Field)
	case model.CarrierQuery:
		fmt.Fprintf(&b, "; key in query parameter %s", s.Key.Query)
	default:
		fmt.Fprintf(&b, "; key in header %s", s.Key.Header)
	}
	if !s.Key.Required {
		b.WriteString(" (optional: without it the request runs unguarded)")
	}
	if len(s.Fingerprint.Exclude) > 0 {
		var ex []string
		for _, p := range s.Fingerprint.Exclude {
			ex = append(ex, p.Raw)
		}
		fmt.Fprintf(&b, "; fingerprint excludes %s", strings.Join(ex, ", "))
	}
	if s.Fingerprint.Body == model.BodyRaw {
		b.WriteString("; body fingerprinted as raw bytes")
	}
	b.WriteString(".")
	return b.String()
}
