// Package idemhuma makes the marked operations of a Huma (v2) service safe to retry, as a Huma
// middleware: the operations marked in Huma's own code (the operation's Extensions
// "x-idempotent", which Huma writes into the OpenAPI document it serves), whatever router Huma
// runs on.
//
//	idempotent := idemhuma.MustNew[pgstore.DBTX](runtime.Config{Store: pgstore.New(pool, pgstore.Options{}),
//		Scope: idemhuma.ScopeValue(tenantKey{})}, idem.Routes(), idemhuma.Options{})
//	api.UseMiddleware(authenticate(api), idempotent) // after the service's own authentication
//	huma.Register(api, huma.Operation{OperationID: "createPayment", Method: http.MethodPost, Path: "/v1/payments",
//		Extensions: map[string]any{"x-idempotent": true}}, createPayment)
//
// Huma keeps the middlewares an API has when an operation is registered, so UseMiddleware comes
// before huma.Register. (New returns MustNew's error instead of panicking; Middleware takes a
// runtime.Runtime the service made itself.) The spec is an output of the code: export it from the API
// (idemhumatest.Spec, from a test that go generate runs) and generate the operation table from
// it (`idemgen generate openapi.yaml --target middleware`), both from `go generate`. idem.Routes is that
// table. For a request to a marked operation the middleware runs the operation's strict decoder
// and fingerprint before any key lookup, then the idempotency state machine
// (runtime.Guard.Do, value for value: no net/http writer is faked): the rest of the chain,
// Huma's own binding, validation and handler included, runs once per key with the claim's
// transaction in the handler's context.Context (runtime.TxFrom), and Huma's answer (the
// handler's output, or Huma's rendering of its error in the API's error model) is stored and
// replayed. A request the service's own authentication refuses never reaches the middleware, so
// its 401 is Huma's; the scope is what that authentication put in the context (ScopeValue).
//
// The module is separate from idemgen's, so that idemgen's own module does not depend on Huma.
package idemhuma

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/gen"
)

// Extension is the name of the OpenAPI extension that marks an operation (idemgen's
// `x-idempotent`), in huma.Operation.Extensions: true, or an object of settings as in a spec
// (`{"mode": "lease"}`); Huma writes it into the document it serves and exports.
const Extension = "x-idempotent"

// Options configures Middleware, New and MustNew. The zero value fits most services.
type Options struct {
	// Logger receives the refusals of requests whose operation is marked in Huma's code but not
	// in the generated table (stale generated code); slog.Default() when nil.
	Logger *slog.Logger
}

// New is runtime.New(cfg) and Middleware in one call, for a service that uses the runtime for
// nothing else. It fails when runtime.New or Middleware does.
func New[DB any](cfg runtime.Config, routes []runtime.Route, opts Options) (func(huma.Context, func(huma.Context)), error) {
	rt, err := runtime.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("idemhuma: %w", err)
	}
	return Middleware[DB](rt, routes, opts)
}

// MustNew is New for a service's start-up code: it returns the middleware, or panics with the
// error New returns (a Config without a Store or Scope, a table that does not compile), which
// are mistakes in the program, not in a request; Huma's own huma.Register panics the same way
// on an operation it cannot register. Use New where the caller handles the error.
func MustNew[DB any](cfg runtime.Config, routes []runtime.Route, opts Options) func(huma.Context, func(huma.Context)) {
	mw, err := New[DB](cfg, routes, opts)
	if err != nil {
		panic(err)
	}
	return mw
}

