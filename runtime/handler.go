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

// AtomicHandler returns the http.Handler of an atomic-mode operation: it reads and checks the
// request with decode, runs the state machine, and runs fn (with the decoded request) in the
// transaction that holds the claim and stores fn's final response. DB is the handle type of the
// Runtime's store (pgstore.DBTX for PostgreSQL); a store that cannot run fn's writes in its
// transactions makes every request a 500 and CheckStore reports it. Generated code calls it
// once per operation.
func AtomicHandler[T, DB any](rt *Runtime, op *Operation, decode DecodeFunc[T], fn func(ctx context.Context, db DB, req *T) (Response, error)) http.Handler {
	st, err := transactional[DB](rt, op)
	return handlerFunc(rt, op, decode, func(ctx context.Context, x *exchange, req *T) result {
		if err != nil {
			return result{outcome: OutcomeInternal, err: err, problem: newProblem(http.StatusInternalServerError, ProblemInternal, "")}
		}
		return runAtomic(ctx, x, st, func(ctx context.Context, db DB) (Response, error) { return fn(ctx, db, req) })
	})
}

// LeaseHandler returns the http.Handler of a lease-mode operation: fn's call phase runs outside
// any transaction with the claim's Lease, and the CompleteFunc it returns runs in the
// transaction that completes the record under the fencing token. See AtomicHandler.
func LeaseHandler[T, DB any](rt *Runtime, op *Operation, decode DecodeFunc[T], fn func(ctx context.Context, lease *Lease, req *T) (CompleteFunc[DB], error)) http.Handler {
	st, err := transactional[DB](rt, op)
	return handlerFunc(rt, op, decode, func(ctx context.Context, x *exchange, req *T) result {
		if err != nil {
			return result{outcome: OutcomeInternal, err: err, problem: newProblem(http.StatusInternalServerError, ProblemInternal, "")}
		}
		return runLease(ctx, x, st, func(ctx context.Context, l *Lease) (CompleteFunc[DB], error) { return fn(ctx, l, req) })
	})
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

func handlerFunc[T any](rt *Runtime, op *Operation, decode DecodeFunc[T], run func(context.Context, *exchange, *T) result) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, rt, op, decode, run)
	})
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
	in := &gen.Input{}
	in.Reset(r, x.body, x.mediaType, x.declared, x.pathValue, &x.rt.matcher)
	in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
	v, err := decode(in)
	if err != nil {
		in.Release()
		return zero, canonical.Fingerprint{}, err
	}
	return v, in.Sum(), nil
}
