// Package idemgin makes the marked operations of a gin service safe to retry, mounted the gin
// way: on a route, a group or the whole Engine, after the service's own authentication
// middleware.
//
//	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: idemgin.ScopeKey("tenant")})
//	idem, err := idemgin.Middleware[pgstore.DBTX](rt, api.Routes(), idemgin.Options{})
//	r.Use(idem) // or r.POST("/v1/payments", idem, createPayment), g.Use(idem)
//
// (New does both in one call.)
// api.Routes is the operation table idemgen generates (`idemgen generate --target
// middleware`). For a request that gin routed to a marked operation the middleware runs the
// operation's strict decoder and fingerprint before any key lookup, then the idempotency state
// machine (runtime.Guard): the rest of the chain runs once per key, in the claim's transaction
// (TxFrom), and its response is stored and replayed. The handlers keep gin's ways: they bind
// with c.ShouldBindJSON or c.ShouldBind, answer with c.JSON, abort with c.AbortWithStatusJSON,
// or record errors with c.Error for the service's error middleware (Options.Errors), which
// renders them inside the guard, so what is stored is what the client got.
//
// The module is separate from idemgen's, so that idemgen's own module does not depend on gin.
package idemgin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/runtime"
)

// Options configures Middleware. The zero value fits routes registered at the spec's paths
// whose handlers write their own responses.
type Options struct {
	// Prefix is the part of gin's route paths in front of the spec's paths (the prefix of
	// r.Group("/api") when the spec's paths start at /v1): it is removed from c.FullPath()
	// before the route is compared with the operations' templates. A route outside the prefix
	// is not a marked operation.
	Prefix string
	// Match finds the operation of a request whose gin route is not shaped like the operation's
	// template (a catch-all, a route that serves several paths): it returns the operation ID
	// (runtime.Operation.ID), or false when the request is not to a marked operation. The path
	// parameters are then found in the request's path by the template. When nil, the
	// operation is the one whose template has the shape of c.FullPath().
	Match func(c *gin.Context) (operationID string, ok bool)
	// Errors is the service's error middleware: the gin.HandlerFunc that, after c.Next(),
	// renders c.Errors as the service's error responses. Registered with r.Use before the
	// routes, it would run after the guard has decided what to store; given here, it runs
	// inside the guard right after the handler chain, so the error response it renders is the
	// one stored and replayed (its own later run then writes nothing: the response was sent).
	// It is not needed when the error middleware is mounted after Middleware in the chain.
	Errors gin.HandlerFunc
}

// New is runtime.New(cfg) and Middleware in one call, for a service that uses the runtime for
// nothing else:
//
//	idem, err := idemgin.New[pgstore.DBTX](runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: idemgin.ScopeKey("tenant")}, api.Routes(), idemgin.Options{})
//
// It fails when runtime.New or Middleware does.
func New[DB any](cfg runtime.Config, routes []runtime.Route, opts Options) (gin.HandlerFunc, error) {
	rt, err := runtime.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("idemgin: %w", err)
	}
	return Middleware[DB](rt, routes, opts)
}

// Middleware returns the gin middleware that guards the marked operations of routes (the
// generated Routes function) on rt. DB is the store's handle type: pgstore.DBTX for
// PostgreSQL.
//
// The operation of a request is found from the route gin matched: c.FullPath(), with
// Options.Prefix removed, compared with the operations' templates segment by segment (gin's
// ":name" is a template's "{name}", whatever the names); method and route must both match, so
// a request gin answers 404, 405 or with a trailing-slash redirect is never claimed. Requests
// to other routes run untouched. The fingerprint covers the path parameters as gin decoded
// them (c.Params), which is what the handler reads with c.Param.
//
// For a request to a marked operation the middleware refuses, before any key lookup and with
// the runtime's problem+json (runtime.Config.ProblemWriter), a request without scope (Scope),
// with a body over the limit, of a media type the operation does not take, or that the
// operation's decoder refuses; a missing or malformed key; a duplicate in flight (409) or a key
// used with another request (422). These, and replays, abort the chain (c.Abort): the handler
// does not run. Otherwise the rest of the chain runs (c.Next) on a response writer that
// records: c.ShouldBindJSON and the other binders read the body that the fingerprint covers,
// c.Request.Context() carries the transaction (TxFrom) or the lease (LeaseFrom), and a status
// set with c.Status counts as the response, as gin sends it at the end of the chain. A final
// response (by default 2xx and 4xx but 408, 409, 425, 429) is stored with the handler's writes
// and sent; any other rolls back and frees the key. A chain that writes nothing gets no stored
// answer: 500 problem `internal`, key released, and the log names c.Errors when the handler
// recorded errors that nothing rendered inside the guard (see Options.Errors). A write after
// the response was sent (an error middleware mounted before this one) is dropped, so the
// client gets exactly the response that was stored.
//
// The response is buffered until the outcome is known: c.Stream, Flush and hijacking are not
// available on marked operations. Middleware fails when routes hold an operation twice or when
// rt's store cannot run DB writes in its transactions.
func Middleware[DB any](rt *runtime.Runtime, routes []runtime.Route, opts Options) (gin.HandlerFunc, error) {
	g, err := runtime.NewGuard[DB](rt, routes)
	if err != nil {
		return nil, fmt.Errorf("idemgin: %w", err)
	}
	prefix := strings.TrimSuffix(opts.Prefix, "/")
	return func(c *gin.Context) {
		route, params := find(g, c, prefix, opts.Match)
		if route == nil {
			c.Next()
			return
		}
		w, req := c.Writer, c.Request
		ran := false
		g.Serve(w, req.WithContext(context.WithValue(req.Context(), contextKey{}, c)), route, params,
			func(rec http.ResponseWriter, r *http.Request) error {
				ran = true
				inner := &writer{ResponseWriter: rec, status: http.StatusOK, size: unwritten}
				c.Writer, c.Request = inner, r
				defer func() { c.Writer, c.Request = w, req }()
				c.Next()
				if opts.Errors != nil {
					opts.Errors(c)
				}
				if !inner.answered() {
					if len(c.Errors) > 0 {
						return fmt.Errorf("%w; the handler recorded errors that nothing rendered inside idemgin's middleware (mount the error middleware after it, or set idemgin.Options.Errors): %v",
							runtime.ErrNoResponse, c.Errors.Last())
					}
					return runtime.ErrNoResponse
				}
				inner.WriteHeaderNow() // a status set with c.Status and no body: gin sends it at the end of the chain
				return nil
			})
		w.WriteHeaderNow()
		// What was sent is what was stored: a later write (an error middleware that runs after
		// this one returns) is dropped.
		c.Writer = sealed{w}
		if !ran {
			c.Abort() // answered here (a replay, a refusal): the handler does not run
		}
	}, nil
}

