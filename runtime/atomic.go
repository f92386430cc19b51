package runtime

import (
	"context"
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
	rt := x.rt
	start := time.Now()
	claimCtx, cancel := context.WithTimeout(ctx, rt.cfg.StoreTimeout+x.op.Wait)
	tx, rec, err := st.BeginAtomic(claimCtx, x.claim())
	cancel()
	rt.obs.ClaimLatency(x.op.ID, ModeAtomic, time.Since(start))
	switch {
	case err != nil:
		return x.storeFailed(err)
	case rec != nil:
		return x.answerRecord(rec)
	}
	if x.confirm {
		confirmCtx, cancel := context.WithTimeout(ctx, rt.cfg.StoreTimeout)
		err := tx.Confirm(confirmCtx)
		cancel()
		if err != nil {
			_ = tx.Abort(context.WithoutCancel(ctx))
			return x.storeFailed(err)
		}
	}

	resp, herr := callHandler(tx.HandlerContext(ctx), tx.DB(), fn)

	// The handler has run: the completion is not canceled by a client that went away, and
	// each store call stays bounded.
	doneCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rt.cfg.StoreTimeout)
	defer cancel()
	if herr != nil || !x.op.isFinal(resp.Status) {
		if err := tx.Abort(doneCtx); err != nil {
			return x.storeFailed(err)
		}
		if herr != nil {
			return x.handlerFailed(herr.err, herr.stack)
		}
		return result{outcome: OutcomeReleased, resp: resp}
	}
	if err := tx.Commit(doneCtx, x.op.storable(resp)); err != nil {
		return x.storeFailed(err)
	}
	return result{outcome: OutcomeExecuted, resp: resp}
}

// runUnguarded runs fn for a request whose optional key is absent (key.required false): no
// record; the handler's writes commit when its response is final.
func runUnguarded[DB any](ctx context.Context, x *exchange, st store.Transactional[DB], fn func(context.Context, DB) (Response, error)) result {
	beginCtx, cancel := context.WithTimeout(ctx, x.rt.cfg.StoreTimeout)
	tx, err := st.BeginPlain(beginCtx)
	cancel()
	if err != nil {
		return x.storeFailed(err)
	}
	resp, herr := callHandler(tx.HandlerContext(ctx), tx.DB(), fn)
	doneCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.rt.cfg.StoreTimeout)
	defer cancel()
	if herr != nil || !x.op.isFinal(resp.Status) {
		if err := tx.Abort(doneCtx); err != nil {
			return x.storeFailed(err)
		}
		if herr != nil {
			return x.handlerFailed(herr.err, herr.stack)
		}
		return result{outcome: OutcomeUnguarded, resp: resp}
	}
	if err := tx.Commit(doneCtx, store.Response{}); err != nil {
		return x.storeFailed(err)
	}
	return result{outcome: OutcomeUnguarded, resp: resp}
}

// handlerError is a handler that returned an error or panicked (stack set).
type handlerError struct {
	err   error
	stack []byte
}

// callHandler runs fn, turning a panic into an error with its stack, so the transaction is
// rolled back and the client gets a 500 problem rather than a dropped connection.
func callHandler[DB any](ctx context.Context, db DB, fn func(context.Context, DB) (Response, error)) (resp Response, herr *handlerError) {
	defer func() {
		if v := recover(); v != nil {
			herr = &handlerError{err: fmt.Errorf("handler panicked: %v", v), stack: debug.Stack()}
		}
	}()
	resp, err := fn(ctx, db)
	switch {
	case err != nil:
		return resp, &handlerError{err: err}
	case resp.Status == 0:
		resp.Status = http.StatusOK
	case resp.Status < 100 || resp.Status > 999:
		return resp, &handlerError{err: fmt.Errorf("handler answered status %d", resp.Status)}
	}
	return resp, nil
}
