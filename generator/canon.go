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

// emitCanonical writes the struct canonicalizers the operations' decoders use (planned while
// the decoders were emitted).
func (g *gen) emitCanonical(f *jen.File) {
	// Emitting a canonicalizer may plan more (nested structs): drain the list.
	for i := 0; i < len(g.canonList); i++ {
		c := g.canonList[i]
		g.emitStructCanon(f, c)
	}
}

// emitStructCanon writes appendCanonical<T>(b, v) for one struct under one exclusion set.
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
		grp.Id("b").Op("=").Append(jen.Id("b"), jen.LitRune('{'))
		if len(ms) == 0 && t.extra == "" {
			grp.Return(jen.Append(jen.Id("b"), jen.LitRune('}')))
			return
		}
		grp.Id("start").Op(":=").Len(jen.Id("b"))
		switch {
		case t.addl != nil:
			// Typed undeclared members: canonicalized and sorted here, then merged like the
			// generic ones. Excluded keys (fingerprint.exclude through the map) are skipped.
			g.emitAddlMembers(grp, t, c)
		case t.extra != "":
			grp.Id("x").Op(":=").Id("v").Dot(t.extra)
		}
		static := false // a member that is always written precedes: commas are static
		for _, m := range ms {
			fl := m.fl
			if t.extra != "" {
				grp.List(jen.Id("b"), jen.Id("x")).Op("=").Id("x").Dot("AppendBefore").Call(jen.Id("b"), jen.Id("start"), jen.Lit(fl.p.Name))
			}
			quoted := string(canonical.AppendString(nil, fl.p.Name)) + ":"
			name := func(grp *jen.Group) {
				if static {
					grp.Id("b").Op("=").Append(jen.Id("b"), jen.Lit(","+quoted).Op("..."))
				} else {
					grp.Id("b").Op("=").Qual(pkgCanonical, "Comma").Call(jen.Id("b"), jen.Id("start"))
					grp.Id("b").Op("=").Append(jen.Id("b"), jen.Lit(quoted).Op("..."))
				}
			}
			always := fl.p.Required && !fl.bodyKey
			val := jen.Id("v").Dot(fl.name)
			switch {
			case fl.ptr && always:
				// Required but nullable: null is written as null.
				grp.If(val.Clone().Op("==").Nil()).BlockFunc(func(b *jen.Group) {
					name(b)
					b.Id("b").Op("=").Qual(pkgCanonical, "AppendNull").Call(jen.Id("b"))
				}).Else().BlockFunc(func(b *jen.Group) {
					name(b)
					g.appendVal(b, fl.t, jen.Op("*").Add(val.Clone()), m.excl, 0, c.op)
				})
			case fl.ptr && fl.t.kind == kStruct:
				grp.If(val.Clone().Op("!=").Nil()).BlockFunc(func(b *jen.Group) {
					name(b)
					b.Id("b").Op("=").Id(g.canonFor(fl.t, m.excl, c.op)).Call(jen.Id("b"), val.Clone())
				})
			case fl.ptr:
				grp.If(val.Clone().Op("!=").Nil()).BlockFunc(func(b *jen.Group) {
					name(b)
					g.appendVal(b, fl.t, jen.Op("*").Add(val.Clone()), m.excl, 0, c.op)
				})
			case !fl.t.pointerable() && always:
				grp.If(val.Clone().Op("==").Nil()).BlockFunc(func(b *jen.Group) {
					name(b)
					b.Id("b").Op("=").Qual(pkgCanonical, "AppendNull").Call(jen.Id("b"))
				}).Else().BlockFunc(func(b *jen.Group) {
					name(b)
					g.appendVal(b, fl.t, val.Clone(), m.excl, 0, c.op)
				})
			case !fl.t.pointerable():
				grp.If(val.Clone().Op("!=").Nil()).BlockFunc(func(b *jen.Group) {
					name(b)
					g.appendVal(b, fl.t, val.Clone(), m.excl, 0, c.op)
				})
			default:
				name(grp)
				g.appendVal(grp, fl.t, val.Clone(), m.excl, 0, c.op)
			}
			if always {
				static = true
			}
		}
		if t.extra != "" {
			grp.Id("b").Op("=").Id("x").Dot("AppendAll").Call(jen.Id("b"), jen.Id("start"))
		}
		grp.Return(jen.Append(jen.Id("b"), jen.LitRune('}')))
	})
	f.Line()
}

