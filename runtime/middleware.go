package runtime

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store"
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
// then runs the state machine; when the request runs, the wrapped handler gets the original
// body and its status, allow-listed headers and body are recorded to be stored and replayed. A
// concurrent duplicate never reaches the wrapped handler. Requests to other operations pass
// through untouched.
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
// (github.com/idemgen/idemgen/adapters/echo, .../adapters/gin). Mounted inside echo's or gin's
// handler chain (echo.WrapMiddleware) or around their whole engine, Middleware cannot keep the
// contract, and answers every request to a marked operation with 500 problem `internal`,
// logged with the adapter to use, before anything runs (frameworks.go).
func Middleware[DB any](rt *Runtime, routes []Route, opts MiddlewareOptions) (func(http.Handler) http.Handler, error) {
	if rt == nil {
		return nil, fmt.Errorf("middleware: nil *Runtime")
	}
	st, ok := rt.cfg.Store.(store.Transactional[DB])
	if !ok {
		var db DB
		return nil, fmt.Errorf("middleware: the store %T cannot run %T writes in its transactions", rt.cfg.Store, any(&db))
	}
	table, err := newRouteTable(routes)
	if err != nil {
		return nil, fmt.Errorf("middleware: %w", err)
	}
	return func(next http.Handler) http.Handler {
		misuse := engineMisuse(next) // frameworks.go
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			route := table.find(r, opts)
			if route == nil {
				next.ServeHTTP(w, r)
				return
			}
			if why := cmp.Or(misuse, writerMisuse(w)); why != "" {
				rt.refuseMisuse(w, r, route.Operation, why)
				return
			}
			serve(w, r, rt, route.ep, func(in *gen.Input) (runner, error) {
				if err := route.Decode(in); err != nil {
					return nil, err
				}
				return func(ctx context.Context, x *exchange) result {
					x.confirm = true
					if x.op.Mode == ModeLease {
						return runLease(ctx, x, st, func(ctx context.Context, l *Lease) (CompleteFunc[DB], error) {
							c := &completion[DB]{}
							ctx = context.WithValue(context.WithValue(ctx, leaseKey{}, l), completionKey{}, c)
							resp, err := record(next, r, x.body, ctx)
							return func(ctx context.Context, db DB) (Response, error) {
								if err != nil {
									return resp, err
								}
								return resp, c.run(ctx, db)
							}, nil
						})
					}
					return runAtomic(ctx, x, st, func(ctx context.Context, db DB) (Response, error) {
						return record(next, r, x.body, context.WithValue(ctx, txKey{}, db))
					})
				}, nil
			})
		})
	}, nil
}

type txKey struct{}
type leaseKey struct{}
type completionKey struct{}

// completion holds the writes a lease-mode handler served by the Middleware registered with
// OnComplete.
type completion[DB any] struct {
	writes []func(ctx context.Context, db DB) error
}

func (c *completion[DB]) run(ctx context.Context, db DB) error {
	for _, w := range c.writes {
		if err := w(ctx, db); err != nil {
			return err
		}
	}
	return nil
}

// OnComplete registers write, to run in the transaction that completes the record of a
// lease-mode request served by Middleware (DB is the store's handle type, pgstore.DBTX for
// PostgreSQL). A handler calls the provider in its body and defers its own rows to write: they
// commit with the stored response when the response is final, and roll back with the release
// of the key otherwise, as a generated lease handler's CompleteFunc does. It returns false
// outside such a request (write is then not registered).
func OnComplete[DB any](ctx context.Context, write func(ctx context.Context, db DB) error) bool {
	c, ok := ctx.Value(completionKey{}).(*completion[DB])
	if ok {
		c.writes = append(c.writes, write)
	}
	return ok
}

// TxFrom returns the transaction an atomic-mode request served by Middleware writes through
// (DB is the store's handle type, pgstore.DBTX for PostgreSQL); false outside such a request.
func TxFrom[DB any](ctx context.Context) (DB, bool) {
	db, ok := ctx.Value(txKey{}).(DB)
	return db, ok
}

