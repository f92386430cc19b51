package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// runAtomic is the atomic-mode state machine for one request whose key is valid (or absent and
// optional). The claim, the handler's writes through its DB and the stored response commit in
// one transaction of st; anything that is not a final response rolls all of it back, so a retry
// simply runs again.
//
//	lookup+claim  a live record answers at once: replay, 422 or 409
//	handler       runs in the claim's transaction
//	complete      a final response is stored with the handler's writes and committed;
//	              anything else is rolled back and the key is free
func runAtomic[DB any](ctx context.Context, x *exchange, st store.Transactional[DB], fn func(context.Context, DB) (Response, error)) result {
	if x.key == "" {
		return runUnguarded(ctx, x, st, fn)
	}
	var (
		tx  store.Tx[DB]
		rec *store.Record
	)
	err := x.storeCall(ctx, spanLookup, x.op.Wait, func(ctx context.Context) (err error) {
		tx, rec, err = st.BeginAtomic(ctx, x.claim())
		return err
	})
	switch {
	case err != nil:
		return x.storeFailed(err)
	case rec != nil:
		return x.answerRecord(rec)
	}
	start := time.Now()
	if x.confirm {
		if err := x.storeCall(ctx, spanClaim, 0, tx.Confirm); err != nil {
			_ = tx.Abort(context.WithoutCancel(ctx))
			return x.storeFailed(err)
		}
	}
	h := callHandler(tx.HandlerContext(ctx), x, tx.DB(), fn)
	res := completeTx(context.WithoutCancel(ctx), x, tx, h)
	x.executed(res, start)
	return res
}

// runUnguarded runs fn for a request whose optional key is absent (key.required false): no
// record; the handler's writes commit when its response is final.
func runUnguarded[DB any](ctx context.Context, x *exchange, st store.Transactional[DB], fn func(context.Context, DB) (Response, error)) result {
	var tx store.Tx[DB]
	err := x.storeCall(ctx, spanBegin, 0, func(ctx context.Context) (err error) {
		tx, err = st.BeginPlain(store.WithTenant(ctx, x.tenant))
		return err
	})
	if err != nil {
		return x.storeFailed(err)
	}
	h := callHandler(tx.HandlerContext(ctx), x, tx.DB(), fn)
	return completeTx(context.WithoutCancel(ctx), x, tx, h)
}

// completeTx ends a transaction the handler wrote through: a final response is stored (a
// transaction without a record just commits) with the handler's writes; anything else is rolled
// back and the key released. The handler has run, so ctx no longer ends when the client goes
// away.
func completeTx[DB any](ctx context.Context, x *exchange, tx store.Tx[DB], h handled) result {
	done, released := OutcomeExecuted, OutcomeReleased
	if x.key == "" {
		done, released = OutcomeUnguarded, OutcomeUnguarded
	}
	if h.failure != nil || h.foreign != nil || !x.op.isFinal(h.resp.Status) {
		if err := x.storeCall(ctx, spanComplete, 0, tx.Abort); err != nil {
			return x.storeFailed(err)
		}
		if h.failure != nil {
			return x.handlerFailed(h.failure.err, h.failure.stack)
		}
		if h.foreign != nil {
			// Not the operation's answer (Middleware): delivered as it is, never stored.
			return result{outcome: released, resp: h.resp, err: h.foreign}
		}
		return result{outcome: released, resp: h.resp}
	}
	x.stamp(&h.resp)
	stored := x.storable(h.resp)
	if err := x.storeCall(ctx, spanComplete, 0, func(ctx context.Context) error { return tx.Commit(ctx, stored) }); err != nil {
		return x.storeFailed(err)
	}
	return result{outcome: done, resp: h.resp}
}

// handled is what a handler did: its response, or its failure (an error or a recovered panic).
// foreign is set when the response is not the operation's own (a router's 404 in front of
// which the Middleware ran): it is delivered but never stored.
type handled struct {
	resp    Response
	failure *handlerError
	foreign *foreignResponse
}

// handlerError is a handler that returned an error or panicked (stack set).
type handlerError struct {
	err   error
	stack []byte
}

// callHandler runs fn under the handler span, turning a panic into a failure with its stack, so
// the transaction is rolled back and the client gets a 500 problem rather than a dropped
// connection.
func callHandler[DB any](ctx context.Context, x *exchange, db DB, fn func(context.Context, DB) (Response, error)) (h handled) {
	ctx, span := x.rt.tracer.Start(ctx, spanHandler, internalSpan...)
	defer func() {
		if v := recover(); v != nil {
			h = handled{failure: &handlerError{err: fmt.Errorf("handler panicked: %v", v), stack: debug.Stack()}}
		}
		var err error
		if h.failure != nil {
			err = h.failure.err
		}
		endSpan(span, err)
	}()
	resp, err := fn(ctx, db)
	var foreign *foreignResponse
	switch {
	case errors.As(err, &foreign):
		return handled{resp: foreign.resp, foreign: foreign}
	case err != nil:
		return handled{failure: &handlerError{err: err}}
	case resp.Status == 0:
		resp.Status = http.StatusOK
	case resp.Status < 100 || resp.Status > 999:
		return handled{failure: &handlerError{err: fmt.Errorf("handler answered status %d", resp.Status)}}
	}
	return handled{resp: resp}
}
