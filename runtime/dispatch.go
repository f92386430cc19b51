package runtime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store"
)

// This file is the one dispatch of a request to a marked operation whose handler is not
// idemgen's generated one: Middleware (the wrapped net/http handler) and Guard (a framework's
// handler chain, through Guard.Serve or, value for value, Guard.Do) both come here. It admits,
// decodes and fingerprints the request (http.go), runs the state machine of the operation's
// mode, and hands the handler chain the request as fingerprinted, with the transaction or
// lease in its context; the chain answers with a value (a Response or an error), which the
// machine stores or releases.

// chain is the operation's handler chain at value level: it runs the handler on r2, the request
// as fingerprinted (handedOn), whose context carries the request's handle (TxFrom, LeaseFrom,
// OnComplete), and returns the handler's answer. ErrNoResponse: the handler answered nothing;
// a *foreignResponse: an answer the operation's handler did not produce (Middleware's verify),
// delivered and never stored; any other error fails the request (500, the key released).
type chain func(r2 *http.Request) (Response, error)

// dispatch runs one request to tr through the runtime and writes the answer (the chain's
// response, a replay, or a problem) to w. params are the router's path parameter values (nil:
// found in the path by the template). A request that is already inside a guarded handler (an
// adapter mounted twice on one route, a Middleware in front of an adapter) is not guarded
// again: the chain runs, and what it answers goes to the outer guard, which stores it.
func dispatch[DB any](w http.ResponseWriter, r *http.Request, rt *Runtime, st store.Transactional[DB], tr *tableRoute, params []string, run chain) {
	if outer := handleFrom(r.Context()); outer != nil && !outer.ended.Load() {
		resp, err := run(r)
		if err != nil {
			outer.inner.Store(&err)
			return
		}
		writeResponse(w, resp, func(http.Header) {})
		return
	}
	serveRouted(w, r, rt, tr.ep, params, func(in *gen.Input) (runner, error) {
		in.Reencode()
		if err := tr.Decode(in); err != nil {
			return nil, err
		}
		body, contentType := in.ReencodedBody()
		// call runs the chain once, with h in its context, and ends h when the chain returns: a
		// handler that takes the transaction or the lease later (a framework bridge that runs it
		// after the middleware returned) gets none (TxFrom).
		call := func(ctx context.Context, h *handle) (Response, error) {
			defer h.ended.Store(true)
			resp, err := run(handedOn(r, context.WithValue(ctx, handleKey{}, h), tr.Operation, body, contentType))
			if p := h.inner.Load(); p != nil {
				return Response{}, *p // a guard nested inside failed the request: its reason
			}
			return resp, err
		}
		return func(ctx context.Context, x *exchange) result {
			x.confirm = true
			if x.op.Mode == ModeLease {
				return runLease(ctx, x, st, func(ctx context.Context, l *Lease) (CompleteFunc[DB], error) {
					c := &completion[DB]{}
					resp, err := call(ctx, &handle{lease: l, completion: c})
					var foreign *foreignResponse
					if err != nil && !errors.As(err, &foreign) {
						return nil, err // the call phase failed: the key is released
					}
					return func(ctx context.Context, db DB) (Response, error) {
						if err != nil {
							return resp, err // delivered, never stored (completeTx)
						}
						return resp, c.run(ctx, db)
					}, nil
				})
			}
			return runAtomic(ctx, x, st, func(ctx context.Context, db DB) (Response, error) {
				return call(ctx, &handle{db: db})
			})
		}, nil
	})
}

// handle is what the handler of one dispatched request takes from its context: the
// transaction (atomic mode), or the lease and the completion's writes (lease mode).
type handle struct {
	db         any // DB of the store: the claim's transaction
	lease      *Lease
	completion any // *completion[DB]
	// took: TxFrom, LeaseFrom or OnComplete was called for it (verify).
	took atomic.Bool
	// ended: the chain has returned; the transaction or lease is no longer the handler's.
	ended atomic.Bool
	// inner is the error of a guard nested inside this one (dispatch).
	inner atomic.Pointer[error]
	// late is called when the transaction or lease is asked for after the chain returned.
	late func()
}

type handleKey struct{}

// handleFrom returns the handle of ctx, or nil.
func handleFrom(ctx context.Context) *handle {
	h, _ := ctx.Value(handleKey{}).(*handle)
	return h
}

// live returns the handle of ctx while its chain runs, marked as taken; nil otherwise.
func live(ctx context.Context) *handle {
	h := handleFrom(ctx)
	if h == nil {
		return nil
	}
	if h.ended.Load() {
		if h.late != nil {
			h.late()
		}
		return nil
	}
	h.took.Store(true)
	return h
}

