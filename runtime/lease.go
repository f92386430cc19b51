package runtime

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/idemgen/idemgen/runtime/store"
)

// runLease is the lease-mode state machine for one request whose key is valid (or absent and
// optional). The claim commits first with a lease and a fencing token; the handler's call phase
// runs outside any transaction; its completion phase writes through the transaction that
// compares and swaps the token and stores the response.
//
//	reserve   a live record answers: replay, 422, 409 until its lease ends (waiting up to
//	          Operation.Wait for the same request to finish), then a takeover by the same request
//	call      the handler calls out, with provider keys derived from (scope, key)
//	complete  lock the record under our token, run the completion, store, commit; a failure
//	          releases the key, and a token taken over meanwhile discards the result
func runLease[DB any](ctx context.Context, x *exchange, st store.Transactional[DB], fn func(context.Context, *Lease) (CompleteFunc[DB], error)) result {
	if x.key == "" {
		return runUnguardedLease(ctx, x, st, fn)
	}
	claim := x.claim()
	token, res := x.reserve(ctx, st, &claim)
	if res.answered() {
		return res
	}
	start := time.Now()
	res = ownLease(ctx, x, st, fn, &claim, token)
	x.executed(res, start)
	return res
}

// ownLease runs a lease-mode request that holds the claim of its key under token: the call
// phase, then the completion or the release.
func ownLease[DB any](ctx context.Context, x *exchange, st store.Transactional[DB], fn func(context.Context, *Lease) (CompleteFunc[DB], error), claim *store.Claim, token int64) result {
	lease := &Lease{st: st, id: claim.ID, token: token, secret: x.rt.cfg.ProviderKeySecret, timeout: x.rt.cfg.StoreTimeout}
	complete, failure := callLease(ctx, x, fn, lease)
	x.calledOut = true

	// The call phase is over: the completion is not canceled by a client that went away (the
	// external effect has happened).
	ctx = context.WithoutCancel(ctx)
	if failure != nil {
		if err := x.storeCall(ctx, spanComplete, 0, func(ctx context.Context) error { return st.Release(ctx, claim.ID, token) }); err != nil {
			// The lease ends on its own; the retry then takes it over.
			x.rt.log.LogAttrs(ctx, slog.LevelWarn, "release lease failed", append(x.logAttrs(), slog.Any("error", err))...)
		}
		return x.handlerFailed(failure.err, failure.stack)
	}
	var tx store.Tx[DB]
	err := x.storeCall(ctx, spanComplete, 0, func(ctx context.Context) (err error) {
		tx, err = st.BeginCompletion(ctx, *claim, token)
		return err
	})
	if err != nil {
		return x.storeFailed(err)
	}
	// A commit that fails leaves the lease in place: a retry after it ends takes over, and the
	// provider's deduplication on ProviderKey keeps the external effect single.
	return completeTx(ctx, x, tx, callHandler(tx.HandlerContext(ctx), x, tx.DB(), complete))
}

// reserve claims the key for lease mode and returns its fencing token, or the answer when the
// request does not get the key. A running claim of the same request is waited for while
// Operation.Wait allows, then answered 409 until its lease ends, then taken over.
func (x *exchange) reserve(ctx context.Context, st store.Store, claim *store.Claim) (int64, result) {
	deadline := time.Now().Add(x.op.Wait)
	for attempt := 0; ; attempt++ {
		var r store.Reservation
		err := x.storeCall(ctx, spanLookup, 0, func(ctx context.Context) (err error) {
			r, err = st.Reserve(ctx, *claim)
			return err
		})
		if err == nil && !r.Claimed() && decide(ModeLease, x.op.ID, x.fp, &r.Record) == verdictTakeover {
			err = x.storeCall(ctx, spanClaim, 0, func(ctx context.Context) (err error) {
				r.Token, err = st.TakeOver(ctx, *claim, r.Record.Token)
				return err
			})
			if err == nil {
				x.rt.obs.Outcome(x.op.ID, ModeLease, OutcomeTakeover)
				x.rt.log.LogAttrs(ctx, slog.LevelInfo, "lease taken over", append(x.logAttrs(), slog.Int64("token", r.Token))...)
			}
		}
		switch {
		case errors.Is(err, store.ErrLost) && attempt < 3:
			continue // someone else moved first: look again
		case errors.Is(err, store.ErrLost):
			return 0, x.inFlight(0) // others keep moving the record: another owner is running
		case err != nil:
			return 0, x.storeFailed(err)
		case r.Claimed():
			return r.Token, result{}
		}
		wait := time.Until(deadline)
		if decide(ModeLease, x.op.ID, x.fp, &r.Record) != verdictInFlight || wait <= 0 {
			return 0, x.answerRecord(&r.Record)
		}
		select {
		case <-ctx.Done():
			return 0, x.inFlight(r.Record.LeaseLeft)
		case <-time.After(min(wait, 50*time.Millisecond)):
		}
	}
}

