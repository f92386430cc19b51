package runtime

import (
	"errors"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/idemgen/idemgen/runtime/gen"
)

// Route is one marked operation as the Middleware serves it: its resolved settings and its
// generated decoder. idemgen generates the list (the Routes function of a package generated
// with --target middleware or the default target).
type Route struct {
	Operation *Operation
	// Decode checks the request's parameters and body and completes its fingerprint; see
	// DecodeFunc. The decoded value is not kept: the wrapped handler reads the body itself.
	Decode func(in *gen.Input) error
}

// MiddlewareOptions configures Middleware.
type MiddlewareOptions struct {
	// Match finds the operation of a request for routers whose routes the middleware cannot
	// see: it returns the operation ID (Operation.ID), or false when the request is not to a
	// marked operation. When nil, the middleware uses the request's pattern (Request.Pattern,
	// set when it wraps a handler routed by http.ServeMux or chi) when it names a marked
	// operation, and otherwise matches method and path against the operations' path
	// templates, a literal segment before a parameter.
	Match func(r *http.Request) (operationID string, ok bool)
	// Prefix is the path the server's routes are mounted under (http.StripPrefix, a router's
	// sub-router mount, an API gateway's base path), when the middleware sits in front of that
	// mount and sees the full path: it is removed before the path is matched against the
	// operations' templates. A route pattern that ends with an operation's template (chi's
	// pattern of a mounted sub-router) is matched without it.
	Prefix string
}

// Middleware returns a net/http middleware that makes the marked operations of an existing
// server safe to retry, without changing its handlers. For a request to one of routes it reads
// and checks the request with the operation's generated decoder before any key lookup (a
// malformed request is refused and never stored, exactly as through the generated wrappers),
// then runs the state machine; when the request runs, the wrapped handler gets the request as it
// was fingerprinted, and its status, allow-listed headers and body are recorded to be stored
// and replayed. A concurrent duplicate never reaches the wrapped handler. Requests to other
// operations pass through untouched.
//
// As it was fingerprinted: the body the wrapped handler reads is a re-encoding of the body as
// the decoder read it (gen.Input.ReencodedBody: JSON compact with integers as digits, forms
// and multipart parts in body order), so encoding/json, url.ParseQuery and mime/multipart
// read the values the fingerprint covers; members equal to a declared name up to case are
// refused with 400 before any lookup; query parameters the operation does not declare are
// removed (r.FormValue and form binders merge the query into the body's fields).
//
// The middleware claims exactly the requests the router behind it routes to the operation
// (percent-decoded segments and path cleaning as http.ServeMux does; chi's empty parameters),
// and stores only the operation's own answers: a response the router or an inner middleware
// wrote instead (404, 405, a redirect, another route's answer) is delivered and never stored,
// and a handler that wrote nothing is ErrNoResponse.
//
// In atomic mode the wrapped handler must write through the transaction it takes from its
// context, TxFrom[DB](r.Context()) (DB is the store's handle type: pgstore.DBTX for
// PostgreSQL, which sqlc-generated code takes unchanged); in lease mode it gets the claim's
// Lease from LeaseFrom(r.Context()), and its response is stored when it answers. It fails when
// routes hold an operation twice, or when the Runtime's store cannot run DB writes in its
// transactions.
//
// The wrapped handler's response is buffered until the outcome is known, so streaming
// (http.Flusher) and connection hijacking are not available on marked operations.
//
// Web frameworks that route and render on their own have adapters built on Guard
// (github.com/idemgen/idemgen/adapters/echo, .../adapters/gin, .../adapters/fiber). Mounted
// inside their handler chain through the framework's net/http bridge (echo.WrapMiddleware, a
// gin shim, fiber's adaptor.HTTPMiddleware) or around echo's or gin's whole engine, Middleware
// cannot keep the contract, and answers every request to a marked operation with 500 problem
// `internal`, logged with the adapter to use, before anything runs; where wrappers hide the
// framework, the first request that shows the misuse by what it does is failed and every later
// one refused (frameworks.go). Middleware is a Guard over its own route table: one dispatch
// serves both.
func Middleware[DB any](rt *Runtime, routes []Route, opts MiddlewareOptions) (func(http.Handler) http.Handler, error) {
	g, err := newGuard[DB](rt, routes)
	if err != nil {
		return nil, fmt.Errorf("middleware: %w", err)
	}
	learned := &atomic.Pointer[string]{}
	return func(next http.Handler) http.Handler {
		m := newMount(rt, next, learned) // frameworks.go
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			route, how := g.table.find(r, opts)
			if route == nil {
				next.ServeHTTP(w, r)
				return
			}
			if why := m.refusal(w, r); why != "" {
				rt.refuseMisuse(w, r, route.Operation, why)
				return
			}
			d := &wrapped{table: g.table, route: route, how: how, pattern: r.Pattern}
			cw := &clientWriter{ResponseWriter: w}
			dispatch(cw, r, rt, g.st, route, nil, func(r2 *http.Request) (Response, error) {
				ctx := r2.Context()
				op := route.Operation
				if p := m.learned.Load(); p != nil {
					// Learned while this request waited for its claim (a duplicate of the one
					// that showed it, claiming the key it released): the handler does not run.
					return Response{}, errors.New(*p)
				}
				if h := handleFrom(ctx); h != nil {
					h.late = func() { m.learn(ctx, op, misuseTookLate+": "+adapterFor(w, ctx)) }
				}
				rec := newRecorder()
				mark := markHeader(w.Header())
				next.ServeHTTP(rec, r2)
				rec.late = func() { m.learn(ctx, op, misuseWroteLate+": "+adapterFor(w, ctx)) }
				if markHeader(w.Header()) != mark {
					// The client got the handler's answer from the handler itself: nothing the
					// runtime writes now can replace it, so it writes nothing.
					cw.sealed = true
					why := misuseWroteOutside + ": " + adapterFor(w, ctx)
					m.learn(ctx, op, why)
					return Response{}, errors.New(why)
				}
				resp, err := rec.response()
				if err != nil {
					return resp, err
				}
				err = d.verify(r2, resp)
				var foreign *foreignResponse
				if errors.As(err, &foreign) && foreign.untaken && resp.Status >= 200 && resp.Status < 300 {
					// A success no router named and no handler took the transaction or lease
					// for: not a router's 404, 405 or redirect, and its writes cannot be in the
					// transaction. Delivered unstored, every retry would run it again.
					why := misuseUntaken + ": " + adapterFor(w, ctx)
					m.learn(ctx, op, why)
					return Response{}, errors.New(why)
				}
				return resp, err
			})
		})
	}, nil
}

