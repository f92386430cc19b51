package runtime

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store"
)

// Guard serves the marked operations of a web framework that routes requests and renders its
// handlers' errors on its own (echo, gin): the framework's adapter finds the operation from the
// route the framework matched (Route), and Serve runs the request through the same checks and
// state machine as Middleware, calling back into the framework (Exec) when the request is to
// run. What Serve stores is what Exec wrote to the recording ResponseWriter it is given, so Exec
// must run the framework's handler chain to its end, the framework's own rendering of a
// handler's error included (echo's HTTPErrorHandler, a gin error middleware): what is stored is
// then what the client would have got without idemgen.
//
// The adapters github.com/idemgen/idemgen/adapters/echo and .../adapters/gin are built on it; a
// Guard is what another framework's adapter needs. DB is the store's handle type
// (pgstore.DBTX for PostgreSQL). A Guard is safe for concurrent use.
type Guard[DB any] struct {
	rt *Runtime
	st store.Transactional[DB]
	// byID holds every operation; byShape the operations of each method and route shape
	// (routeShape), most specific first.
	byID    map[string]*GuardRoute
	byShape map[string]*GuardRoute
	// patterns caches Route's answers by method and route pattern (copied on write: a router
	// has a fixed set of routes, so after the first requests every lookup is a read).
	patterns atomic.Pointer[map[patternKey]*GuardRoute]
	mu       sync.Mutex
}

// GuardRoute is the marked operation (or, when a router's route cannot tell them apart, the
// operations) that a route serves; Guard.Route and Guard.RouteByID return it for Guard.Serve.
type GuardRoute struct {
	// candidates share method and route shape; Serve takes the first whose template fits the
	// path parameter values (the literal text of a segment such as "{id}:cancel").
	candidates []*tableRoute
}

// Operation returns the settings of the route's operation (the most specific one when several
// operations share the route's shape).
func (g *GuardRoute) Operation() *Operation { return g.candidates[0].Operation }

// Exec runs the framework's handler chain for a request Serve lets run: it installs w as the
// framework's response writer and r as its request (r carries the transaction or lease of
// TxFrom and LeaseFrom in its context, and a body that is what the fingerprint covers), runs the
// handlers and the framework's rendering of their error, and returns once the response is
// complete. A non-nil error fails the request as a handler error does: 500 problem `internal`,
// the transaction rolled back, the key released, and the error logged.
type Exec func(w http.ResponseWriter, r *http.Request) error

// NewGuard returns the Guard of routes (the generated Routes function) on rt. It fails when
// routes hold an operation twice, or when rt's store cannot run DB writes in its transactions.
func NewGuard[DB any](rt *Runtime, routes []Route) (*Guard[DB], error) {
	if rt == nil {
		return nil, fmt.Errorf("guard: nil *Runtime")
	}
	st, ok := rt.cfg.Store.(store.Transactional[DB])
	if !ok {
		var db DB
		return nil, fmt.Errorf("guard: the store %T cannot run %T writes in its transactions", rt.cfg.Store, any(&db))
	}
	g := &Guard[DB]{rt: rt, st: st, byID: map[string]*GuardRoute{}, byShape: map[string]*GuardRoute{}}
	for i, route := range routes {
		op := route.Operation
		if op == nil || route.Decode == nil {
			return nil, fmt.Errorf("guard: route %d has no operation or decoder", i)
		}
		if _, dup := g.byID[op.ID]; dup {
			return nil, fmt.Errorf("guard: operation %s is listed twice", op.ID)
		}
		tr := &tableRoute{Route: route, ep: newEndpoint(op)}
		g.byID[op.ID] = &GuardRoute{candidates: []*tableRoute{tr}}
		key := op.Method + " " + routeShape(op.Path)
		if g.byShape[key] == nil {
			g.byShape[key] = &GuardRoute{}
		}
		g.byShape[key].candidates = append(g.byShape[key].candidates, tr)
	}
	for _, gr := range g.byShape {
		sort.SliceStable(gr.candidates, func(i, j int) bool {
			return paramLiterals(&gr.candidates[i].ep.tmpl) > paramLiterals(&gr.candidates[j].ep.tmpl)
		})
	}
	empty := map[patternKey]*GuardRoute{}
	g.patterns.Store(&empty)
	return g, nil
}

