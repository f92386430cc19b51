package runtime

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store"
)

// Guard serves the marked operations of a web framework that routes requests and renders its
// handlers' errors on its own (echo, gin, fiber, Huma): the framework's adapter finds the
// operation from the route the framework matched (Route), and Do or Serve runs the request
// through the same checks and state machine as Middleware, calling back into the framework when
// the request is to run. What is stored is the handler chain's answer, so the callback must run
// the framework's handler chain to its end, the framework's own rendering of a handler's error
// included (echo's HTTPErrorHandler, a gin error middleware, fiber's ErrorHandler, Huma's error
// model): what is stored is then what the client would have got without idemgen.
//
// Do is the value-level way: the adapter hands in the request and a Next that returns the
// chain's answer as a Response, and gets the answer to send as a Response; nothing is written
// anywhere in between, so a framework that is not net/http (fiber on fasthttp, a Huma
// operation middleware) converts values and fakes no http.ResponseWriter. Serve is the same
// for a net/http framework whose handlers write to an http.ResponseWriter (echo, gin): the
// chain writes to one the runtime records. Middleware is a Guard over its own route table.
//
// The adapters github.com/idemgen/idemgen/adapters/echo, .../adapters/gin and
// .../adapters/fiber are built on it; a Guard is what another framework's adapter needs. DB is
// the store's handle type (pgstore.DBTX for PostgreSQL). A Guard is safe for concurrent use.
type Guard[DB any] struct {
	rt    *Runtime
	st    store.Transactional[DB]
	table *routeTable
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

// Next runs the framework's handler chain for a request Do lets run, value for value: r is the
// request as fingerprinted (its context carries the transaction or lease of TxFrom and
// LeaseFrom, its body is a re-encoding of the body as the operation's decoder read it), and
// the chain's answer (the handler's response, or the framework's rendering of its error) comes
// back as a Response. Return ErrNoResponse (wrapped or not) when the chain answered nothing;
// any other error fails the request as a handler error does: 500 problem `internal`, the
// transaction rolled back, the key released, and the error logged. The Response's Header and
// Body are the runtime's from then on (stored, sent): do not reuse them.
type Next func(r *http.Request) (Response, error)

// NewGuard returns the Guard of routes (the generated Routes function) on rt. It fails when
// routes hold an operation twice, or when rt's store cannot run DB writes in its transactions.
func NewGuard[DB any](rt *Runtime, routes []Route) (*Guard[DB], error) {
	g, err := newGuard[DB](rt, routes)
	if err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	return g, nil
}

// newGuard is NewGuard, its errors without context (Middleware adds its own).
func newGuard[DB any](rt *Runtime, routes []Route) (*Guard[DB], error) {
	if rt == nil {
		return nil, fmt.Errorf("nil *Runtime")
	}
	st, ok := rt.cfg.Store.(store.Transactional[DB])
	if !ok {
		var db DB
		return nil, fmt.Errorf("the store %T cannot run %T writes in its transactions", rt.cfg.Store, any(&db))
	}
	table, err := newRouteTable(routes)
	if err != nil {
		return nil, err
	}
	g := &Guard[DB]{rt: rt, st: st, table: table, byID: map[string]*GuardRoute{}, byShape: map[string]*GuardRoute{}}
	for _, route := range routes {
		tr := table.byID[route.Operation.ID]
		g.byID[tr.Operation.ID] = &GuardRoute{candidates: []*tableRoute{tr}}
		key := tr.Operation.Method + " " + routeShape(tr.Operation.Path)
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
// c.Path(), gin's c.FullPath(), fiber's c.Route().Path, with any prefix the spec's paths lack
// removed). A path parameter in pattern is a whole segment, written ":name" (echo, gin,
// httprouter, fiber) or "{name}" (chi, http.ServeMux, OpenAPI, Huma), and a catch-all "*name"
// or "{name...}" matches no operation; parameter names do not matter, so
// "/v1/payments/:id/refunds" is the route of the template "/v1/payments/{payment_id}/refunds".
// A trailing slash is part of the path.
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
// media type and the operation's decoder (a refused request never reaches exec and is never
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
// globally and on the route) is not guarded again: exec runs, and the outer guard stores what
// it answers.
func (g *Guard[DB]) Serve(w http.ResponseWriter, r *http.Request, route *GuardRoute, params []string, exec Exec) {
	tr, params := route.pick(params)
	dispatch(w, r, g.rt, g.st, tr, params, func(r2 *http.Request) (Response, error) {
		rec := newRecorder()
		if err := exec(rec, r2); err != nil {
			return Response{}, err
		}
		return rec.response()
	})
}

// Do is Serve value for value: it runs one request to route through the runtime and returns
// the answer to send, the chain's response (next), a replay or the runtime's problem (by the
// operation's profile or Config.ProblemWriter), with every header the runtime adds. Nothing is
// written anywhere: the adapter sends the answer its framework's way. r is the request as the
// framework received it, converted to an *http.Request (its body is read whole; the ScopeFunc
// sees it); params are as for Serve. A request already inside a guarded handler runs next
// directly (see Serve).
func (g *Guard[DB]) Do(r *http.Request, route *GuardRoute, params []string, next Next) Response {
	tr, params := route.pick(params)
	rec := newRecorder()
	dispatch(rec, r, g.rt, g.st, tr, params, chain(next))
	resp, err := rec.response()
	if err != nil { // a nested guard whose chain failed: the outer one answers
		return Response{}
	}
	return resp
}

// pick returns the candidate whose template fits params (the first when params is nil, or
// when none fits: serveRouted then answers 404), and params, or nil when they are not one
// value per parameter segment of its template.
func (g *GuardRoute) pick(params []string) (*tableRoute, []string) {
	tr := g.candidates[0]
	if len(g.candidates) > 1 && params != nil {
		for _, c := range g.candidates {
			if c.ep.tmpl.Match(routedSegments(&c.ep.tmpl, params), false) {
				tr = c
				break
			}
		}
	}
	if params != nil && len(params) != paramSegments(&tr.ep.tmpl) {
		params = nil
	}
	return tr, params
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
