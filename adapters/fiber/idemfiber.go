// Package idemfiber makes the marked operations of a fiber (v2) service safe to retry, mounted
// the fiber way: on a route, a group or the whole app (Use), after the service's own
// authentication middleware, on fasthttp end to end.
//
//	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: idemfiber.ScopeKey("tenant")})
//	idem, err := idemfiber.Middleware[pgstore.DBTX](rt, api.Routes(), idemfiber.Options{})
//	app.Use(idem) // or app.Post("/v1/payments", idem, createPayment), app.Group("/v1", idem)
//
// (New does both in one call.)
// api.Routes is the operation table idemgen generates (`idemgen generate --target
// middleware`). For a request to a marked operation the middleware runs the operation's strict
// decoder and fingerprint before any key lookup, then the idempotency state machine
// (runtime.Guard.Do, value for value: the request is copied, the chain's answer read back
// from fiber's response; no net/http writer is involved): the rest of the chain runs once per
// key, with the claim's transaction in c.UserContext() (TxFrom), and its response is stored and
// replayed. The handlers keep fiber's ways: they bind with c.BodyParser, answer with c.JSON or
// c.Status, and return their errors, which the app's ErrorHandler renders inside the guard, so
// what is stored is what the client got.
//
// fiber's own bridge for net/http middleware, adaptor.HTTPMiddleware, cannot carry idemgen's
// net/http middleware (it runs the fiber handler after the middleware has returned): that
// setup is refused, every request to a marked operation answered 500 with a log line naming
// this package, before anything runs.
//
// The module is separate from idemgen's, so that idemgen's own module does not depend on fiber.
package idemfiber

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"

	"github.com/idemgen/idemgen/internal/fiberroute"
	"github.com/idemgen/idemgen/runtime"
)

// Options configures Middleware. The zero value fits routes registered at the spec's paths.
type Options struct {
	// Prefix is the part of fiber's route paths in front of the spec's paths (the prefix of
	// app.Group("/api") when the spec's paths start at /v1): it is removed before the route is
	// compared with the operations' templates. A route outside the prefix is not a marked
	// operation.
	Prefix string
	// Match finds the operation of a request whose fiber route is not shaped like the
	// operation's template (a catch-all, a route that serves several paths): it returns the
	// operation ID (runtime.Operation.ID), or false when the request is not to a marked
	// operation. The path parameters are then found in the request's path by the template.
	Match func(c *fiber.Ctx) (operationID string, ok bool)
}

// New is runtime.New(cfg) and Middleware in one call, for a service that uses the runtime for
// nothing else. It fails when runtime.New or Middleware does.
func New[DB any](cfg runtime.Config, routes []runtime.Route, opts Options) (fiber.Handler, error) {
	rt, err := runtime.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("idemfiber: %w", err)
	}
	return Middleware[DB](rt, routes, opts)
}

