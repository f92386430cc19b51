package generator

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// Go 1.22 ServeMux panics when two patterns overlap without one being more specific
// ("POST /users/{id}/evm/smart-accounts/{a}/send" against "POST /users/{id}/evm/{a}/send/{b}",
// a real pair in Coinbase's spec). Such operations share one route: a pattern whose segments
// are wildcards wherever the members differ, and a dispatcher that tries the members in order
// of specificity (most literal segments first), checks their literal segments and hands the
// request, with the members' own path values set, to the member's wrapper; none matching is
// 404. Conflicts are found at generation time with scratch ServeMuxes, so Register never
// meets one among its own routes.

// routePart is one path segment of an operation's pattern: a literal, a wildcard that is one
// parameter, or a wildcard over a mixed segment (lits: its literal pieces).
type routePart struct {
	lit  string
	wild string
	lits []string
}

// route is one ServeMux registration: one operation, or a group of overlapping ones.
type route struct {
	method  string
	parts   []string // segments of the pattern; "" marks a group wildcard
	members []*opPlan
	wilds   []string // group wildcard names, parallel to parts
	trail   bool     // the path ends with '/': the pattern ends with {$}
}

func (r *route) pattern() string {
	segs := make([]string, len(r.parts))
	for i, p := range r.parts {
		if p == "" {
			segs[i] = "{" + r.wilds[i] + "}"
		} else {
			segs[i] = p
		}
	}
	p := r.method + " /" + strings.Join(segs, "/")
	if r.trail {
		if len(segs) > 0 {
			p += "/"
		}
		p += "{$}"
	}
	return p
}

// planRoutes builds the route list, merging operations whose patterns conflict.
func (g *planner) planRoutes() {
	var routes []*route
	for _, o := range g.ops {
		if o.pattern == "" {
			continue
		}
		if reason := invalidPattern(o.pattern); reason != "" {
			g.diags.Errorf(o.op.Loc, "bad-path", "operation %s: path %q gives the ServeMux pattern %q, which Go refuses: %s",
				o.op.ID, o.op.Path, o.pattern, reason)
			continue
		}
		r := &route{method: o.op.Method, members: []*opPlan{o}, trail: strings.HasSuffix(o.pattern, "{$}")}
		// The parts are the route's segments: a trailing "/{$}" is not one (r.trail keeps it),
		// so no part is empty ("" marks a group wildcard).
		path := strings.TrimSuffix(strings.TrimPrefix(o.pattern, o.op.Method+" /"), "{$}")
		if path = strings.TrimSuffix(path, "/"); path != "" {
			r.parts = strings.Split(path, "/")
		}
		routes = append(routes, r)
	}
	for {
		i, j := firstConflict(routes)
		if i < 0 {
			i, j = firstShadow(routes)
		}
		if i < 0 {
			break
		}
		m, ok := g.merge(routes[i], routes[j])
		if !ok {
			o := routes[j].members[0]
			g.diags.Errorf(o.op.Loc, "route-conflict",
				"operation %s: Go's ServeMux cannot route %q beside %q, and idemgen cannot merge them",
				o.op.ID, routes[j].pattern(), routes[i].pattern())
			routes = append(routes[:j], routes[j+1:]...)
			continue
		}
		routes[i] = m
		routes = append(routes[:j], routes[j+1:]...)
	}
	g.routes = routes
}

// invalidPattern returns why ServeMux refuses pattern on its own, or "".
func invalidPattern(pattern string) (reason string) {
	defer func() {
		if r := recover(); r != nil {
			reason = fmt.Sprint(r)
		}
	}()
	http.NewServeMux().Handle(pattern, http.NotFoundHandler())
	return ""
}

// conflicts reports whether ServeMux refuses a and b together.
func conflicts(a, b string) (bad bool) {
	defer func() {
		if recover() != nil {
			bad = true
		}
	}()
	mux := http.NewServeMux()
	mux.Handle(a, http.NotFoundHandler())
	mux.Handle(b, http.NotFoundHandler())
	return false
}

// firstConflict returns the first conflicting pair (i < j), or -1, -1.
func firstConflict(routes []*route) (int, int) {
	pats := make([]string, len(routes))
	for i, r := range routes {
		pats[i] = r.pattern()
	}
	for j := range routes {
		for i := 0; i < j; i++ {
			// Only same-method, same-length patterns can conflict; skip the rest cheaply.
			if routes[i].method == routes[j].method && len(routes[i].parts) == len(routes[j].parts) &&
				routes[i].trail == routes[j].trail && conflicts(pats[i], pats[j]) {
				return i, j
			}
		}
	}
	return -1, -1
}

// firstShadow returns a group route and another route (i < j) that ServeMux would hold
// together although some path matches both, or -1, -1. The group's pattern has wildcards
// wherever its members differ, so a route more specific than that pattern (and so no conflict
// for ServeMux) would take paths that one of the members should win: "/{t}/accounts/{r}.csv"
// beside a group "/{a}/{b}/{c}" holding "/{t}/accounts/close". Such a route joins the group,
// whose dispatcher orders all members by specificity.
func firstShadow(routes []*route) (int, int) {
	for j := range routes {
		for i := range routes {
			if i == j || len(routes[i].members) < 2 && len(routes[j].members) < 2 {
				continue
			}
			a, b := routes[i], routes[j]
			if a.method == b.method && len(a.parts) == len(b.parts) && a.trail == b.trail && overlap(a.parts, b.parts) {
				return min(i, j), max(i, j)
			}
		}
	}
	return -1, -1
}