// LeaseFrom returns the claim of a lease-mode request served by Middleware; nil outside such a
// request.
func LeaseFrom(ctx context.Context) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// record runs next on a copy of r that carries ctx and the original body, and returns what it
// wrote.
func record(next http.Handler, r *http.Request, body []byte, ctx context.Context) (Response, error) {
	r2 := r.WithContext(ctx)
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	rec := &recorder{header: http.Header{}}
	next.ServeHTTP(rec, r2)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return Response{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}, nil
}

// recorder is the http.ResponseWriter the wrapped handler writes to: everything is kept until
// the runtime knows the outcome.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// routeTable finds the route of a request.
type routeTable struct {
	byID      map[string]*tableRoute
	byPattern map[string]*tableRoute // "POST /v1/payments/{id}"
	// byMethod holds each method's routes, most specific template first (literal segments
	// before parameters, left to right), for matching method and path.
	byMethod map[string][]templateRoute
}

type templateRoute struct {
	segs  []string
	route *tableRoute
}

// tableRoute is a Route as the table holds it: a copy, with its endpoint.
type tableRoute struct {
	Route
	ep *endpoint
}

func newRouteTable(routes []Route) (*routeTable, error) {
	t := &routeTable{byID: map[string]*tableRoute{}, byPattern: map[string]*tableRoute{}, byMethod: map[string][]templateRoute{}}
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
		t.byPattern[op.Method+" "+op.Path] = rt
		t.byMethod[op.Method] = append(t.byMethod[op.Method], templateRoute{segs: splitPath(op.Path), route: rt})
	}
	for _, list := range t.byMethod {
		sort.SliceStable(list, func(i, j int) bool { return moreSpecific(list[i].segs, list[j].segs) })
	}
	return t, nil
}

func (t *routeTable) find(r *http.Request, opts MiddlewareOptions) *tableRoute {
	if opts.Match != nil {
		id, ok := opts.Match(r)
		if !ok {
			return nil
		}
		return t.byID[id]
	}
	if p := r.Pattern; p != "" {
		// http.ServeMux sets "POST /v1/payments/{id}"; chi sets the path alone, and for a
		// mounted sub-router the whole joined pattern, which ends with the template.
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			method, path = r.Method, p
		}
		if route := t.byPattern[method+" "+path]; route != nil {
			return route
		}
		segs := splitPath(path)
		for _, c := range t.byMethod[method] {
			if len(segs) > len(c.segs) && slices.Equal(segs[len(segs)-len(c.segs):], c.segs) {
				return c.route
			}
		}
	}
	escaped := r.URL.EscapedPath()
	if opts.Prefix != "" {
		rest, ok := strings.CutPrefix(escaped, strings.TrimSuffix(opts.Prefix, "/"))
		if !ok {
			return nil
		}
		escaped = rest
	}
	path := splitPath(escaped)
	for _, c := range t.byMethod[r.Method] {
		if templateMatches(c.segs, path) {
			return c.route
		}
	}
	return nil
}

func splitPath(p string) []string { return strings.Split(strings.Trim(p, "/"), "/") }

// templateMatches reports whether the path segments fit the template's: literal segments
// equal, a segment with a {param} (possibly between literals, "{sid}.json") non-empty around
// them.
func templateMatches(tmpl, path []string) bool {
	if len(tmpl) != len(path) {
		return false
	}
	for i, seg := range tmpl {
		open, end := strings.IndexByte(seg, '{'), strings.IndexByte(seg, '}')
		if open < 0 || end < open {
			if seg != path[i] {
				return false
			}
			continue
		}
		p := path[i]
		if len(p) <= open+len(seg)-end-1 || !strings.HasPrefix(p, seg[:open]) || !strings.HasSuffix(p, seg[end+1:]) {
			return false
		}
	}
	return true
}

// moreSpecific orders templates so that a literal segment wins over a parameter at the first
// position where they differ.
func moreSpecific(a, b []string) bool {
	for i := range min(len(a), len(b)) {
		la, lb := !strings.Contains(a[i], "{"), !strings.Contains(b[i], "{")
		if la != lb {
			return la
		}
	}
	return false
}

// NewRoute is the Route of op with its decoder (the decoded value is dropped: the wrapped
// handler reads the body itself).
func NewRoute[T any](op *Operation, decode DecodeFunc[T]) Route {
	return Route{Operation: op, Decode: func(in *gen.Input) error {
		_, err := decode(in)
		return err
	}}
}
