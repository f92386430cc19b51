package generator

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/canonical"
)

// The canonicalizers are resolved at generation time (docs/design.md section 3): declared members are
// sorted in RFC 8785 order (UTF-16 code units) and escaped here, excluded members
// (fingerprint.exclude, x-idempotency-ignore, the body-carried key) are simply not written, and
// only maps sort at run time. Undeclared members (canonical.Members, already sorted) are merged
// between the declared ones. Because exclusions differ per operation, a struct gets one
// canonicalizer per distinct exclusion set below it; the common case (none) is shared.

// trie is a set of exclusion pointers; "*" matches every array element or map value.
type trie struct {
	leaf bool
	kids map[string]*trie
	star *trie
}

func (t *trie) add(tokens []string) {
	n := t
	for _, tok := range tokens {
		var c *trie
		if tok == "*" {
			if n.star == nil {
				n.star = &trie{}
			}
			c = n.star
		} else {
			if n.kids == nil {
				n.kids = map[string]*trie{}
			}
			if c = n.kids[tok]; c == nil {
				c = &trie{}
				n.kids[tok] = c
			}
		}
		n = c
	}
	n.leaf = true
}

// member returns what is excluded below the member name: the union of its own node and the
// wildcard's (nil when nothing is).
func (t *trie) member(name string) *trie {
	if t == nil {
		return nil
	}
	return union(t.kids[name], t.star)
}

func union(a, b *trie) *trie {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	u := &trie{leaf: a.leaf || b.leaf, star: union(a.star, b.star)}
	for _, src := range []*trie{a, b} {
		for k, v := range src.kids {
			if u.kids == nil {
				u.kids = map[string]*trie{}
			}
			u.kids[k] = union(u.kids[k], v)
		}
	}
	return u
}

// sig is a deterministic rendering of t, "" when it excludes nothing.
func (t *trie) sig() string {
	if t == nil {
		return ""
	}
	var b strings.Builder
	if t.leaf {
		b.WriteString("!")
	}
	keys := make([]string, 0, len(t.kids))
	for k := range t.kids {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if s := t.kids[k].sig(); s != "" {
			fmt.Fprintf(&b, "%q(%s)", k, s)
		}
	}
	if s := t.star.sig(); s != "" {
		fmt.Fprintf(&b, "*(%s)", s)
	}
	return b.String()
}

// opExclusions builds the exclusion trie of an operation's canonical JSON body.
func opExclusions(op *model.Operation) *trie {
	t := &trie{}
	for _, p := range op.Settings.Fingerprint.Exclude {
		t.add(p.Tokens)
	}
	if op.Settings.Key.Carrier == model.CarrierBody {
		t.add(op.Settings.Key.PointerTokens)
	}
	if t.sig() == "" {
		return nil
	}
	return t
}

// formExclusions lists the form fields left out of a form body's fingerprint: excluded fields
// and the form-carried key, sorted.
func formExclusions(op *model.Operation) []string {
	var out []string
	for _, p := range op.Settings.Fingerprint.Exclude {
		out = append(out, strings.TrimPrefix(p.Raw, "/"))
	}
	if op.Settings.Key.Carrier == model.CarrierForm {
		out = append(out, op.Settings.Key.Field)
	}
	return sortedStrings(out)
}

// canonFunc is one generated struct canonicalizer.
type canonFunc struct {
	name string
	t    *tinfo
	excl *trie
	op   *opPlan // for error locations
}

// canonFor returns the canonicalizer of struct t under exclusions n, planning it on first use.
func (g *gen) canonFor(t *tinfo, n *trie, o *opPlan) string {
	key := t.name + "\x00" + n.sig()
	if c, ok := g.canon[key]; ok {
		return c.name
	}
	name := "appendCanonical" + t.name
	if n.sig() != "" {
		name += "For" + o.name
	}
	c := &canonFunc{name: g.names.take(name), t: t, excl: n, op: o}
	g.canon[key] = c
	g.canonList = append(g.canonList, c)
	return c.name
}

