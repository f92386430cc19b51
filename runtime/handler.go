package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/idemgen/idemgen/runtime/canonical"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store"
)

// Router is what Register mounts handlers on: http.ServeMux, and any router with a
// Handle(pattern, handler) method that takes Go 1.22 patterns ("POST /v1/payments/{id}").
type Router interface {
	Handle(pattern string, handler http.Handler)
}

// DecodeFunc reads one operation's request: it parses the parameters and body of in strictly,
// checks them against the schema, and completes the fingerprint framing with the canonical
// body. Its error is a 400 body-invalid when it names a JSON pointer (*gen.BodyError,
// *canonical.Error), a 500 otherwise. idemgen generates one per operation.
type DecodeFunc[T any] func(in *gen.Input) (T, error)

// AtomicFunc is an atomic-mode handler bound to its decoded request: it writes through db, the
// transaction that also stores its final response.
type AtomicFunc[DB any] func(ctx context.Context, db DB) (Response, error)

// LeaseFunc is a lease-mode handler bound to its decoded request: its call phase runs outside
// any transaction with the claim's Lease; the CompleteFunc it returns writes through the
// transaction that completes the record under the fencing token.
type LeaseFunc[DB any] func(ctx context.Context, lease *Lease) (CompleteFunc[DB], error)

// AtomicHandler returns the http.Handler of an atomic-mode operation. For each request, decode
// reads and checks it (and completes its fingerprint) and returns the handler bound to it; the
// runtime then runs the state machine and, for a new key, the handler in the transaction that
// holds the claim and stores its final response. DB is the handle type of the Runtime's store
// (pgstore.DBTX for PostgreSQL); a store that cannot run the handler's writes in its
// transactions makes every request a 500, which CheckStore reports up front. Generated code
// calls it once per operation.
func AtomicHandler[DB any](rt *Runtime, op *Operation, decode func(in *gen.Input) (AtomicFunc[DB], error)) http.Handler {
	st, err := transactional[DB](rt, op)
	ep := newEndpoint(op)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, rt, ep, func(in *gen.Input) (runner, error) {
			fn, derr := decode(in)
			if derr != nil {
				return nil, derr
			}
			return func(ctx context.Context, x *exchange) result {
				if err != nil {
					return misconfigured(err)
				}
				return runAtomic(ctx, x, st, fn)
			}, nil
		})
	})
}

// LeaseHandler returns the http.Handler of a lease-mode operation; see AtomicHandler.
func LeaseHandler[DB any](rt *Runtime, op *Operation, decode func(in *gen.Input) (LeaseFunc[DB], error)) http.Handler {
	st, err := transactional[DB](rt, op)
	ep := newEndpoint(op)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, rt, ep, func(in *gen.Input) (runner, error) {
			fn, derr := decode(in)
			if derr != nil {
				return nil, derr
			}
			return func(ctx context.Context, x *exchange) result {
				if err != nil {
					return misconfigured(err)
				}
				return runLease(ctx, x, st, fn)
			}, nil
		})
	})
}

// misconfigured answers a request to an operation its Runtime cannot serve (CheckStore).
func misconfigured(err error) result {
	return result{ending: endMisconfigured, err: err}
}

// CheckStore reports whether rt's store can serve op with handlers writing through DB: nil, or
// an error naming what is missing. Generated Register functions call it before mounting.
func CheckStore[DB any](rt *Runtime, op *Operation) error {
	_, err := transactional[DB](rt, op)
	return err
}

func transactional[DB any](rt *Runtime, op *Operation) (store.Transactional[DB], error) {
	if rt == nil {
		return nil, errors.New("runtime: nil *Runtime")
	}
	st, ok := rt.cfg.Store.(store.Transactional[DB])
	if !ok {
		var db DB
		return nil, fmt.Errorf("runtime: operation %s (%s mode) writes through %T, and the store %T cannot run those writes in its transactions",
			op.ID, op.Mode, any(&db), rt.cfg.Store)
	}
	return st, nil
}

// Fingerprint decodes r with decode and returns its fingerprint as the runtime computes it for
// op, and the decoded request: the same framing whether the request comes through a generated
// handler, through the Middleware, or here. It reads r's body whole (up to op's body limit); its
// errors are the decoder's (a *gen.BodyError or *canonical.Error names the offending value) or
// the body's. It does not look at the key or the store: support tools and tests use it to
// compare two requests.
func Fingerprint[T any](op *Operation, decode DecodeFunc[T], r *http.Request) (T, canonical.Fingerprint, error) {
	x := &exchange{rt: &Runtime{}, op: op, r: r}
	var zero T
	if r.Body != nil {
		body, err := io.ReadAll(io.LimitReader(r.Body, op.bodyLimit()+1))
		if err != nil {
			return zero, canonical.Fingerprint{}, fmt.Errorf("fingerprint: read body: %w", err)
		}
		x.body = body
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil {
			x.mediaType = strings.ToLower(mt)
			x.declared = matchMediaType(op.MediaTypes, x.mediaType)
		}
	}
	return decodeRequest(x, &gen.Input{}, decode, false)
}

// decodeRequest is the decode protocol, the one path by which a request to a marked operation is
// decoded and fingerprinted: by generated handlers and the Middleware (prepare), and by support
// tools and tests (Fingerprint). It resets in on the exchange's request, body, media type and
// declared entry, its path values (found by the operation's path template, whatever the router
// named its wildcards: exchange.pathValue) and the runtime's Matcher; begins the fingerprint
// with the operation's framing (operation, method, path template and values, declared query
// parameters, media type, fingerprint headers); runs decode, which adds the body; then sums the
// fingerprint, or releases the framing when decode refused the request.
func decodeRequest[T any](x *exchange, in *gen.Input, decode func(*gen.Input) (T, error), relaxed bool) (T, canonical.Fingerprint, error) {
	op := x.op
	in.Reset(x.r, x.body, x.mediaType, x.declared, x.pathValue, &x.rt.matcher)
	if relaxed {
		in.Relax() // as the decoders did before the refusals added since 0.1.0 (earlierTwin)
	}
	in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
	v, err := decode(in)
	if err != nil {
		in.Release()
		var zero T
		return zero, canonical.Fingerprint{}, err
	}
	return v, in.Sum(), nil
}

// BindAtomic joins a decoder and a handler that takes the decoded request into the decode
// function AtomicHandler takes, for handlers written by hand:
//
//	runtime.AtomicHandler(rt, op, runtime.BindAtomic(decodeOrder, placeOrder))
func BindAtomic[T, DB any](decode DecodeFunc[T], fn func(ctx context.Context, db DB, req *T) (Response, error)) func(*gen.Input) (AtomicFunc[DB], error) {
	return func(in *gen.Input) (AtomicFunc[DB], error) {
		req, err := decode(in)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, db DB) (Response, error) { return fn(ctx, db, &req) }, nil
	}
}

// BindLease is BindAtomic for LeaseHandler.
func BindLease[T, DB any](decode DecodeFunc[T], fn func(ctx context.Context, lease *Lease, req *T) (CompleteFunc[DB], error)) func(*gen.Input) (LeaseFunc[DB], error) {
	return func(in *gen.Input) (LeaseFunc[DB], error) {
		req, err := decode(in)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, l *Lease) (CompleteFunc[DB], error) { return fn(ctx, l, &req) }, nil
	}
}