// find returns the marked operation c was routed to and its path parameter values, or nil.
func find[DB any](g *runtime.Guard[DB], c *gin.Context, prefix string, match func(*gin.Context) (string, bool)) (*runtime.GuardRoute, []string) {
	if match != nil {
		id, ok := match(c)
		if !ok {
			return nil, nil
		}
		return g.RouteByID(id), nil
	}
	path := c.FullPath() // "" when gin routed to no route (404, 405, a redirect)
	if path == "" {
		return nil, nil
	}
	if prefix != "" {
		rest, ok := strings.CutPrefix(path, prefix)
		if !ok || (rest != "" && rest[0] != '/') {
			return nil, nil
		}
		path = rest
	}
	route := g.Route(c.Request.Method, path)
	if route == nil {
		return nil, nil
	}
	params := make([]string, len(c.Params))
	for i, p := range c.Params {
		params[i] = p.Value
	}
	return route, params
}

type contextKey struct{}

// errNoContext is the scope error of a request that did not come through Middleware.
var errNoContext = errors.New("idemgin: the request did not come through idemgin.Middleware, so its *gin.Context is unknown")

// Scope returns the runtime.ScopeFunc (runtime.Config.Scope) that takes the request's scope
// (tenant) from its *gin.Context, after the service's own middleware ran: what an
// authentication middleware stored with c.Set (c.Keys), a JWT's subject. An error refuses the
// request with 401 problem `unauthenticated` before any key lookup; so does a request that did
// not come through Middleware (a generated handler mounted with gin.WrapH has no gin.Context:
// give it a runtime.ScopeFunc of the *http.Request instead).
func Scope(f func(c *gin.Context) (string, error)) runtime.ScopeFunc {
	return func(r *http.Request) (string, error) {
		c, ok := r.Context().Value(contextKey{}).(*gin.Context)
		if !ok {
			return "", errNoContext
		}
		return f(c)
	}
}

// ScopeKey returns the runtime.ScopeFunc whose scope is the string the service's own middleware
// stored under key in the gin.Context (c.Set(key, tenant)); a missing, empty or non-string
// value refuses the request (see Scope).
func ScopeKey(key string) runtime.ScopeFunc {
	return Scope(func(c *gin.Context) (string, error) {
		s := c.GetString(key)
		if s == "" {
			return "", fmt.Errorf("idemgin: no tenant: the gin.Context has no string under %q", key)
		}
		return s, nil
	})
}

// TxFrom returns the transaction the handler of an atomic-mode operation writes through (DB
// is the store's handle type, pgstore.DBTX for PostgreSQL): its writes commit with the stored
// response, or roll back with a response that is not final. False outside such a request.
func TxFrom[DB any](c *gin.Context) (DB, bool) {
	return runtime.TxFrom[DB](c.Request.Context())
}

// LeaseFrom returns the claim of a lease-mode request (provider keys, heartbeat); nil outside
// such a request.
func LeaseFrom(c *gin.Context) *runtime.Lease {
	return runtime.LeaseFrom(c.Request.Context())
}

// OnComplete registers write to run in the transaction that completes the record of a
// lease-mode request (runtime.OnComplete): the handler calls its provider, then defers its own
// rows to write, which commit with the stored response. False outside such a request.
func OnComplete[DB any](c *gin.Context, write func(ctx context.Context, db DB) error) bool {
	return runtime.OnComplete(c.Request.Context(), write)
}