// Middleware returns the fiber middleware that guards the marked operations of routes (the
// generated Routes function) on rt. DB is the store's handle type: pgstore.DBTX for
// PostgreSQL.
//
// The operation of a request is found from the route fiber matched. Mounted on a route (or
// its group's handlers), that is c.Route().Path, with Options.Prefix removed, compared with the
// operations' templates segment by segment (fiber's ":name" is a template's "{name}"); the
// fingerprint covers the path parameters as fiber read them (c.Params), which is what the
// handler reads. Mounted with Use (app.Use, app.Group(prefix, idem)), the middleware runs
// before fiber has chosen the route: the request's path is matched against the templates as
// fiber routes it (letter case folded unless Config.CaseSensitive, a trailing slash ignored
// unless Config.StrictRouting, percent-decoded when Config.UnescapePath), and after the chain
// the route fiber ran must be the operation's: any other answer (fiber's 404, another route's)
// is delivered, never stored, and the key released. Requests to other routes run untouched.
//
// For a request to a marked operation the middleware refuses, before any key lookup and with
// the runtime's problem (runtime.Config.ProblemWriter), a request without scope (Scope), with
// a body over the limit, of a media type the operation does not take, or that the operation's
// decoder refuses; a missing or malformed key; a duplicate in flight (409) or a key used with
// another request (422). These, and replays, end the chain: the handler does not run.
// Otherwise the rest of the chain runs on the request as fingerprinted (the body re-encoded as
// the decoder read it, the query reduced to the declared parameters), with c.UserContext()
// carrying the transaction (TxFrom) or the lease (LeaseFrom); an error it returns is rendered
// by the app's ErrorHandler right there. A final response (by default 2xx and 4xx but 408,
// 409, 425, 429) is stored with the handler's writes and sent; any other rolls back and frees
// the key. The middleware then returns nil: the error was rendered and the answer sent.
//
// The response is buffered until the outcome is known: c.SendStream and streaming writers are
// not available on marked operations. Middleware fails when routes hold an operation twice or
// when rt's store cannot run DB writes in its transactions.
func Middleware[DB any](rt *runtime.Runtime, routes []runtime.Route, opts Options) (fiber.Handler, error) {
	g, err := runtime.NewGuard[DB](rt, routes)
	if err != nil {
		return nil, fmt.Errorf("idemfiber: %w", err)
	}
	m := &matcher{prefix: strings.TrimSuffix(opts.Prefix, "/"), match: opts.Match}
	for _, r := range routes {
		m.ops = append(m.ops, fiberroute.NewOp(r.Operation.ID, r.Operation.Method, r.Operation.Path))
	}
	return func(c *fiber.Ctx) error {
		route, params, byPath := find(g, m, c)
		if route == nil {
			return c.Next()
		}
		r, err := request(c)
		if err != nil {
			return err
		}
		own := c.Route()
		resp := g.Do(r, route, params, func(r2 *http.Request) (runtime.Response, error) {
			return run(c, r2, route.Operation(), byPath, own, m.prefix)
		})
		if resp.Status != 0 { // 0: a guard around this one answers
			send(c, resp)
		}
		return nil
	}, nil
}

// request converts the fasthttp request of c into the *http.Request the runtime reads (the
// ScopeFunc sees it); its context is c.UserContext() with c in it (Scope). Everything is
// copied: fasthttp reuses its buffers, and the runtime reads the request until it has answered.
// Every header line is kept (two key lines are refused, not merged).
func request(c *fiber.Ctx) (*http.Request, error) {
	fr := c.Request()
	uri := string(fr.RequestURI())
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, fiber.NewError(http.StatusBadRequest, "idemfiber: the request URI: "+err.Error())
	}
	body := fr.Body()
	r := &http.Request{
		Method: c.Method(), URL: u, RequestURI: uri, Host: string(fr.Host()),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{},
		ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body)),
		RemoteAddr: c.Context().RemoteAddr().String(),
	}
	if c.Context().IsTLS() {
		r.TLS = &tls.ConnectionState{}
	}
	fr.Header.VisitAll(func(k, v []byte) {
		if key := string(k); !strings.EqualFold(key, "Transfer-Encoding") {
			r.Header.Add(key, string(v))
		}
	})
	return r.WithContext(context.WithValue(c.UserContext(), contextKey{}, c)), nil
}

