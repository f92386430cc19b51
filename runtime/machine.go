package runtime

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// This file holds what the two state machines (atomic.go, lease.go) share: a live record the
// request did not claim, or a store error, turned into the ending it means (decide.go's pure
// decisions, applied), and the run of one handler phase. What the client then hears is
// answers.go's.

// meet is the ending of a request whose key has the live record rec, which it did not claim.
func (x *exchange) meet(rec *store.Record) result {
	return met(decide(x.op.Mode, x.op.ID, x.fp, rec), x.op.ID, rec)
}

// met is the ending of verdict v on rec for a request to operation op that does not get the
// key: a replay, an expired result, a mismatch, or in flight. A takeover that was not made (an atomic-mode
// request, or a lease-mode one that ran out of attempts) is still in flight.
func met(v verdict, op string, rec *store.Record) result {
	switch v {
	case verdictReplay:
		return result{ending: endReplayed, rec: rec}
	case verdictExpired:
		return result{ending: endResultExpired, rec: rec}
	case verdictMismatch:
		if rec.State != store.Expired && rec.Operation != op {
			return result{ending: endOtherOperation}
		}
		return result{ending: endMismatch}
	default:
		return result{ending: endInFlight, after: rec.LeaseLeft}
	}
}

// storeFailed is the ending of a store error, by what it means (classify). A failure before
// anything was sent to be committed means the request was not processed; a commit whose outcome
// is unknown, or any failure after a lease-mode call phase (calledOut), does not. A store call
// cut short because the client went away is told apart from a store that failed.
func (x *exchange) storeFailed(err error) result {
	switch f := classify(x.op.Mode, err); {
	case f == faultBusy:
		return result{ending: endInFlight}
	case f == faultCompleted:
		var done *store.CompletedError
		errors.As(err, &done)
		return x.meet(&done.Record)
	case f == faultLeaseLost:
		return result{ending: endLeaseLost}
	case f == faultHandler:
		return result{ending: endHandlerFailed, err: err}
	case f == faultLimited:
		res := result{ending: endLimited}
		if lim := (*store.LimitError)(nil); errors.As(err, &lim) {
			res.after = lim.RetryAfter
		}
		return res
	case f == faultUnknown, x.calledOut:
		return result{ending: endStoreUnknown, err: err}
	case x.flight != nil && x.flight.shut.Load():
		// Shutdown's deadline cut the store call short: nothing ran.
		return result{ending: endDraining, err: err}
	case !x.detached && x.r.Context().Err() != nil:
		// A detached handler's store calls do not end with the client: their failure is the
		// store's.
		return result{ending: endCanceled, err: err}
	}
	return result{ending: endStoreUnavailable, err: err}
}

// ErrExecutionLimit is the cause (context.Cause) of a handler context that ended because the
// operation's execution limit passed (Operation.ExecutionLimit, execution.limit): the handler
// should stop; its failure is answered 500 and the key released, as any handler error.
var ErrExecutionLimit = errors.New("runtime: the operation's execution limit passed")

// detach returns the context a handler that holds its request's key runs under: ctx's values
// (the request's span, log identity, and whatever the service's middleware put there) without
// its cancellation, so that a client that disconnects no longer cancels an operation it
// started: the handler completes, its answer is stored, and the client's retry replays it (or
// waits for it under concurrency.wait) instead of starting over, which would never succeed for
// a client whose attempts are shorter than the handler (payment APIs finish what they
// accepted). The context ends at the operation's execution limit, counted from now, or at the
// deadline ctx already had (a timeout middleware's, a server-side decision), whichever comes
// first, and Runtime.Shutdown's deadline still cancels it (ErrShuttingDown). An operation with
// Attached set keeps ctx as it is. release frees the context's timer.
func (x *exchange) detach(ctx context.Context) (hctx context.Context, release context.CancelFunc) {
	if x.op.Attached {
		return x.rt.drain.cancelable(x.flight, ctx), func() {}
	}
	return x.detachFrom(ctx, context.WithoutCancel(ctx))
}

