package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// runAtomic is the atomic-mode state machine for one request whose key is valid (or absent and
// optional). The claim, the handler's writes through its DB and the stored response commit in
// one transaction of st; anything that is not a final response rolls all of it back, so a retry
// simply runs again.
//
//	lookup+claim  a live record answers at once: replay, 422 or 409
//	handler       runs in the claim's transaction, detached from the client (detach) within
//	              the operation's execution limit
//	complete      a final response is stored with the handler's writes and committed;
//	              anything else is rolled back and the key is free
func runAtomic[DB any](ctx context.Context, x *exchange, st store.Transactional[DB], fn func(context.Context, DB) (Response, error)) result {
	if x.earlier != nil {
		return earlierAtomic(ctx, x, st)
	}
	if x.rt.drain.refusing() {
		return x.drained(ctx, st)
	}
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
		return x.meet(rec)
	}
	start := time.Now()
	if x.confirm {
		if err := x.storeCall(ctx, spanClaim, 0, tx.Confirm); err != nil {
			_ = tx.Abort(context.WithoutCancel(ctx))
			return x.storeFailed(err)
		}
	}
	// The key is ours and the handler starts: from here on the client going away does not
	// stop it (detach).
	free := context.WithoutCancel(ctx)
	hctx, release := x.detachFrom(ctx, free)
	defer release()
	h := callHandler(tx.HandlerContext(hctx), x, tx.DB(), fn)
	res := completeTx(free, x, tx, h)
	res.claimed = start
	return res
}

// earlierAtomic is atomic mode's lookup for a refused request that an earlier decoder took
// (x.earlier, exchange.earlierMet). A running atomic claim is invisible until it commits, so the
// lookup is a claim that runs nothing: a concurrent claim of the key (the earlier version may be
// executing the request) is 409; a live record is compared; a key with neither is given back at
// once and the refusal stands. The claim does not count against the tenant's records cap.
func earlierAtomic[DB any](ctx context.Context, x *exchange, st store.Transactional[DB]) result {
	c := x.claim()
	c.Wait, c.Counted = 0, true
	var (
		tx  store.Tx[DB]
		rec *store.Record
	)
	err := x.storeCall(ctx, spanLookup, 0, func(ctx context.Context) (err error) {
		tx, rec, err = st.BeginAtomic(ctx, c)
		return err
	})
	switch {
	case err != nil && classify(ModeAtomic, err) == faultBusy:
		return result{ending: endInFlight}
	case err != nil:
		return *x.earlier
	case rec != nil:
		return x.earlierMet(rec)
	}
	_ = tx.Abort(context.WithoutCancel(ctx))
	return *x.earlier
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
	h := callHandler(tx.HandlerContext(x.rt.drain.cancelable(x.flight, ctx)), x, tx.DB(), fn)
	return completeTx(context.WithoutCancel(ctx), x, tx, h)
}

// completeTx ends a transaction the handler wrote through: a final response is stored (a
// transaction without a record just commits) with the handler's writes; anything else (a
// status replay.statuses does not store, an answer the handler marked NotFinal) is rolled back
// and the key released. The handler has run, so ctx no longer ends when the client goes
// away.
func completeTx[DB any](ctx context.Context, x *exchange, tx store.Tx[DB], h handled) result {
	if h.failure != nil || h.foreign != nil || !x.op.isFinal(h.resp.Status) || x.notFinal.Load() {
		if err := x.storeCall(ctx, spanComplete, 0, tx.Abort); err != nil {
			return x.storeFailed(err)
		}
		switch {
		case h.failure != nil:
			return result{ending: endHandlerFailed, err: h.failure.err, stack: h.failure.stack}
		case x.key == "":
			return result{ending: endUnguarded, resp: h.resp} // without a record, nothing to keep apart
		case h.foreign != nil:
			// Not the operation's answer (Middleware): delivered as it is, never stored.
			return result{ending: endForeign, resp: h.resp, err: h.foreign}
		}
		return result{ending: endReleased, resp: h.resp}
	}
	x.stamp(&h.resp)
	stored := x.storable(h.resp)
	if err := x.storeCall(ctx, spanComplete, 0, func(ctx context.Context) error { return tx.Commit(ctx, stored) }); err != nil {
		return x.storeFailed(err)
	}
	if x.key == "" {
		return result{ending: endUnguarded, resp: h.resp}
	}
	return result{ending: endExecuted, resp: h.resp}
}

// handled is what a handler did: its response, or its failure (an error or a recovered panic).
// foreign is set when the response is not the operation's own (a router's 404 in front of
// which the Middleware ran): it is delivered but never stored.
type handled struct {
	resp    Response
	failure *handlerError
	foreign *foreignResponse
}

// callHandler runs fn, the atomic handler, with db as one handler phase (callPhase).
func callHandler[DB any](ctx context.Context, x *exchange, db DB, fn func(context.Context, DB) (Response, error)) handled {
	h, failure := callPhase(ctx, x, func(ctx context.Context) (Response, error) { return fn(ctx, db) }, checkResponse)
	if failure != nil {
		return handled{failure: failure}
	}
	return h
}

// checkResponse checks what an atomic handler (or a completion) returned: a response the
// operation's handler did not produce (Middleware) is delivered but never stored, an error is
// a failure, and a status outside 100-999 is a bug in the handler. Status 0 is 200, as
// net/http writes it.
func checkResponse(resp Response, err error) (handled, *handlerError) {
	var foreign *foreignResponse
	switch {
	case errors.As(err, &foreign):
		return handled{resp: foreign.resp, foreign: foreign}, nil
	case err != nil:
		return handled{}, &handlerError{err: err}
	case resp.Status == 0:
		resp.Status = http.StatusOK
	case resp.Status < 100 || resp.Status > 999:
		return handled{}, &handlerError{err: fmt.Errorf("handler answered status %d", resp.Status)}
	}
	return handled{resp: resp}, nil
}