// run is the chain at value level: it installs r2 (the request as fingerprinted: body, content
// type, declared query; its context with the transaction or lease) in c, runs the rest of the
// chain and the app's ErrorHandler for its error, and returns fiber's response as a value.
func run(c *fiber.Ctx, r2 *http.Request, op *runtime.Operation, byPath bool, own *fiber.Route, prefix string) (runtime.Response, error) {
	req := &c.Context().Request
	if err := installBody(c, r2); err != nil {
		return runtime.Response{}, err
	}
	if r2.Header.Get("Content-Type") != string(req.Header.ContentType()) {
		req.Header.SetContentType(r2.Header.Get("Content-Type"))
	}
	req.URI().SetQueryString(r2.URL.RawQuery)
	saved := c.UserContext()
	c.SetUserContext(r2.Context())
	defer c.SetUserContext(saved)
	if err := c.Next(); err != nil {
		if herr := c.App().ErrorHandler(c, err); herr != nil {
			return runtime.Response{}, fmt.Errorf("idemfiber: the app's ErrorHandler failed on the handler's error %v: %w", err, herr)
		}
	}
	resp := response(c)
	if byPath {
		// Mounted with Use: the route fiber ran must be another than the middleware's own (which
		// it still is when fiber found no route: its 404 or 405), and the operation's.
		if rt := c.Route(); rt == own || !fiberroute.SameShape(strings.TrimPrefix(rt.Path, prefix), op.Path) {
			return resp, runtime.Unrouted(resp, fmt.Sprintf("fiber routed the request to %s %q, not to a route of the operation (status %d)", rt.Method, rt.Path, resp.Status))
		}
	}
	return resp, nil
}

// installBody gives the handler the body the fingerprint covers (the re-encoding).
func installBody(c *fiber.Ctx, r2 *http.Request) error {
	body, err := io.ReadAll(r2.Body)
	if err != nil {
		return fmt.Errorf("idemfiber: read the re-encoded body: %w", err)
	}
	c.Request().SetBodyRaw(body)
	return nil
}

// response reads fiber's response as a runtime.Response (a copy: fiber reuses its buffers),
// then resets it: the runtime decides what is sent.
func response(c *fiber.Ctx) runtime.Response {
	res := c.Response()
	h := http.Header{}
	res.Header.VisitAll(func(k, v []byte) {
		key := string(k)
		if strings.EqualFold(key, "Content-Length") {
			return
		}
		h.Add(key, string(v))
	})
	resp := runtime.Response{Status: res.StatusCode(), Header: h, Body: append([]byte(nil), res.Body()...)}
	res.Reset()
	return resp
}

// send writes the runtime's answer into fiber's response.
func send(c *fiber.Ctx, resp runtime.Response) {
	res := c.Response()
	res.Reset()
	res.SetStatusCode(resp.Status)
	for k, vs := range resp.Header {
		for i, v := range vs {
			if i == 0 {
				res.Header.Set(k, v)
			} else {
				res.Header.Add(k, v)
			}
		}
	}
	res.SetBodyRaw(resp.Body)
}

type matcher struct {
	prefix string
	match  func(*fiber.Ctx) (string, bool)
	ops    []fiberroute.Op
	kinds  atomic.Pointer[routeKinds]
}

// routeKinds tells the routes of an app registered with Use (app.Use, a group's handlers) from
// its method routes: fiber.App.GetRoutes(true) leaves the Use routes out, and the handler list
// of a route is its registration's own, so its first element's address names the registration.
// A Use route whose prefix is an operation's path (app.Use("/v1/payments", idem)) is not the
// operation's route: it matches every method, and longer paths, and when fiber finds no route
// after it, the request is still on it.
type routeKinds struct {
	app    *fiber.App
	count  uint32 // app.HandlersCount() when built: a route registered since rebuilds it
	method map[*fiber.Handler]bool
}

// isUse reports whether r is a route of c's app registered with Use.
func (m *matcher) isUse(c *fiber.Ctx, r *fiber.Route) bool {
	if len(r.Handlers) == 0 {
		return false
	}
	app := c.App()
	k := m.kinds.Load()
	if k == nil || k.app != app || k.count != app.HandlersCount() {
		k = &routeKinds{app: app, count: app.HandlersCount(), method: map[*fiber.Handler]bool{}}
		for _, rt := range app.GetRoutes(true) {
			if len(rt.Handlers) > 0 {
				k.method[&rt.Handlers[0]] = true
			}
		}
		m.kinds.Store(k)
	}
	return !k.method[&r.Handlers[0]]
}

