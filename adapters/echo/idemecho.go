// Package idemecho makes the marked operations of an echo (v4) service safe to retry, mounted
// the echo way: on a route, a group or the whole Echo, after the service's own authentication
// middleware.
//
//	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: idemecho.ScopeKey("tenant")})
//	idem, err := idemecho.Middleware[pgstore.DBTX](rt, api.Routes(), idemecho.Options{})
//	e.Use(idem) // or e.POST("/v1/payments", createPayment, idem), g.Use(idem)
//
// (New does both in one call.)
// api.Routes is the operation table idemgen generates (`idemgen generate --target
// middleware`). For a request that echo routed to a marked operation the middleware runs the
// operation's strict decoder and fingerprint before any key lookup, then the idempotency state
// machine (runtime.Guard): the handler runs once per key, in the claim's transaction
// (TxFrom), and its response is stored and replayed. The handler keeps echo's ways: it binds
// with c.Bind, answers with c.JSON, returns its errors; echo's HTTPErrorHandler renders a
// returned error inside the guard, so what is stored is what the client got.
//
// The module is separate from idemgen's, so that idemgen's own module does not depend on echo.
package idemecho

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime"
)

// Options configures Middleware. The zero value fits routes registered at the spec's paths.
type Options struct {
	// Prefix is the part of echo's route paths in front of the spec's paths (the prefix of
	// e.Group("/api") when the spec's paths start at /v1): it is removed from c.Path() before
	// the route is compared with the operations' templates. A route outside the prefix is not
	// a marked operation.
	Prefix string
	// Match finds the operation of a request whose echo route is not shaped like the
	// operation's template (a catch-all, a route that serves several paths): it returns the
	// operation ID (runtime.Operation.ID), or false when the request is not to a marked
	// operation. The path parameters are then found in the request's path by the template.
	// When nil, the operation is the one whose template has the shape of c.Path().
	Match func(c echo.Context) (operationID string, ok bool)
}

// New is runtime.New(cfg) and Middleware in one call, for a service that uses the runtime for
// nothing else:
//
//	idem, err := idemecho.New[pgstore.DBTX](runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: idemecho.ScopeKey("tenant")}, api.Routes(), idemecho.Options{})
//
// It fails when runtime.New or Middleware does.
func New[DB any](cfg runtime.Config, routes []runtime.Route, opts Options) (echo.MiddlewareFunc, error) {
	rt, err := runtime.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("idemecho: %w", err)
	}
	return Middleware[DB](rt, routes, opts)
}

// Middleware returns the echo middleware that guards the marked operations of routes (the
// generated Routes function) on rt. DB is the store's handle type: pgstore.DBTX for
// PostgreSQL.
//
// The operation of a request is found from the route echo matched: c.Path(), with
// Options.Prefix removed, compared with the operations' templates segment by segment (echo's
// ":name" is a template's "{name}", whatever the names); method and route must both match, so
// a request echo answers 404 or 405 is never claimed. Requests to other routes run untouched.
// The fingerprint covers the path parameters as echo decoded them (c.ParamValues()), which is
// what the handler reads with c.Param.
//
// For a request to a marked operation the middleware refuses, before any key lookup and with
// the runtime's problem+json (runtime.Config.ProblemWriter), a request without scope (Scope),
// with a body over the limit, of a media type the operation does not take, or that the
// operation's decoder refuses; a missing or malformed key; a duplicate in flight (409) or a key
// used with another request (422). Otherwise the rest of echo's chain runs with a response
// writer that records: c.Bind and the other binders read the body that the fingerprint covers,
// c.Request().Context() carries the transaction (TxFrom) or the lease (LeaseFrom), and a
// returned error is rendered by echo's HTTPErrorHandler (c.Error) before the outcome is
// decided. A final response (by default 2xx and 4xx but 408, 409, 425, 429) is stored with the
// handler's writes and sent; any other rolls back and frees the key. A handler that writes
// nothing and returns no error gets no stored answer: 500 problem `internal`, key released.
// The error the handler returned is returned after the response is written, for the
// middlewares around (echo's Logger logs it; echo's HTTPErrorHandler finds the response
// committed and leaves it alone); a write after that is dropped, so the client gets exactly
// the response that was stored.
//
// The response is buffered until the outcome is known: c.Response().Flush and hijacking are
// not available on marked operations. Middleware fails when routes hold an operation twice or
// when rt's store cannot run DB writes in its transactions.
func Middleware[DB any](rt *runtime.Runtime, routes []runtime.Route, opts Options) (echo.MiddlewareFunc, error) {
	g, err := runtime.NewGuard[DB](rt, routes)
	if err != nil {
		return nil, fmt.Errorf("idemecho: %w", err)
	}
	prefix := strings.TrimSuffix(opts.Prefix, "/")
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			route, params := find(g, c, prefix, opts.Match)
			if route == nil {
				return next(c)
			}
			res, req := c.Response(), c.Request()
			var handlerErr error
			g.Serve(res, req.WithContext(context.WithValue(req.Context(), contextKey{}, c)), route, params,
				func(w http.ResponseWriter, r *http.Request) error {
					inner := echo.NewResponse(w, c.Echo())
					c.SetResponse(inner)
					c.SetRequest(r)
					defer func() { c.SetResponse(res); c.SetRequest(req) }()
					if err := next(c); err != nil {
						handlerErr = err
						c.Error(err) // echo's HTTPErrorHandler renders it into inner
					}
					if !inner.Committed {
						if handlerErr != nil {
							return fmt.Errorf("echo's HTTPErrorHandler wrote no response for the handler's error: %w", handlerErr)
						}
						return runtime.ErrNoResponse
					}
					return nil
				})
			// What was sent is what was stored: a later write (a custom HTTPErrorHandler that
			// does not check c.Response().Committed) is dropped.
			res.Writer = sealed{res.Writer}
			return handlerErr
		}
	}, nil
}