// emitCanonical writes the struct canonicalizers the decode functions use.
func (g *gen) emitCanonical(f *jen.File) {
	// Emitting a canonicalizer may plan more (nested structs): drain the list.
	for i := 0; i < len(g.canonList); i++ {
		g.emitStructCanon(f, g.canonList[i])
	}
}

// emitStructCanon writes appendCanonical<T>(b, v) for one struct under one exclusion set: one
// canonical.ObjectWriter call per member, in RFC 8785 order.
func (g *gen) emitStructCanon(f *jen.File, c *canonFunc) {
	t := c.t
	type member struct {
		fl   *field
		excl *trie
	}
	var ms []member
	for _, fl := range t.fields {
		sub := c.excl.member(fl.p.Name)
		if fl.p.Ignore || fl.p.Schema.Ignore || (sub != nil && sub.leaf) {
			continue
		}
		ms = append(ms, member{fl, sub})
	}
	sort.SliceStable(ms, func(i, j int) bool { return canonical.Compare(ms[i].fl.p.Name, ms[j].fl.p.Name) < 0 })
	var names []string
	for _, m := range ms {
		names = append(names, m.fl.p.Name)
	}
	members := "members " + strings.Join(names, ", ")
	if len(names) == 0 {
		members = "no declared members"
	}
	comment(f, "%s appends the canonical form (RFC 8785) of v to b: %s.", c.name, members)
	f.Func().Id(c.name).Params(jen.Id("b").Index().Byte(), jen.Id("v").Op("*").Id(t.name)).Index().Byte().BlockFunc(func(grp *jen.Group) {
		var extra jen.Code = jen.Nil()
		switch {
		case t.addl != nil:
			extra = g.addlMembers(t, c)
		case t.extra != "":
			extra = jen.Id("v").Dot(t.extra)
		}
		grp.List(jen.Id("o"), jen.Id("b")).Op(":=").Qual(pkgCanonical, "WriteObject").Call(jen.Id("b"), extra)
		for _, m := range ms {
			g.canonMember(grp, m.fl, m.excl, c.op)
		}
		grp.Return(jen.Id("o").Dot("End").Call(jen.Id("b")))
	})
	f.Line()
}

// memberName is a member's name in canonical form with quotes and colon, as ObjectWriter takes
// it: a raw string literal when that reads plainly.
func memberName(name string) jen.Code {
	q := string(canonical.AppendString(nil, name)) + ":"
	for _, r := range q {
		if r < 0x20 || r == '`' || r >= 0x7f {
			return jen.Lit(q)
		}
	}
	return jen.Op("`" + q + "`")
}