// completion holds the writes a lease-mode handler registered with OnComplete.
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
// lease-mode request served by Middleware or a framework adapter (DB is the store's handle
// type, pgstore.DBTX for PostgreSQL). A handler calls the provider in its body and defers its
// own rows to write: they commit with the stored response when the response is final, and roll
// back with the release of the key otherwise, as a generated lease handler's CompleteFunc
// does. It returns false outside such a request, and once the handler chain has returned
// (write is then not registered).
func OnComplete[DB any](ctx context.Context, write func(ctx context.Context, db DB) error) bool {
	h := live(ctx)
	if h == nil {
		return false
	}
	c, ok := h.completion.(*completion[DB])
	if ok {
		c.writes = append(c.writes, write)
	}
	return ok
}

// TxFrom returns the transaction an atomic-mode request served by Middleware or a framework
// adapter writes through (DB is the store's handle type, pgstore.DBTX for PostgreSQL); false
// outside such a request, and once the handler chain has returned (a framework bridge that
// runs the handler after the middleware: its writes could never commit with the answer).
func TxFrom[DB any](ctx context.Context) (DB, bool) {
	var zero DB
	h := live(ctx)
	if h == nil {
		return zero, false
	}
	db, ok := h.db.(DB)
	return db, ok
}

// LeaseFrom returns the claim of a lease-mode request served by Middleware or a framework
// adapter; nil outside such a request, and once the handler chain has returned.
func LeaseFrom(ctx context.Context) *Lease {
	if h := live(ctx); h != nil {
		return h.lease
	}
	return nil
}

// ErrNoResponse is the error of a request whose handler wrote nothing (neither WriteHeader nor
// Write was called): a response the handler did not produce is never stored, so the request
// fails with 500 problem `internal`, the transaction rolls back and the key is free for the
// retry (echo.WrapMiddleware, for one, renders a handler's returned error only after the chain
// has finished). An explicit WriteHeader with an empty body is a response. Middleware and
// Guard return it; a framework adapter's Exec or Next may return it (wrapped) when the
// framework's error rendering wrote nothing either.
var ErrNoResponse = errors.New("the handler wrote no response (neither WriteHeader nor Write was called)")

// handedOn returns the request the operation's handler gets from Middleware (the wrapped
// handler) and Guard (the framework's chain): a copy of r that carries ctx, the body as the
// decoder read it (gen.Input.ReencodedBody, with contentType when it is not the request's), and
// only the query parameters op declares (declaredQuery) and the query parameter carrying the key,
// which a handler may read as it may read a key header. Its parsed forms are cleared, so a
// handler that reads a form parses that body, not a form an outer middleware parsed from the
// original one.
func handedOn(r *http.Request, ctx context.Context, op *Operation, body []byte, contentType string) *http.Request {
	r2 := r.WithContext(ctx)
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	if contentType != "" {
		r2.Header = r.Header.Clone()
		r2.Header.Set("Content-Type", contentType)
	}
	r2.TransferEncoding = nil
	r2.Form, r2.PostForm, r2.MultipartForm = nil, nil, nil
	if r.URL.RawQuery != "" {
		keep := op.Query
		if op.Key.Query != "" {
			keep = append(slices.Clip(op.Query), op.Key.Query)
		}
		r2.URL = declaredQuery(r.URL, keep)
	}
	return r2
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

// recorder is the http.ResponseWriter a net/http handler chain writes to: everything is kept
// until the runtime knows the outcome. Guard.Do also writes its answer into one, to return it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	// wrote: WriteHeader with a final status, or Write, was called.
	wrote bool
	// late, once set (the chain has returned), is called instead of recording a write.
	late func()
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

// WriteHeader keeps the first final status. An informational one (1xx but 101, such as 103
// Early Hints) is not the answer, and is not sent: the answer is sent once the outcome is known.
func (r *recorder) WriteHeader(status int) {
	if r.late != nil {
		r.late()
		return
	}
	if status >= 100 && status < 200 && status != http.StatusSwitchingProtocols {
		return
	}
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.late != nil {
		r.late()
		return len(b), nil
	}
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.body.Write(b)
}

// response is what was recorded; ErrNoResponse when nothing was.
func (r *recorder) response() (Response, error) {
	if !r.wrote {
		return Response{}, ErrNoResponse
	}
	return Response{Status: r.status, Header: r.header, Body: r.body.Bytes()}, nil
}