// find returns the marked operation c was routed to and its path parameter values, or nil.
func find[DB any](g *runtime.Guard[DB], c echo.Context, prefix string, match func(echo.Context) (string, bool)) (*runtime.GuardRoute, []string) {
	if match != nil {
		id, ok := match(c)
		if !ok {
			return nil, nil
		}
		return g.RouteByID(id), nil
	}
	path := c.Path()
	if path == "" || c.Get(echo.ContextKeyHeaderAllow) != nil {
		// No route (404), or a route without this method (405): echo's router set the Allow
		// header's value and routed to its own error handler.
		return nil, nil
	}
	if prefix != "" {
		rest, ok := strings.CutPrefix(path, prefix)
		if !ok || (rest != "" && rest[0] != '/') {
			return nil, nil
		}
		path = rest
	}
	return g.Route(c.Request().Method, path), c.ParamValues()
}

type contextKey struct{}

// errNoContext is the scope error of a request that did not come through Middleware.
var errNoContext = errors.New("idemecho: the request did not come through idemecho.Middleware, so its echo.Context is unknown")

// Scope returns the runtime.ScopeFunc (runtime.Config.Scope) that takes the request's scope
// (tenant) from its echo.Context, after the service's own middleware ran: what an
// authentication middleware stored with c.Set("user", ...), a JWT's subject. An error refuses
// the request with 401 problem `unauthenticated` before any key lookup; so does a request that
// did not come through Middleware (a generated handler mounted with echo.WrapHandler has no
// echo.Context: give it a runtime.ScopeFunc of the *http.Request instead).
func Scope(f func(c echo.Context) (string, error)) runtime.ScopeFunc {
	return func(r *http.Request) (string, error) {
		c, ok := r.Context().Value(contextKey{}).(echo.Context)
		if !ok {
			return "", errNoContext
		}
		return f(c)
	}
}

// ScopeKey returns the runtime.ScopeFunc whose scope is the string the service's own middleware
// stored under key in the echo.Context (c.Set(key, tenant)); a missing, empty or non-string
// value refuses the request (see Scope).
func ScopeKey(key string) runtime.ScopeFunc {
	return Scope(func(c echo.Context) (string, error) {
		s, _ := c.Get(key).(string)
		if s == "" {
			return "", fmt.Errorf("idemecho: no tenant: the echo.Context has no string under %q", key)
		}
		return s, nil
	})
}

// TxFrom returns the transaction the handler of an atomic-mode operation writes through (DB
// is the store's handle type, pgstore.DBTX for PostgreSQL): its writes commit with the stored
// response, or roll back with a response that is not final. False outside such a request.
func TxFrom[DB any](c echo.Context) (DB, bool) {
	return runtime.TxFrom[DB](c.Request().Context())
}

// LeaseFrom returns the claim of a lease-mode request (provider keys, heartbeat); nil outside
// such a request.
func LeaseFrom(c echo.Context) *runtime.Lease {
	return runtime.LeaseFrom(c.Request().Context())
}

// OnComplete registers write to run in the transaction that completes the record of a
// lease-mode request (runtime.OnComplete): the handler calls its provider, then defers its own
// rows to write, which commit with the stored response. False outside such a request.
func OnComplete[DB any](c echo.Context, write func(ctx context.Context, db DB) error) bool {
	return runtime.OnComplete(c.Request().Context(), write)
}