// appendVal emits `b = ...` statements appending the canonical form of val (an addressable
// expression of t's type, not a pointer) under exclusions n.
func (g *gen) appendVal(grp *jen.Group, t *tinfo, val *jen.Statement, n *trie, depth int, o *opPlan) {
	b := jen.Id("b")
	set := func(c jen.Code) { grp.Id("b").Op("=").Add(c) }
	switch t.kind {
	case kString:
		set(jen.Qual(pkgCanonical, "AppendString").Call(b, val))
	case kEnum:
		set(jen.Qual(pkgCanonical, "AppendString").Call(b, jen.String().Call(val)))
	case kInt64:
		set(jen.Qual(pkgCanonical, "AppendInt").Call(b, val))
	case kInt32:
		set(jen.Qual(pkgCanonical, "AppendInt").Call(b, jen.Int64().Call(val)))
	case kFloat:
		set(jen.Qual(pkgCanonical, "AppendFloat").Call(b, val))
	case kBool:
		set(jen.Qual(pkgCanonical, "AppendBool").Call(b, val))
	case kRaw:
		if n != nil {
			g.unsupportedExclusion(o, "a oneOf/anyOf or schema-less value")
		}
		set(jen.Append(b, val.Op("...")))
	case kStruct:
		set(jen.Id(g.canonFor(t, n, o)).Call(b, jen.Op("&").Add(val)))
	case kSlice:
		var elem *trie
		if n != nil {
			if len(n.kids) > 0 {
				g.unsupportedExclusion(o, "an array element by index")
			}
			elem = n.star
		}
		if elem != nil && elem.leaf {
			// Every element is excluded: the array fingerprints as [].
			set(jen.Append(b, jen.Lit("[]").Op("...")))
			return
		}
		i := fmt.Sprintf("i%d", depth)
		set(jen.Append(b, jen.LitRune('[')))
		grp.For(jen.Id(i).Op(":=").Range().Add(val)).BlockFunc(func(lb *jen.Group) {
			lb.If(jen.Id(i).Op(">").Lit(0)).Block(jen.Id("b").Op("=").Append(jen.Id("b"), jen.LitRune(',')))
			g.appendVal(lb, t.elem, val.Clone().Index(jen.Id(i)), elem, depth+1, o)
		})
		set(jen.Append(b, jen.LitRune(']')))
	case kMap:
		var exclude []jen.Code
		var elem *trie
		if n != nil {
			keys := make([]string, 0, len(n.kids))
			for k := range n.kids {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if !n.kids[k].leaf {
					g.unsupportedExclusion(o, "a member below one map key (use * for every value)")
				}
				exclude = append(exclude, jen.Lit(k))
			}
			elem = n.star
		}
		if elem != nil && elem.leaf {
			set(jen.Append(b, jen.Lit("{}").Op("...")))
			return
		}
		args := []jen.Code{b, val, g.valueFunc(t.elem, elem, depth+1, o)}
		set(jen.Qual(pkgCanonical, "AppendMap").Call(append(args, exclude...)...))
	}
}

// valueFunc is a func([]byte, V) []byte appending one map value: a canonical helper for plain
// scalars, else a closure.
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
		}
	}
	e := fmt.Sprintf("e%d", depth)
	return jen.Func().Params(jen.Id("b").Index().Byte(), jen.Id(e).Add(t.code())).Index().Byte().BlockFunc(func(grp *jen.Group) {
		g.appendVal(grp, t, jen.Id(e), n, depth, o)
		grp.Return(jen.Id("b"))
	})
}

func (g *gen) unsupportedExclusion(o *opPlan, what string) {
	g.diags.Errorf(o.op.Settings.Loc, "unsupported-exclusion",
		"operation %s: fingerprint.exclude reaches into %s, which idemgen cannot exclude statically", o.op.ID, what)
}

// emitAddlMembers builds x, the sorted canonical.Members of a struct's typed
// additionalProperties map, leaving out keys the exclusions name.
func (g *gen) emitAddlMembers(grp *jen.Group, t *tinfo, c *canonFunc) {
	declared := map[string]bool{}
	for _, f := range t.fields {
		declared[f.p.Name] = true
	}
	var skip []string
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
			skip = append(skip, k)
		}
		elem = c.excl.star
	}
	grp.Var().Id("x").Qual(pkgCanonical, "Members")
	grp.For(jen.List(jen.Id("k"), jen.Id("e")).Op(":=").Range().Id("v").Dot(t.extra)).BlockFunc(func(lb *jen.Group) {
		if len(skip) > 0 {
			var cases []jen.Code
			for _, k := range skip {
				cases = append(cases, jen.Lit(k))
			}
			lb.Switch(jen.Id("k")).Block(jen.Case(cases...).Block(jen.Continue()))
		}
		if elem != nil && elem.leaf {
			lb.Continue()
			return
		}
		lb.Id("b").Op(":=").Index().Byte().Parens(jen.Nil())
		g.appendVal(lb, t.addl, jen.Id("e"), elem, 1, c.op)
		lb.Id("x").Op("=").Append(jen.Id("x"), jen.Qual(pkgCanonical, "Member").Values(jen.Dict{
			jen.Id("Name"):  jen.Id("k"),
			jen.Id("Value"): jen.Id("b"),
		}))
	})
	grp.Qual("slices", "SortFunc").Call(jen.Id("x"), jen.Func().Params(jen.List(jen.Id("p"), jen.Id("q")).Qual(pkgCanonical, "Member")).Int().Block(
		jen.Return(jen.Qual(pkgCanonical, "Compare").Call(jen.Id("p").Dot("Name"), jen.Id("q").Dot("Name")))))
}