// detachFrom is detach for a caller that already has free, context.WithoutCancel(ctx).
func (x *exchange) detachFrom(ctx, free context.Context) (hctx context.Context, release context.CancelFunc) {
	if x.op.Attached {
		return x.rt.drain.cancelable(x.flight, ctx), func() {}
	}
	x.detached = true
	free = x.rt.drain.cancelable(x.flight, free) // Shutdown's deadline still ends it
	deadline := time.Now().Add(x.op.executionLimit())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		return context.WithDeadline(free, d)
	}
	return context.WithDeadlineCause(free, deadline, ErrExecutionLimit)
}

// drained is the ending of a request that reaches its claim while the process shuts down
// (Runtime.Shutdown): a key with a live record is answered from it (replay, 422, 409), as a
// lookup costs no claim; a new key, or a request without one, is refused and nothing runs.
func (x *exchange) drained(ctx context.Context, st store.Store) result {
	if x.key == "" {
		return result{ending: endDraining}
	}
	var (
		rec store.Record
		ok  bool
	)
	err := x.storeCall(ctx, spanLookup, 0, func(ctx context.Context) (err error) {
		rec, ok, err = st.Get(ctx, x.id())
		return err
	})
	switch {
	case err != nil:
		return x.storeFailed(err)
	case ok:
		return x.meet(&rec)
	}
	return result{ending: endDraining}
}

// earlierMet answers a request the decoder refused (x.earlier) from the live record of its key,
// which a decoder before the refusal wrote: x.fp is the fingerprint as that decoder computed
// it. The record answers as decide has it answer a request the decoder takes, and no more: a
// replay when it is this request's (or a completed record of another framing version, which
// decide replays to any request of its operation: no fingerprint safety is lost that a request
// the decoder takes does not lose already), 409 while it runs (a relaxed decoding never runs
// or takes over a handler). A mismatch, or no record, gets the refusal, which stands on its own.
func (x *exchange) earlierMet(rec *store.Record) result {
	switch decide(x.op.Mode, x.op.ID, x.fp, rec) {
	case verdictReplay:
		return result{ending: endReplayed, rec: rec}
	case verdictInFlight, verdictTakeover:
		return result{ending: endInFlight, after: rec.LeaseLeft}
	}
	return *x.earlier
}

// earlierLease is lease mode's lookup for x.earlier: a running record is visible, so one read
// decides.
func (x *exchange) earlierLease(ctx context.Context, st store.Store) result {
	var (
		rec store.Record
		ok  bool
	)
	err := x.storeCall(ctx, spanLookup, 0, func(ctx context.Context) (err error) {
		rec, ok, err = st.Get(ctx, x.id())
		return err
	})
	if err != nil || !ok {
		return *x.earlier
	}
	return x.earlierMet(&rec)
}

// handlerError is a handler phase that returned an error or panicked (stack set).
type handlerError struct {
	err   error
	stack []byte
}

// callPhase runs phase, one phase of a handler (an atomic handler, a lease-mode call phase or
// completion), under the handler span, turning a panic into a failure with its stack, so that
// the machine rolls back or releases and the client gets a 500 problem rather than a dropped
// connection. check turns what the phase returned into its value or its failure inside the span,
// so that the span records a failure check finds as well.
func callPhase[T, V any](ctx context.Context, x *exchange, phase func(context.Context) (T, error), check func(T, error) (V, *handlerError)) (v V, failure *handlerError) {
	ctx, span := x.rt.tracer.Start(ctx, spanHandler, internalSpan...)
	defer func() {
		if p := recover(); p != nil {
			var zero V
			v, failure = zero, &handlerError{err: fmt.Errorf("handler panicked: %v", p), stack: debug.Stack()}
		}
		var err error
		if failure != nil {
			err = failure.err
		}
		endSpan(span, err)
	}()
	return check(phase(ctx))
}
