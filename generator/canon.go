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

// canonVal is how the canonical form of one value is written, decided while planning: its Go
// type, what fingerprint.exclude leaves out below it, the canonicalizer of a struct, and for an
// array or a map its elements. Emitters render it and decide nothing.
type canonVal struct {
	t    *tinfo
	excl *trie      // what is excluded below the value; nil when nothing is
	fn   *canonFunc // kStruct: its canonicalizer under excl
	elem *canonVal  // kSlice: each element; kMap: each value
	skip []string   // kMap: the keys excluded whole, sorted
	none bool       // kSlice, kMap: every element or value is excluded, so it is written [] or {}
}

// canonFunc is one generated struct canonicalizer: appendCanonical<T>(b, v) for struct t under
// exclusions excl.
type canonFunc struct {
	name string
	t    *tinfo
	excl *trie
	op   *opPlan // the first operation that needs it: error locations and the name's suffix
	// members are the declared members written, in RFC 8785 order (planCanonMembers).
	members []canonMember
	// addl writes the values of a typed additionalProperties map (t.addl), leaving out the
	// keys in addlSkip; nil when every value is excluded (or t has no typed map).
	addl     *canonVal
	addlSkip []string
}

// canonMember is one declared member a canonicalizer writes.
type canonMember struct {
	fl  *field
	val *canonVal
}

// canonValue plans the canonical form of a value of type t under exclusions n for operation o:
// the canonicalizers it needs are registered (their members are planned later, by
// planCanonMembers), and exclusions idemgen cannot apply statically are located errors.
func (g *planner) canonValue(t *tinfo, n *trie, o *opPlan) *canonVal {
	v := &canonVal{t: t, excl: n}
	switch t.kind {
	case kRaw:
		if n != nil {
			g.unsupportedExclusion(o, "a oneOf/anyOf or schema-less value")
		}
	case kStruct:
		v.fn = g.canonFor(t, n, o)
	case kNullable:
		v.elem = g.canonValue(t.elem, n, o)
	case kSlice:
		elem := g.elemExclusion(n, o)
		if elem != nil && elem.leaf {
			v.none = true // every element is excluded: the array fingerprints as []
			break
		}
		v.elem = g.canonValue(t.elem, elem, o)
	case kMap:
		if allExcluded(n) {
			v.none = true
			break
		}
		v.elem = g.canonValue(t.elem, n.starOf(), o)
		v.skip = g.mapExclusions(n, o)
	}
	return v
}

// canonFor returns the canonicalizer of struct t under exclusions n, registering it on first use.
func (g *planner) canonFor(t *tinfo, n *trie, o *opPlan) *canonFunc {
	key := t.name + "\x00" + n.sig()
	if c, ok := g.canon[key]; ok {
		return c
	}
	name := "appendCanonical" + t.name
	if n.sig() != "" {
		name += "For" + o.name
	}
	c := &canonFunc{name: g.names.take(name), t: t, excl: n, op: o}
	g.canon[key] = c
	g.canons = append(g.canons, c)
	return c
}

// planCanon plans the canonical forms an operation's decoder writes: its JSON or multipart body
// under the operation's exclusions, the fields left out of a form body's fingerprint, and each
// deepObject query parameter's value. planCanonicalizers then plans the members of every
// canonicalizer these registered, breadth first, so that the canonicalizers are declared in the
// order in which they are first used.
func (g *planner) planCanon(o *opPlan) {
	if o.bodyT != nil && !o.failed && !o.frameRaw() {
		for _, c := range o.contents {
			switch {
			case c.c.Kind == model.ContentRaw:
				// A mixed body's raw media types are framed as their bytes.
			case c.c.Kind == model.ContentForm && o.tree:
				o.treeExcl = g.formTreeExclusions(o)
			case c.c.Kind == model.ContentForm:
				o.formExcl = formExclusions(o.op)
			case o.bodyCanon == nil:
				excl := opExclusions(o.op)
				if o.keyRaw != nil && len(o.op.Settings.Fingerprint.Exclude) == 0 {
					// The key stays in a body kept whole (a oneOf/anyOf): requests under one
					// key carry the same key, so the fingerprint compares the rest alike.
					excl = nil
				}
				o.bodyCanon = g.canonValue(o.bodyT, excl, o)
			}
		}
	}
	for _, pp := range o.pparams {
		if pp.deep {
			pp.canon = g.canonValue(pp.t, nil, o)
		}
	}
}