// overlap reports whether some path matches both patterns' segments: at every position a
// wildcard on either side, or the same literal.
func overlap(a, b []string) bool {
	for i := range a {
		wa, wb := a[i] == "" || strings.HasPrefix(a[i], "{"), b[i] == "" || strings.HasPrefix(b[i], "{")
		if !wa && !wb && a[i] != b[i] {
			return false
		}
	}
	return true
}

// merge makes one group route of a and b: literal where every member has the same literal,
// a wildcard elsewhere.
func (g *planner) merge(a, b *route) (*route, bool) {
	if a.method != b.method || len(a.parts) != len(b.parts) || a.trail != b.trail {
		return nil, false
	}
	m := &route{method: a.method, trail: a.trail, members: append(append([]*opPlan(nil), a.members...), b.members...)}
	m.parts = make([]string, len(a.parts))
	m.wilds = make([]string, len(a.parts))
	names := newNamer()
	for _, o := range m.members {
		for _, p := range o.parts {
			if p.wild != "" {
				names.take(p.wild)
			}
		}
	}
	for i := range a.parts {
		if a.parts[i] != "" && a.parts[i] == b.parts[i] && !strings.Contains(a.parts[i], "{") {
			m.parts[i] = a.parts[i]
			continue
		}
		m.wilds[i] = names.take("idemgenSeg" + strconv.Itoa(i))
	}
	// Most specific first: more literal segments, then spec order (stable).
	sort.SliceStable(m.members, func(x, y int) bool { return literalCount(m.members[x]) > literalCount(m.members[y]) })
	return m, true
}

func literalCount(o *opPlan) int {
	n := 0
	for _, p := range o.parts {
		if p.wild == "" {
			n++
		}
	}
	return n
}

// emitRegisterRoutes writes the body of Register: one mux.Handle per route.
func (p *plan) emitRegisterRoutes(grp *jen.Group) {
	for _, r := range p.routes {
		if len(r.members) == 1 {
			o := r.members[0]
			grp.If(jen.Id("h").Dot(o.name).Op("!=").Nil()).Block(
				jen.Id("pattern").Op("=").Lit(r.pattern()),
				jen.Id("mux").Dot("Handle").Call(jen.Id("pattern"), jen.Id(o.handler).Call(jen.Id("rt"), jen.Id("h").Dot(o.name))),
			)
			continue
		}
		var any *jen.Statement
		for _, o := range r.members {
			c := jen.Id("h").Dot(o.name).Op("!=").Nil()
			if any == nil {
				any = c
			} else {
				any = any.Op("||").Add(c)
			}
		}
		var ids []string
		for _, o := range r.members {
			ids = append(ids, o.op.ID)
		}
		grp.Comment("One route for " + strings.Join(ids, ", ") + ": ServeMux cannot hold their patterns together.")
		grp.If(any).BlockFunc(func(b *jen.Group) {
			b.Id("pattern").Op("=").Lit(r.pattern())
			for _, o := range r.members {
				b.Id("h"+o.name).Op(":=").Id(o.handler).Call(jen.Id("rt"), jen.Id("h").Dot(o.name))
			}
			b.Id("mux").Dot("Handle").Call(jen.Id("pattern"), jen.Qual("net/http", "HandlerFunc").Call(
				jen.Func().Params(jen.Id("w").Qual("net/http", "ResponseWriter"), jen.Id("r").Op("*").Qual("net/http", "Request")).BlockFunc(func(fb *jen.Group) {
					fb.Switch().BlockFunc(func(sw *jen.Group) {
						for _, o := range r.members {
							p.emitMemberCase(sw, r, o)
						}
						sw.Default().Block(jen.Qual("net/http", "NotFound").Call(jen.Id("w"), jen.Id("r")))
					})
				}),
			))
		})
	}
}

// emitMemberCase writes the case of a group dispatcher that recognises member o: its literal
// segments (and the literal pieces of mixed segments) must match; then its own path values are
// set from the group's wildcards.
func (p *plan) emitMemberCase(sw *jen.Group, r *route, o *opPlan) {
	cond := jen.Id("h").Dot(o.name).Op("!=").Nil()
	var sets []jen.Code
	for i, p := range o.parts {
		if r.parts[i] != "" {
			continue // a literal the pattern itself matched
		}
		val := jen.Id("r").Dot("PathValue").Call(jen.Lit(r.wilds[i]))
		switch {
		case p.wild == "":
			cond = cond.Op("&&").Add(val).Op("==").Lit(p.lit)
		case p.lits != nil:
			args := []jen.Code{val.Clone()}
			for _, l := range p.lits {
				args = append(args, jen.Lit(l))
			}
			cond = cond.Op("&&").Qual(pkgGen, "SegmentMatches").Call(args...)
			sets = append(sets, jen.Id("r").Dot("SetPathValue").Call(jen.Lit(p.wild), val.Clone()))
		default:
			sets = append(sets, jen.Id("r").Dot("SetPathValue").Call(jen.Lit(p.wild), val.Clone()))
		}
	}
	sw.Case(cond).Block(append(sets, jen.Id("h"+o.name).Dot("ServeHTTP").Call(jen.Id("w"), jen.Id("r")))...)
}