type patternKey struct{ method, pattern string }

// maxPatterns bounds Route's cache: a router has far fewer routes; past it (a pattern made of
// request data, which no router passes) answers are computed and not kept.
const maxPatterns = 4096

// Route returns the marked operation of the route a router matched, or nil when the route
// serves none: method is the request's, pattern the route's path as registered (echo's
// c.Path(), gin's c.FullPath(), with any prefix the spec's paths lack removed). A path
// parameter in pattern is a whole segment, written ":name" (echo, gin, httprouter) or "{name}"
// (chi, http.ServeMux, OpenAPI), and a catch-all "*name" or "{name...}" matches no operation;
// parameter names do not matter, so "/v1/payments/:id/refunds" is the route of the template
// "/v1/payments/{payment_id}/refunds". A trailing slash is part of the path.
func (g *Guard[DB]) Route(method, pattern string) *GuardRoute {
	k := patternKey{method, pattern}
	cache := *g.patterns.Load()
	if route, ok := cache[k]; ok {
		return route
	}
	route := g.byShape[method+" "+routeShape(pattern)]
	if len(cache) < maxPatterns {
		g.mu.Lock()
		next := make(map[patternKey]*GuardRoute, len(*g.patterns.Load())+1)
		for k, v := range *g.patterns.Load() {
			next[k] = v
		}
		next[k] = route
		g.patterns.Store(&next)
		g.mu.Unlock()
	}
	return route
}

// RouteByID returns the marked operation whose Operation.ID is id, or nil: for an adapter
// told the operation by the service (a Match option).
func (g *Guard[DB]) RouteByID(id string) *GuardRoute { return g.byID[id] }

// Serve runs one request to route through the runtime, as Middleware does: scope, body limit,
// media type and the operation's decoder (a refused request never reaches Exec and is never
// stored), the key, then the state machine of the operation's mode. When the request runs,
// exec runs the framework's handler chain (see Exec); its response is stored when final and
// written to w, as are replays and the runtime's problems. A concurrent duplicate never reaches
// exec. The request exec gets is the one Middleware hands its wrapped handler: its body is a
// re-encoding of the body as the operation's decoder read it (gen.Input.ReencodedBody), so the
// framework's binders read what the fingerprint covers, and it carries only the query
// parameters the operation declares (the others are removed, since frameworks' form binders
// merge the query into the body's fields).
//
// params are the values the router matched for the route's path parameters, one per
// parameter segment in order (echo's c.ParamValues(), the values of gin's c.Params): they are
// what the handler reads, so they are what the fingerprint covers. A segment with literal text
// around its parameters ("{id}:cancel", "{sid}.json") is split by the template; a value that
// does not fit the template is not this operation and is answered 404. With nil params (or as
// many values as the template has no parameter segments for) the values are found in the
// request's path by the template, as Middleware finds them.
//
// A request that is already inside a guarded handler (an adapter mounted twice on one route:
// globally and on the route) is not guarded again: exec runs directly.
func (g *Guard[DB]) Serve(w http.ResponseWriter, r *http.Request, route *GuardRoute, params []string, exec Exec) {
	if ctx := r.Context(); ctx.Value(txKey{}) != nil || ctx.Value(leaseKey{}) != nil {
		_ = exec(w, r) // the outer guard records, checks and stores what this writes
		return
	}
	tr := route.pick(params)
	if params != nil && len(params) != paramSegments(&tr.ep.tmpl) {
		params = nil
	}
	serveRouted(w, r, g.rt, tr.ep, params, func(in *gen.Input) (runner, error) {
		in.Reencode()
		if err := tr.Decode(in); err != nil {
			return nil, err
		}
		body, contentType := in.ReencodedBody()
		run := func(exec Exec, ctx context.Context) (Response, error) {
			return execute(exec, handedOn(r, ctx, tr.Operation, body, contentType))
		}
		return func(ctx context.Context, x *exchange) result {
			x.confirm = true
			if x.op.Mode == ModeLease {
				return runLease(ctx, x, g.st, func(ctx context.Context, l *Lease) (CompleteFunc[DB], error) {
					c := &completion[DB]{}
					ctx = context.WithValue(context.WithValue(ctx, leaseKey{}, l), completionKey{}, c)
					resp, err := run(exec, ctx)
					if err != nil {
						return nil, err
					}
					return func(ctx context.Context, db DB) (Response, error) {
						return resp, c.run(ctx, db)
					}, nil
				})
			}
			return runAtomic(ctx, x, g.st, func(ctx context.Context, db DB) (Response, error) {
				return run(exec, context.WithValue(ctx, txKey{}, db))
			})
		}, nil
	})
}