// planCanonicalizers plans the members of every registered canonicalizer, including those that
// planning members registers.
func (g *planner) planCanonicalizers() {
	for i := 0; i < len(g.canons); i++ {
		g.planCanonMembers(g.canons[i])
	}
}

// planCanonMembers decides what canonicalizer c writes: the values of a typed
// additionalProperties map less the keys the exclusions name, then each declared member that is
// not excluded, sorted in RFC 8785 order (UTF-16 code units).
func (g *planner) planCanonMembers(c *canonFunc) {
	t := c.t
	if t.addl != nil {
		c.addl, c.addlSkip = g.addlMembers(c)
	}
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
	for _, m := range ms {
		c.members = append(c.members, canonMember{fl: m.fl, val: g.canonValue(m.fl.t, m.excl, c.op)})
	}
}

// addlMembers plans the typed additionalProperties values of c's struct: the undeclared keys the
// exclusions name are left out; nil when every value is.
func (g *planner) addlMembers(c *canonFunc) (*canonVal, []string) {
	t := c.t
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
	if elem != nil && elem.leaf {
		return nil, skip
	}
	return g.canonValue(t.addl, elem, c.op), skip
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
func (g *planner) elemExclusion(n *trie, o *opPlan) *trie {
	if n == nil {
		return nil
	}
	if len(n.kids) > 0 {
		g.unsupportedExclusion(o, "an array element by index")
	}
	return n.star
}

// mapExclusions are the map keys that fingerprint.exclude names (a whole value each), sorted.
func (g *planner) mapExclusions(n *trie, o *opPlan) []string {
	if n == nil {
		return nil
	}
	keys := make([]string, 0, len(n.kids))
	for k := range n.kids {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !n.kids[k].leaf {
			g.unsupportedExclusion(o, "a member below one map key (use * for every value)")
		}
	}
	return keys
}

func (g *planner) unsupportedExclusion(o *opPlan, what string) {
	g.diags.Errorf(o.op.Settings.Loc, "unsupported-exclusion",
		"operation %s: fingerprint.exclude reaches into %s, which idemgen cannot exclude statically", o.op.ID, what)
}

// emitCanonical writes the struct canonicalizers the decode functions use.
func (p *plan) emitCanonical(f *jen.File) {
	for _, c := range p.canons {
		p.emitStructCanon(f, c)
	}
}

// emitStructCanon writes appendCanonical<T>(b, v) for one struct under one exclusion set: one
// canonical.ObjectWriter call per member, in RFC 8785 order.
func (p *plan) emitStructCanon(f *jen.File, c *canonFunc) {
	t := c.t
	var names []string
	for _, m := range c.members {
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
		case t.addl != nil && c.addl != nil:
			args := []jen.Code{jen.Id("v").Dot(t.extra), p.valueFunc(c.addl, 1)}
			extra = jen.Qual(pkgCanonical, "MapMembers").Call(append(args, lits(c.addlSkip)...)...)
		case t.addl != nil:
			// Every value of the map is excluded.
		case t.extra != "":
			extra = jen.Id("v").Dot(t.extra)
		}
		grp.List(jen.Id("o"), jen.Id("b")).Op(":=").Qual(pkgCanonical, "WriteObject").Call(jen.Id("b"), extra)
		for _, m := range c.members {
			p.canonMember(grp, m)
		}
		grp.Return(jen.Id("o").Dot("End").Call(jen.Id("b")))
	})
	f.Line()
}