// Middleware returns the Huma middleware that guards the marked operations of routes (the
// generated Routes function, from the spec the API exported) on rt, for api.UseMiddleware (after
// the service's authentication) or an operation's Middlewares. DB is the store's handle type:
// pgstore.DBTX for PostgreSQL.
//
// The operation of a request is the one Huma routed it to (ctx.Operation()), found in routes by
// its OperationID; its path parameter values are Huma's (ctx.Param), which is what the handler
// reads. An operation in routes is guarded; one marked with Extension in Huma's code but missing
// from routes, or whose method or path differ from the table's (the code changed and `go
// generate` did not run), is refused with Huma's 500 (huma.WriteErr) and a log line before
// anything runs, never served unguarded. Other operations run untouched.
//
// For a guarded operation the middleware refuses, before any key lookup and with the runtime's
// problem (the operation's errors mapping, else runtime.Config.ProblemWriter), a request without
// scope, with a body over the limit, of a media type the operation does not take, or that the
// operation's decoder refuses; a missing or malformed key; a duplicate in flight (409) or a key
// used with another request (422). These, and replays, end the chain. Otherwise the rest of the
// chain runs on the request as fingerprinted (the body re-encoded as the decoder read it, the
// query reduced to the declared parameters), with the handler's context carrying the
// transaction (runtime.TxFrom) or the lease (runtime.LeaseFrom, runtime.OnComplete). A final
// response (by default 2xx and 4xx but 408, 409, 425, 429) is stored with the handler's writes
// and sent; any other rolls back and frees the key.
//
// The response is buffered until the outcome is known: streaming responses (Huma's sse, a
// body callback that flushes) are not available on guarded operations. Middleware fails when
// routes hold an operation twice or when rt's store cannot run DB writes in its transactions.
func Middleware[DB any](rt *runtime.Runtime, routes []runtime.Route, opts Options) (func(huma.Context, func(huma.Context)), error) {
	g, err := runtime.NewGuard[DB](rt, routes)
	if err != nil {
		return nil, fmt.Errorf("idemhuma: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var tmpls sync.Map // *huma.Operation → gen.Template of its path, as Huma names its parameters
	return func(ctx huma.Context, next func(huma.Context)) {
		op := ctx.Operation()
		var route *runtime.GuardRoute
		if op != nil {
			route = g.RouteByID(op.OperationID)
		}
		if route == nil {
			if op != nil && Marked(op) {
				refuse(ctx, log, op, "is marked "+Extension+" in the code but not in the generated operation table")
				return
			}
			next(ctx)
			return
		}
		if table := route.Operation(); table.Method != op.Method || !sameShape(table.Path, op.Path) {
			refuse(ctx, log, op, fmt.Sprintf("is %s %s in the code but %s %s in the generated operation table", op.Method, op.Path, table.Method, table.Path))
			return
		}
		t, ok := tmpls.Load(op)
		if !ok {
			t, _ = tmpls.LoadOrStore(op, gen.ParseTemplate(op.Path))
		}
		resp := g.Do(request(ctx), route, params(t.(gen.Template), ctx), func(r2 *http.Request) (runtime.Response, error) {
			c := &captured{humaCtx: ctx, r: r2, header: http.Header{}}
			next(c)
			return c.response()
		})
		if resp.Status != 0 { // 0: a guard around this one answers
			send(ctx, resp)
		}
	}, nil
}

// Marked reports whether a Huma operation carries Extension with a value other than false.
func Marked(op *huma.Operation) bool {
	v, ok := op.Extensions[Extension]
	return ok && v != false && v != nil
}

// refuse answers a marked operation the generated table does not guard: a 500 in the API's
// error model (huma.NewError, which a service may replace), and a log line saying what to run.
func refuse(ctx huma.Context, log *slog.Logger, op *huma.Operation, why string) {
	msg := fmt.Sprintf("idemhuma: operation %s %s", op.OperationID, why)
	log.ErrorContext(ctx.Context(), msg+"; refused before anything ran: export the spec and run idemgen generate again (go generate)", "operation", op.OperationID)
	var doc any = huma.NewError(http.StatusInternalServerError, "the idempotency guard of this operation is not set up; the request was not processed")
	ct := "application/json"
	if f, ok := doc.(huma.ContentTypeFilter); ok {
		ct = f.ContentType(ct)
	}
	ctx.SetHeader("Content-Type", ct)
	ctx.SetStatus(http.StatusInternalServerError)
	_ = json.NewEncoder(ctx.BodyWriter()).Encode(doc)
}

// request converts Huma's request to the *http.Request the runtime reads (the ScopeFunc sees
// it): its context is Huma's (what the service's middleware added with huma.WithValue), its
// body Huma's body reader, read once by the runtime under the operation's limit. Every header
// line is kept (two key lines are refused, not merged).
func request(ctx huma.Context) *http.Request {
	u := ctx.URL()
	v := ctx.Version()
	r := &http.Request{
		Method: ctx.Method(), URL: &u, RequestURI: u.RequestURI(), Host: ctx.Host(),
		Proto: v.Proto, ProtoMajor: v.ProtoMajor, ProtoMinor: v.ProtoMinor, Header: http.Header{},
		Body: io.NopCloser(ctx.BodyReader()), ContentLength: -1, RemoteAddr: ctx.RemoteAddr(), TLS: ctx.TLS(),
	}
	ctx.EachHeader(func(name, value string) {
		if !strings.EqualFold(name, "Transfer-Encoding") {
			r.Header.Add(name, value)
		}
	})
	if n, err := strconv.ParseInt(r.Header.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		r.ContentLength = n
	}
	return r.WithContext(ctx.Context())
}

// params returns Huma's values of the parameter segments of t, the Huma operation's path (whose
// parameter names may differ from the spec's table; the shapes are the same), in order: a
// segment with literal text around its parameters ("{id}:cancel") rebuilt from its pieces.
func params(t gen.Template, ctx huma.Context) []string {
	var out []string
	for _, s := range t.Segments() {
		if s.Literal() {
			continue
		}
		var b strings.Builder
		for i, name := range s.Params {
			b.WriteString(s.Pieces[i])
			b.WriteString(ctx.Param(name))
		}
		b.WriteString(s.Pieces[len(s.Params)])
		out = append(out, b.String())
	}
	return out
}

// send writes the runtime's answer with Huma's context.
func send(ctx huma.Context, resp runtime.Response) {
	for k, vs := range resp.Header {
		for i, v := range vs {
			if i == 0 {
				ctx.SetHeader(k, v)
			} else {
				ctx.AppendHeader(k, v)
			}
		}
	}
	ctx.SetStatus(resp.Status)
	if len(resp.Body) > 0 {
		_, _ = ctx.BodyWriter().Write(resp.Body)
	}
}

// captured is the huma.Context the rest of the chain gets: the request as fingerprinted (r2),
// and a response kept as a value until the runtime knows the outcome.
type captured struct {
	humaCtx
	r      *http.Request
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (c *captured) Context() context.Context { return c.r.Context() }
func (c *captured) URL() url.URL             { return *c.r.URL }
func (c *captured) Query(name string) string { return c.r.URL.Query().Get(name) }
func (c *captured) Header(name string) string {
	return c.r.Header.Get(name)
}

func (c *captured) EachHeader(cb func(name, value string)) {
	for name, values := range c.r.Header {
		for _, v := range values {
			cb(name, v)
		}
	}
}

func (c *captured) BodyReader() io.Reader { return c.r.Body }

// GetMultipartForm parses the re-encoded body, as Huma's own adapters parse theirs.
func (c *captured) GetMultipartForm() (*multipart.Form, error) {
	if err := c.r.ParseMultipartForm(8 << 10); err != nil {
		return nil, err
	}
	return c.r.MultipartForm, nil
}

func (c *captured) SetStatus(code int) {
	if !c.wrote {
		c.status, c.wrote = code, true
	}
}

func (c *captured) Status() int                     { return c.status }
func (c *captured) SetHeader(name, value string)    { c.header.Set(name, value) }
func (c *captured) AppendHeader(name, value string) { c.header.Add(name, value) }
func (c *captured) BodyWriter() io.Writer           { return (*capturedBody)(c) }

// Unwrap is Huma's way to the router's own context (humago.Unwrap and the like): the request
// and writer as the router has them, outside the guard. Read from them only: an answer written
// there reaches the client around the guard and is never stored.
func (c *captured) Unwrap() huma.Context { return c.humaCtx }

// humaCtx is huma.Context under a name that does not clash with its Context method when
// embedded.
type humaCtx huma.Context

type capturedBody captured

func (b *capturedBody) Write(p []byte) (int, error) {
	if !b.wrote {
		b.status, b.wrote = http.StatusOK, true
	}
	return b.body.Write(p)
}

// response is the chain's answer; runtime.ErrNoResponse when Huma wrote nothing.
func (c *captured) response() (runtime.Response, error) {
	if !c.wrote {
		return runtime.Response{}, runtime.ErrNoResponse
	}
	return runtime.Response{Status: c.status, Header: c.header, Body: c.body.Bytes()}, nil
}

// sameShape reports whether two OpenAPI path templates have the same segments, parameter names
// aside.
func sameShape(a, b string) bool {
	return gen.ParseTemplate(a).SameShape(gen.ParseTemplate(b))
}

// ScopeValue returns the runtime.ScopeFunc (runtime.Config.Scope) whose scope is the string the
// service's own Huma middleware put in the request's context (huma.WithValue(ctx, key,
// tenant)), after authenticating it; a missing, empty or non-string value refuses the request
// with 401 problem `unauthenticated` before any key lookup.
func ScopeValue(key any) runtime.ScopeFunc {
	return func(r *http.Request) (string, error) {
		s, _ := r.Context().Value(key).(string)
		if s == "" {
			return "", fmt.Errorf("idemhuma: no tenant: the request's context has no string under %v", key)
		}
		return s, nil
	}
}

// Check reports every disagreement between the operations api has registered and routes (the
// table generated from its exported spec): an operation marked with Extension that routes lack,
// an operation of routes the API does not have, or one whose method or path differ. Call it once
// all operations are registered (a test, or at startup): Middleware refuses such requests, Check
// finds them before any request. nil when they agree.
func Check(api huma.API, routes []runtime.Route) error {
	inTable := map[string]*runtime.Operation{}
	for _, r := range routes {
		inTable[r.Operation.ID] = r.Operation
	}
	var problems []string
	seen := map[string]bool{}
	for path, item := range api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Options, item.Head, item.Patch, item.Trace} {
			if op == nil {
				continue
			}
			t, ok := inTable[op.OperationID]
			switch {
			case ok && (t.Method != op.Method || !sameShape(t.Path, path)):
				problems = append(problems, fmt.Sprintf("%s is %s %s in the API, %s %s in the table", op.OperationID, op.Method, path, t.Method, t.Path))
			case !ok && Marked(op):
				problems = append(problems, fmt.Sprintf("%s (%s %s) is marked %s in the API but not in the table", op.OperationID, op.Method, path, Extension))
			}
			seen[op.OperationID] = true
		}
	}
	for _, r := range routes {
		if !seen[r.Operation.ID] {
			problems = append(problems, fmt.Sprintf("%s (%s %s) is in the table but not in the API", r.Operation.ID, r.Operation.Method, r.Operation.Path))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("idemhuma: the generated operation table does not match the API (export the spec and run idemgen generate again): %s", strings.Join(problems, "; "))
	}
	return nil
}