// find returns the marked operation c is to, its path parameter values (nil: found by the
// template), and whether it was found by path in front of fiber's routing (Use).
func find[DB any](g *runtime.Guard[DB], m *matcher, c *fiber.Ctx) (*runtime.GuardRoute, []string, bool) {
	if m.match != nil {
		id, ok := m.match(c)
		if !ok {
			return nil, nil, false
		}
		return g.RouteByID(id), nil, false
	}
	// On a route, c.Route() is the operation's; with Use (or a group's handlers) it is the
	// middleware's own prefix route, and the request is matched by path as fiber will route it.
	rt := c.Route()
	if path, ok := fiberroute.CutPrefix(rt.Path, m.prefix); ok && !m.isUse(c, rt) {
		if route := g.Route(c.Method(), path); route != nil {
			params := make([]string, len(rt.Params))
			for i, name := range rt.Params {
				params[i] = strings.Clone(c.Params(name)) // fiber reuses its buffers
			}
			return route, params, false
		}
	}
	return byPath(g, m, c)
}

// byPath matches the request's path against the operations' templates as fiber routes it.
func byPath[DB any](g *runtime.Guard[DB], m *matcher, c *fiber.Ctx) (*runtime.GuardRoute, []string, bool) {
	cfg := c.App().Config()
	id, ok := fiberroute.Match(m.ops, c.Method(), c.Path(), m.prefix, fiberroute.Config{CaseSensitive: cfg.CaseSensitive, StrictRouting: cfg.StrictRouting, UnescapePath: cfg.UnescapePath})
	if !ok {
		return nil, nil, false
	}
	return g.RouteByID(id), nil, true
}

type contextKey struct{}

// errNoContext is the scope error of a request that did not come through Middleware.
var errNoContext = errors.New("idemfiber: the request did not come through idemfiber.Middleware, so its *fiber.Ctx is unknown")

// Scope returns the runtime.ScopeFunc (runtime.Config.Scope) that takes the request's scope
// (tenant) from its *fiber.Ctx, after the service's own middleware ran: what an authentication
// middleware stored with c.Locals, a JWT's subject. An error refuses the request with 401
// problem `unauthenticated` before any key lookup; so does a request that did not come through
// Middleware.
func Scope(f func(c *fiber.Ctx) (string, error)) runtime.ScopeFunc {
	return func(r *http.Request) (string, error) {
		c, ok := r.Context().Value(contextKey{}).(*fiber.Ctx)
		if !ok {
			return "", errNoContext
		}
		s, err := f(c)
		// fiber's strings may point into fasthttp's buffers (c.Get, c.Params): the runtime
		// keeps the scope until the request is answered, and the record's longer.
		return strings.Clone(s), err
	}
}

// ScopeKey returns the runtime.ScopeFunc whose scope is the string the service's own
// middleware stored under key with c.Locals(key, tenant); a missing, empty or non-string value
// refuses the request (see Scope).
func ScopeKey(key string) runtime.ScopeFunc {
	return Scope(func(c *fiber.Ctx) (string, error) {
		s, _ := c.Locals(key).(string)
		if s == "" {
			return "", fmt.Errorf("idemfiber: no tenant: c.Locals has no string under %q", key)
		}
		return s, nil
	})
}

// TxFrom returns the transaction the handler of an atomic-mode operation writes through (DB
// is the store's handle type, pgstore.DBTX for PostgreSQL): its writes commit with the stored
// response, or roll back with a response that is not final. False outside such a request.
func TxFrom[DB any](c *fiber.Ctx) (DB, bool) {
	return runtime.TxFrom[DB](c.UserContext())
}

// LeaseFrom returns the claim of a lease-mode request (provider keys, heartbeat); nil outside
// such a request.
func LeaseFrom(c *fiber.Ctx) *runtime.Lease {
	return runtime.LeaseFrom(c.UserContext())
}

// OnComplete registers write to run in the transaction that completes the record of a
// lease-mode request (runtime.OnComplete). False outside such a request.
func OnComplete[DB any](c *fiber.Ctx, write func(ctx context.Context, db DB) error) bool {
	return runtime.OnComplete(c.UserContext(), write)
}