// pick returns the candidate whose template fits params (the first when params is nil, or
// when none fits: serveRouted then answers 404).
func (g *GuardRoute) pick(params []string) *tableRoute {
	if len(g.candidates) > 1 && params != nil {
		for _, c := range g.candidates {
			if c.ep.tmpl.Match(routedSegments(&c.ep.tmpl, params), false) {
				return c
			}
		}
	}
	return g.candidates[0]
}

// execute runs exec on r2 (handedOn) and returns what it wrote; nothing written is
// ErrNoResponse.
func execute(exec Exec, r2 *http.Request) (Response, error) {
	rec := &recorder{header: http.Header{}}
	if err := exec(rec, r2); err != nil {
		return Response{}, err
	}
	if !rec.wrote {
		return Response{}, ErrNoResponse
	}
	return Response{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}, nil
}

// declaredQuery returns a copy of u whose query holds only the parameters in declared (the
// operation's, which the fingerprint covers) and their deepObject fields ("filter[a]" of
// "filter"). Frameworks' form binders read the query with the body (echo's c.Bind and gin's
// c.ShouldBind for a form take http.Request.Form, query and body merged), so an undeclared
// "?description=x" would fill a field the fingerprint does not cover; any other read of an
// undeclared parameter would be outside the fingerprint as well.
func declaredQuery(u *url.URL, declared []string) *url.URL {
	q := u.Query()
	for name := range q {
		base, _, _ := strings.Cut(name, "[")
		if !slices.Contains(declared, name) && !slices.Contains(declared, base) {
			delete(q, name)
		}
	}
	c := *u
	c.RawQuery = q.Encode()
	return &c
}

// routeShape is a path with each parameter segment replaced by ":" and each catch-all by "*":
// the form in which a router's route pattern and an operation's template are compared. A
// segment is a parameter when it holds ':' (echo, gin, httprouter) or '{' (chi, http.ServeMux,
// OpenAPI); a catch-all starts with '*' or ends with "...}".
func routeShape(p string) string {
	var b strings.Builder
	for seg := range strings.SplitSeq(strings.TrimPrefix(p, "/"), "/") {
		b.WriteByte('/')
		switch {
		case strings.HasPrefix(seg, "*") || strings.HasSuffix(seg, "...}"):
			b.WriteByte('*')
		case strings.ContainsAny(seg, ":{"):
			b.WriteByte(':')
		default:
			b.WriteString(seg)
		}
	}
	return b.String()
}

// paramSegments counts the template's segments that hold parameters.
func paramSegments(t *gen.Template) int {
	n := 0
	for _, s := range t.Segments() {
		if !s.Literal() {
			n++
		}
	}
	return n
}

// paramLiterals is the length of the literal text in the template's parameter segments: of
// two operations with one route shape, the one with more literal text is tried first
// ("{id}:cancel" before "{id}").
func paramLiterals(t *gen.Template) int {
	n := 0
	for _, s := range t.Segments() {
		if s.Literal() {
			continue
		}
		for _, p := range s.Pieces {
			n += len(p)
		}
	}
	return n
}

// routedSegments returns the path segments of a request an adapter routed: the template's
// literal segments as they are, and in its parameter segments the router's values, one per
// parameter segment in order (Guard.Serve has checked their number). Template.Match of them
// tells whether the values fit (literal text around parameters, no empty value); pathValue
// reads the values from them as the router decoded them, so the handler reads the same.
func routedSegments(t *gen.Template, params []string) []string {
	segs := make([]string, t.Len())
	k := 0
	for i, s := range t.Segments() {
		if s.Literal() {
			segs[i] = s.Pieces[0]
			continue
		}
		if k < len(params) {
			segs[i] = params[k]
		}
		k++
	}
	return segs
}