// wrapped is one request the Middleware runs through the wrapped handler: how its route was
// found, to tell whether the answer is the operation's handler's (verify).
type wrapped struct {
	table   *routeTable
	route   *tableRoute
	how     found
	pattern string // the request's Pattern when the middleware got it
}

// foreignResponse is a response the operation's handler did not produce: the router's 404,
// 405 or redirect, another route's answer, an answer an inner middleware wrote instead of
// calling the handler. It is delivered as it is, never stored, and the key is released.
type foreignResponse struct {
	resp   Response
	reason string
	// untaken: the router named no route and the handler took neither the transaction nor
	// the lease (not another route's answer).
	untaken bool
}

func (f *foreignResponse) Error() string {
	return "response not produced by the operation's handler: " + f.reason
}

// verify decides whether resp is the answer of the operation's handler. A route found by the
// caller (MiddlewareOptions.Match, or the pattern of a router that had already routed the
// request) is. For a route the middleware found by method and path in front of the router, the
// router decides: a router that sets Request.Pattern on the request it was handed
// (http.ServeMux, chi behind Use on its root router) names the route it dispatched to, and the
// operation's handler takes its transaction (TxFrom) or lease (LeaseFrom, OnComplete). With
// neither sign the response is a *foreignResponse. When the router names another route but
// that route's handler took the operation's transaction, what it wrote there cannot be kept or
// known: that is an error (500, rolled back).
func (d *wrapped) verify(r2 *http.Request, resp Response) error {
	if d.how == foundByCaller {
		return nil
	}
	took := handleFrom(r2.Context()).took.Load()
	if r2.Pattern != d.pattern {
		if route := d.table.byPattern(r2.Pattern, r2.Method); route == d.route {
			return nil
		}
		if took {
			return fmt.Errorf("the router dispatched the request to %q, not to operation %s, and that handler used the operation's transaction or lease", r2.Pattern, d.route.Operation.ID)
		}
		return &foreignResponse{resp: resp, reason: fmt.Sprintf("the router dispatched the request to %q (status %d)", r2.Pattern, resp.Status)}
	}
	if took {
		return nil
	}
	return &foreignResponse{resp: resp, reason: fmt.Sprintf("status %d from a handler that took neither the transaction nor the lease, under no route pattern of the operation", resp.Status), untaken: true}
}