// canonMember writes one member of a struct canonicalizer. Absent members (nil) are left out, so
// absent and null fingerprint alike, as the handler sees them; a required member that is nil
// (nullable) is written as null.
func (g *gen) canonMember(grp *jen.Group, fl *field, n *trie, o *opPlan) {
	name := memberName(fl.p.Name)
	val := jen.Id("v").Dot(fl.name)
	b := func() *jen.Statement { return jen.Id("b") }
	// set writes b = the call of the writer's method m; opt that of canonical.<fn>(&o, b, ...).
	set := func(g *jen.Group, m string, args ...jen.Code) {
		g.Add(b()).Op("=").Id("o").Dot(m).Call(append([]jen.Code{b(), name}, args...)...)
	}
	opt := func(fn string, args ...jen.Code) {
		grp.Add(b()).Op("=").Qual(pkgCanonical, fn).Call(append([]jen.Code{jen.Op("&").Id("o"), b(), name}, args...)...)
	}
	always := fl.p.Required && !fl.bodyKey
	// write writes the member whose value (not a pointer) is x.
	write := func(grp *jen.Group, x *jen.Statement) {
		switch fl.t.kind {
		case kString:
			set(grp, "String", x)
		case kEnum:
			set(grp, "String", jen.String().Call(x))
		case kInt64:
			set(grp, "Int", x)
		case kInt32:
			set(grp, "Int", jen.Int64().Call(x))
		case kFloat:
			set(grp, "Float", x)
		case kBool:
			set(grp, "Bool", x)
		default:
			grp.Add(b()).Op("=").Add(g.appendExpr(fl.t, x, jen.Id("o").Dot("Key").Call(b(), name), n, 0, o))
		}
	}
	nullOr := func(x *jen.Statement) {
		grp.If(val.Clone().Op("==").Nil()).BlockFunc(func(g *jen.Group) { set(g, "Null") }).Else().BlockFunc(func(g *jen.Group) { write(g, x) })
	}
	switch {
	case fl.ptr && always:
		nullOr(jen.Op("*").Add(val.Clone()))
	case fl.ptr && fl.t.kind == kStruct:
		opt("OptObject", val, jen.Id(g.canonFor(fl.t, n, o)))
	case fl.ptr:
		opt(map[tkind]string{kString: "OptString", kEnum: "OptString", kInt64: "OptInt", kInt32: "OptInt", kFloat: "OptFloat", kBool: "OptBool"}[fl.t.kind], val)
	case !fl.t.pointerable() && always:
		nullOr(val.Clone())
	case fl.t.kind == kRaw:
		if n != nil {
			g.unsupportedExclusion(o, "a oneOf/anyOf or schema-less value")
		}
		opt("OptRaw", val)
	case fl.t.kind == kSlice && !allExcluded(n):
		if fl.t.elem.kind == kStruct {
			opt("OptObjects", val, jen.Id(g.canonFor(fl.t.elem, elemExclusion(g, n, o), o)))
		} else {
			opt("OptArray", val, g.valueFunc(fl.t.elem, elemExclusion(g, n, o), 1, o))
		}
	case fl.t.kind == kMap && !allExcluded(n):
		opt("OptMap", append([]jen.Code{val, g.valueFunc(fl.t.elem, n.starOf(), 1, o)}, g.mapExclusions(n, o)...)...)
	case !fl.t.pointerable():
		grp.If(val.Clone().Op("!=").Nil()).BlockFunc(func(g *jen.Group) { write(g, val.Clone()) })
	default:
		write(grp, val)
	}
}

// allExcluded: every element or value of an array or map is excluded (fingerprint.exclude /x/*).
func allExcluded(n *trie) bool { return n != nil && n.star != nil && n.star.leaf }

func (n *trie) starOf() *trie {
	if n == nil {
		return nil
	}
	return n.star
}

// elemExclusion is what is excluded below each element of an array (only "*" can name them).
func elemExclusion(g *gen, n *trie, o *opPlan) *trie {
	if n == nil {
		return nil
	}
	if len(n.kids) > 0 {
		g.unsupportedExclusion(o, "an array element by index")
	}
	return n.star
}