// lits are string literals.
func lits(ss []string) []jen.Code {
	out := make([]jen.Code, len(ss))
	for i, s := range ss {
		out[i] = jen.Lit(s)
	}
	return out
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

// canonMember writes one member of a struct canonicalizer. Absent members (nil) are left out; a
// three-state member (optional and nullable) sent as null is written as null, so absent and null
// fingerprint apart, as the handler tells them apart; a required member that is nil (nullable)
// is written as null.
func (p *plan) canonMember(grp *jen.Group, m canonMember) {
	fl, cv := m.fl, m.val
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
			grp.Add(b()).Op("=").Add(p.appendExpr(cv, x, jen.Id("o").Dot("Key").Call(b(), name), 0))
		}
	}
	if fl.three {
		// Absent writes nothing, null writes null: the three states fingerprint apart.
		grp.If(val.Clone().Op("!=").Nil()).BlockFunc(func(g *jen.Group) {
			g.If(val.Clone().Dot("Null")).BlockFunc(func(g *jen.Group) { set(g, "Null") }).Else().BlockFunc(func(g *jen.Group) {
				write(g, val.Clone().Dot("Value"))
			})
		})
		return
	}
	nullOr := func(x *jen.Statement) {
		grp.If(val.Clone().Op("==").Nil()).BlockFunc(func(g *jen.Group) { set(g, "Null") }).Else().BlockFunc(func(g *jen.Group) { write(g, x) })
	}
	switch {
	case fl.ptr && always:
		nullOr(jen.Op("*").Add(val.Clone()))
	case fl.ptr && fl.t.kind == kStruct:
		opt("OptObject", val, jen.Id(cv.fn.name))
	case fl.ptr && fl.t.kind == kFile:
		opt("OptObject", val, jen.Qual(pkgGen, "AppendFile"))
	case fl.ptr:
		opt(map[tkind]string{kString: "OptString", kEnum: "OptString", kInt64: "OptInt", kInt32: "OptInt", kFloat: "OptFloat", kBool: "OptBool"}[fl.t.kind], val)
	case !fl.t.pointerable() && always:
		nullOr(val.Clone())
	case fl.t.kind == kRaw:
		opt("OptRaw", val)
	case fl.t.kind == kSlice && !cv.none:
		switch fl.t.elem.kind {
		case kStruct:
			opt("OptObjects", val, jen.Id(cv.elem.fn.name))
		case kFile:
			opt("OptObjects", val, jen.Qual(pkgGen, "AppendFile"))
		default:
			opt("OptArray", val, p.valueFunc(cv.elem, 1))
		}
	case fl.t.kind == kMap && !cv.none:
		opt("OptMap", append([]jen.Code{val, p.valueFunc(cv.elem, 1)}, lits(cv.skip)...)...)
	case !fl.t.pointerable():
		grp.If(val.Clone().Op("!=").Nil()).BlockFunc(func(g *jen.Group) { write(g, val.Clone()) })
	default:
		write(grp, val)
	}
}

// appendExpr is the expression that appends the canonical form of val (an addressable expression
// of cv's type, not a pointer) to b.
func (p *plan) appendExpr(cv *canonVal, val *jen.Statement, b jen.Code, depth int) jen.Code {
	t := cv.t
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
		return jen.Append(b, val.Op("..."))
	case kStruct:
		return jen.Id(cv.fn.name).Call(b, jen.Op("&").Add(val))
	case kNullable:
		return jen.Qual(pkgCanonical, "AppendNullable").Call(b, val, p.valueFunc(cv.elem, depth+1))
	case kFile:
		return jen.Qual(pkgGen, "AppendFile").Call(b, jen.Op("&").Add(val))
	case kSlice:
		switch {
		case cv.none:
			return jen.Append(b, jen.Lit("[]").Op("..."))
		case t.elem.kind == kStruct:
			return jen.Qual(pkgCanonical, "AppendObjects").Call(b, val, jen.Id(cv.elem.fn.name))
		case t.elem.kind == kFile:
			return jen.Qual(pkgCanonical, "AppendObjects").Call(b, val, jen.Qual(pkgGen, "AppendFile"))
		}
		return jen.Qual(pkgCanonical, "AppendArray").Call(b, val, p.valueFunc(cv.elem, depth+1))
	case kMap:
		if cv.none {
			return jen.Append(b, jen.Lit("{}").Op("..."))
		}
		args := []jen.Code{b, val, p.valueFunc(cv.elem, depth+1)}
		return jen.Qual(pkgCanonical, "AppendMap").Call(append(args, lits(cv.skip)...)...)
	}
	return nil
}

// valueFunc is a func([]byte, V) []byte appending one array element or map value: a canonical
// helper for plain scalars, else a closure.
func (p *plan) valueFunc(cv *canonVal, depth int) jen.Code {
	t := cv.t
	if cv.excl == nil {
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
		jen.Return(p.appendExpr(cv, jen.Id(e), jen.Id("b"), depth)))
}