// routeTable finds the route of a request.
type routeTable struct {
	byID map[string]*tableRoute
	// byMethod holds each method's routes, most specific template first (literal segments
	// before parameters, left to right), for matching a pattern or a path.
	byMethod map[string][]*tableRoute
	// patterns keeps each router pattern parsed (parsePattern), by pattern: a router hands the
	// same few patterns (its routes') on every request.
	patterns sync.Map // string → parsedPattern
}

// parsedPattern is parsePattern's result.
type parsedPattern struct {
	method string
	tmpl   gen.Template
	ok     bool
}

// tableRoute is a Route as the table holds it: a copy, with its endpoint (and so its template).
type tableRoute struct {
	Route
	ep *endpoint
}

// found says how the table found a request's route, and so whether the router is known to
// dispatch the request to the operation's handler.
type found uint8

const (
	// foundByCaller: MiddlewareOptions.Match named the operation, or a router that had
	// already routed the request named it in Request.Pattern: the wrapped handler is the
	// operation's.
	foundByCaller found = iota + 1
	// foundByPath: the middleware is in front of the router and matched method and path; the
	// router may still send the request elsewhere (a 404, a redirect, another route), which
	// verify finds out after the wrapped handler returns.
	foundByPath
)

func newRouteTable(routes []Route) (*routeTable, error) {
	t := &routeTable{byID: map[string]*tableRoute{}, byMethod: map[string][]*tableRoute{}}
	for i, route := range routes {
		op := route.Operation
		if op == nil || route.Decode == nil {
			return nil, fmt.Errorf("route %d has no operation or decoder", i)
		}
		rt := &tableRoute{Route: route, ep: newEndpoint(op)}
		if _, dup := t.byID[op.ID]; dup {
			return nil, fmt.Errorf("operation %s is listed twice", op.ID)
		}
		t.byID[op.ID] = rt
		t.byMethod[op.Method] = append(t.byMethod[op.Method], rt)
	}
	for _, list := range t.byMethod {
		sort.SliceStable(list, func(i, j int) bool { return list[i].ep.tmpl.MoreSpecific(list[j].ep.tmpl) })
	}
	return t, nil
}

// find returns the route of r and how it was found, or nil when r is not to a marked
// operation.
func (t *routeTable) find(r *http.Request, opts MiddlewareOptions) (*tableRoute, found) {
	if opts.Match != nil {
		id, ok := opts.Match(r)
		if !ok || t.byID[id] == nil {
			return nil, 0
		}
		return t.byID[id], foundByCaller
	}
	if route := t.byPattern(r.Pattern, r.Method); route != nil {
		return route, foundByCaller
	}
	if route := t.byPath(r, opts.Prefix); route != nil {
		return route, foundByPath
	}
	return nil, 0
}

// byPattern returns the route whose template has the shape of a router's pattern, or whose
// template the pattern ends with (a router mounted under a prefix), or nil. http.ServeMux
// writes "POST /v1/payments/{id}" (perhaps with a host); chi writes the path alone, and for a
// mounted sub-router the whole joined pattern, with regexp parameters ("{id:[0-9]+}").
func (t *routeTable) byPattern(pattern, method string) *tableRoute {
	if pattern == "" {
		return nil
	}
	v, found := t.patterns.Load(pattern)
	if !found {
		var p parsedPattern
		p.method, p.tmpl, p.ok = parsePattern(pattern)
		v = p
		t.patterns.Store(pattern, p)
	}
	p := v.(parsedPattern)
	pm, tmpl, ok := p.method, p.tmpl, p.ok
	if !ok {
		return nil
	}
	if pm != "" {
		method = pm
	}
	list := t.byMethod[method]
	for _, c := range list {
		if tmpl.SameShape(c.ep.tmpl) {
			return c
		}
	}
	for _, c := range list {
		if tmpl.EndsWith(c.ep.tmpl) {
			return c
		}
	}
	return nil
}