// mapExclusions are the map keys that fingerprint.exclude names (a whole value each).
func (g *gen) mapExclusions(n *trie, o *opPlan) []jen.Code {
	if n == nil {
		return nil
	}
	keys := make([]string, 0, len(n.kids))
	for k := range n.kids {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []jen.Code
	for _, k := range keys {
		if !n.kids[k].leaf {
			g.unsupportedExclusion(o, "a member below one map key (use * for every value)")
		}
		out = append(out, jen.Lit(k))
	}
	return out
}

// appendExpr is the expression that appends the canonical form of val (an addressable expression
// of t's type, not a pointer) to b under exclusions n.
func (g *gen) appendExpr(t *tinfo, val *jen.Statement, b jen.Code, n *trie, depth int, o *opPlan) jen.Code {
	switch t.kind {
	case kString:
		return jen.Qual(pkgCanonical, "AppendString").Call(b, val)
	case kEnum:
		return jen.Qual(pkgCanonical, "AppendString").Call(b, jen.String().Call(val))
	case kInt64:
		return jen.Qual(pkgCanonical, "AppendInt").Call(b, val)
	case kInt32:
		return jen.Qual(pkgCanonical, "AppendInt").Call(b, jen.Int64().Call(val))
	case kFloat:
		return jen.Qual(pkgCanonical, "AppendFloat").Call(b, val)
	case kBool:
		return jen.Qual(pkgCanonical, "AppendBool").Call(b, val)
	case kRaw:
		if n != nil {
			g.unsupportedExclusion(o, "a oneOf/anyOf or schema-less value")
		}
		return jen.Append(b, val.Op("..."))
	case kStruct:
		return jen.Id(g.canonFor(t, n, o)).Call(b, jen.Op("&").Add(val))
	case kSlice:
		elem := elemExclusion(g, n, o)
		if elem != nil && elem.leaf {
			// Every element is excluded: the array fingerprints as [].
			return jen.Append(b, jen.Lit("[]").Op("..."))
		}
		if t.elem.kind == kStruct {
			return jen.Qual(pkgCanonical, "AppendObjects").Call(b, val, jen.Id(g.canonFor(t.elem, elem, o)))
		}
		return jen.Qual(pkgCanonical, "AppendArray").Call(b, val, g.valueFunc(t.elem, elem, depth+1, o))
	case kMap:
		if allExcluded(n) {
			return jen.Append(b, jen.Lit("{}").Op("..."))
		}
		args := []jen.Code{b, val, g.valueFunc(t.elem, n.starOf(), depth+1, o)}
		return jen.Qual(pkgCanonical, "AppendMap").Call(append(args, g.mapExclusions(n, o)...)...)
	}
	return nil
}

// valueFunc is a func([]byte, V) []byte appending one array element or map value: a canonical
// helper for plain scalars, else a closure.
func (g *gen) valueFunc(t *tinfo, n *trie, depth int, o *opPlan) jen.Code {
	if n == nil {
		switch t.kind {
		case kString:
			return jen.Qual(pkgCanonical, "AppendString")
		case kInt64:
			return jen.Qual(pkgCanonical, "AppendInt")
		case kFloat:
			return jen.Qual(pkgCanonical, "AppendFloat")
		case kBool:
			return jen.Qual(pkgCanonical, "AppendBool")
		case kEnum:
			return jen.Qual(pkgCanonical, "AppendStringOf").Types(jen.Id(t.name))
		case kInt32:
			return jen.Qual(pkgCanonical, "AppendIntOf").Types(jen.Int32())
		case kRaw:
			return jen.Qual(pkgCanonical, "AppendRaw").Types(t.code())
		}
	}
	e := fmt.Sprintf("e%d", depth)
	return jen.Func().Params(jen.Id("b").Index().Byte(), jen.Id(e).Add(t.code())).Index().Byte().Block(
		jen.Return(g.appendExpr(t, jen.Id(e), jen.Id("b"), n, depth, o)))
}

func (g *gen) unsupportedExclusion(o *opPlan, what string) {
	g.diags.Errorf(o.op.Settings.Loc, "unsupported-exclusion",
		"operation %s: fingerprint.exclude reaches into %s, which idemgen cannot exclude statically", o.op.ID, what)
}

// addlMembers is the expression of the sorted canonical.Members of a struct's typed
// additionalProperties map, leaving out keys the exclusions name (nil when every value is).
func (g *gen) addlMembers(t *tinfo, c *canonFunc) jen.Code {
	declared := map[string]bool{}
	for _, f := range t.fields {
		declared[f.p.Name] = true
	}
	var skip []jen.Code
	var elem *trie
	if c.excl != nil {
		keys := make([]string, 0, len(c.excl.kids))
		for k := range c.excl.kids {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if declared[k] {
				continue
			}
			if !c.excl.kids[k].leaf {
				g.unsupportedExclusion(c.op, "a member below one map key (use * for every value)")
			}
			skip = append(skip, jen.Lit(k))
		}
		elem = c.excl.star
	}
	if elem != nil && elem.leaf {
		return jen.Nil()
	}
	args := []jen.Code{jen.Id("v").Dot(t.extra), g.valueFunc(t.addl, elem, 1, c.op)}
	return jen.Qual(pkgCanonical, "MapMembers").Call(append(args, skip...)...)
}