// runUnguardedLease runs a lease-mode handler whose optional key is absent: no record; its
// derived keys come from a random nonce, so nothing downstream deduplicates either.
func runUnguardedLease[DB any](ctx context.Context, x *exchange, st store.Transactional[DB], fn func(context.Context, *Lease) (CompleteFunc[DB], error)) result {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	complete, failure := callLease(ctx, x, fn, &Lease{nonce: nonce, secret: x.rt.cfg.ProviderKeySecret})
	x.calledOut = true
	if failure != nil {
		return x.handlerFailed(failure.err, failure.stack)
	}
	return runUnguarded(ctx, x, st, complete)
}

// callLease runs the call phase under the handler span, turning a panic into a failure with its
// stack.
func callLease[DB any](ctx context.Context, x *exchange, fn func(context.Context, *Lease) (CompleteFunc[DB], error), l *Lease) (c func(context.Context, DB) (Response, error), herr *handlerError) {
	ctx, span := x.rt.tracer.Start(ctx, spanHandler, trace.WithSpanKind(trace.SpanKindInternal))
	defer func() {
		if v := recover(); v != nil {
			herr = &handlerError{err: fmt.Errorf("handler panicked: %v", v), stack: debug.Stack()}
		}
		var err error
		if herr != nil {
			err = herr.err
		}
		endSpan(span, err)
	}()
	complete, err := fn(ctx, l)
	switch {
	case err != nil:
		return nil, &handlerError{err: err}
	case complete == nil:
		return nil, &handlerError{err: errors.New("lease handler returned no CompleteFunc")}
	}
	return complete, nil
}

// CompleteFunc is the completion phase of a lease-mode handler: it writes its rows through db,
// the transaction that also completes the record under the fencing token, and answers.
type CompleteFunc[DB any] func(ctx context.Context, db DB) (Response, error)

// ErrLeaseLost is returned by Lease.Extend when the claim's fencing token is no longer the
// record's: its lease ended and another request with the same fingerprint took over (or the
// key was released). The handler should stop; its completion will not be stored.
var ErrLeaseLost = store.ErrLost

// Lease is a lease-mode handler's view of its claim: the fencing token, the heartbeat, and the
// derivations that make downstream calls idempotent across attempts and takeovers.
type Lease struct {
	st      store.Store
	id      store.ID
	token   int64
	secret  []byte
	timeout time.Duration
	// nonce: an unguarded handle (optional key absent) derives from it: nothing to deduplicate.
	nonce []byte
}

// Token returns the fencing token of this claim: 1 for the first claim of a key, one more for
// each takeover. A downstream system that stores it can refuse writes carrying a smaller one.
// An unguarded handle (no key) has token 0.
func (l *Lease) Token() int64 { return l.token }

// ProviderKey derives the idempotency key to send to a downstream provider for the call named
// label (e.g. "charge"): 64 lowercase hex digits, the same on every attempt and takeover of this
// (scope, key), different for every label, scope and key. It is SHA-256, or HMAC-SHA256 under
// Config.ProviderKeySecret, over a length-prefixed framing of "idemgen/provider-key/v1", scope,
// the stored key (operation-qualified under scope operation) and label, so no two inputs share
// a framing.
func (l *Lease) ProviderKey(label string) string {
	return hex.EncodeToString(l.derive("idemgen/provider-key/v1", label))
}

// DeriveID derives a deterministic resource id (an RFC 9562 version 8 UUID in its text form)
// for the resource named label, so a handler that creates "the payment of this key" gives it the
// same id on every attempt and takeover. The framing is ProviderKey's with the domain
// "idemgen/resource-id/v1".
func (l *Lease) DeriveID(label string) string {
	b := l.derive("idemgen/resource-id/v1", label)[:16]
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (l *Lease) derive(domain, label string) []byte {
	var h hash.Hash
	if len(l.secret) > 0 {
		h = hmac.New(sha256.New, l.secret)
	} else {
		h = sha256.New()
	}
	frame := func(s []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write(s)
	}
	frame([]byte(domain))
	if l.nonce != nil {
		frame(l.nonce)
	} else {
		frame([]byte(l.id.Scope))
		frame([]byte(l.id.Key))
	}
	frame([]byte(label))
	return h.Sum(nil)
}

// Extend moves the lease's end to d after the store's now (a heartbeat for a call that may
// outlast Operation.Lease), in one store call bounded by Config.StoreTimeout. It returns
// ErrLeaseLost when the token is no longer the record's, or the store's error. Extending an
// unguarded handle does nothing.
func (l *Lease) Extend(ctx context.Context, d time.Duration) error {
	if l.nonce != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	return l.st.Extend(ctx, l.id, l.token, d)
}