// parsePattern reads a router's pattern: http.ServeMux's "[METHOD ][HOST]/PATH" (wildcards
// "{name}", "{name...}", and "{$}" for an exact trailing slash) or chi's "/PATH" (wildcards
// "{name}" and "{name:regexp}"), into its method ("" when it has none) and its template.
func parsePattern(p string) (method string, t gen.Template, ok bool) {
	if m, rest, cut := strings.Cut(p, " "); cut {
		method, p = m, strings.TrimLeft(rest, " \t")
	}
	slash := strings.IndexByte(p, '/')
	if slash < 0 {
		return "", gen.Template{}, false
	}
	p = p[slash:] // drop a host
	var b strings.Builder
	for {
		open := strings.IndexByte(p, '{')
		if open < 0 {
			b.WriteString(p)
			break
		}
		end := strings.IndexByte(p[open:], '}')
		if end < 0 {
			b.WriteString(p)
			break
		}
		b.WriteString(p[:open])
		name := p[open+1 : open+end]
		if name != "$" { // "{$}" matches only the trailing slash before it
			name, _, _ = strings.Cut(name, ":")
			b.WriteString("{" + strings.TrimSuffix(name, "...") + "}")
		}
		p = p[open+end+1:]
	}
	return method, gen.ParseTemplate(b.String()), true
}

// byPath matches the request's method and path against the operations' templates, after
// removing prefix, as the routers the middleware can sit in front of route it: http.ServeMux
// (Go 1.22 patterns) percent-decodes each segment before comparing it ("/v1/%70ayments" is
// "/v1/payments") and redirects a path that is not clean ("//", "/./", "/../") instead of
// routing it; chi compares the path as sent (Request.URL.RawPath when set), does not clean it,
// and lets a parameter match an empty segment ("/v1/payments//refunds"). A request either
// would route to an operation is that operation's. Nothing else is: not a trailing slash the
// template does not have, another letter case, a ';' parameter, or a method override header.
func (t *routeTable) byPath(r *http.Request, prefix string) *tableRoute {
	list := t.byMethod[r.Method]
	if len(list) == 0 {
		return nil
	}
	escaped, ok := cutPrefix(r.URL.EscapedPath(), prefix)
	if !ok {
		return nil
	}
	raw := r.URL.RawPath
	if raw == "" {
		raw = r.URL.Path
	}
	raw, rawOK := cutPrefix(raw, prefix)
	var decoded []string
	if cleanPath(escaped) == escaped {
		decoded = gen.DecodeSegments(gen.SplitPath(escaped))
	}
	var sent []string
	if rawOK {
		sent = gen.SplitPath(raw)
	}
	for _, c := range list {
		if decoded != nil && c.ep.tmpl.Match(decoded, false) || sent != nil && c.ep.tmpl.Match(sent, true) {
			return c
		}
	}
	return nil
}

// cutPrefix removes prefix (a path, with or without its trailing slash) from path; ok is false
// when path is not under it.
func cutPrefix(path, prefix string) (string, bool) {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return path, true
	}
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok || rest != "" && rest[0] != '/' {
		return "", false
	}
	return rest, true
}

// cleanPath is http.ServeMux's canonical form of a path: "." and ".." resolved, repeated
// slashes collapsed, a trailing slash kept. ServeMux redirects a request whose path differs
// from it.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// NewRoute is the Route of op with its decoder (the decoded value is dropped: the wrapped
// handler reads the body itself).
func NewRoute[T any](op *Operation, decode DecodeFunc[T]) Route {
	return Route{Operation: op, Decode: func(in *gen.Input) error {
		_, err := decode(in)
		return err
	}}
}

// Unrouted is what a framework adapter's Next returns when the chain's answer is not the
// operation's handler's: the framework routed the request elsewhere than the adapter matched it
// (its 404, a redirect, another route). resp is delivered as it is, never stored, and the key
// is released, as Middleware does for a router's answer; reason is logged.
func Unrouted(resp Response, reason string) error {
	return &foreignResponse{resp: resp, reason: reason}
}
