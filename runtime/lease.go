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
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/idemgen/idemgen/runtime/store"
)

// runLease is the lease-mode state machine for one request whose key is valid (or absent and
// optional). The claim commits first with a lease and a fencing token; the handler's call phase
// runs outside any transaction; its completion phase writes through the transaction that
// compares and swaps the token and stores the response.
//
//	reserve   a live record answers: replay, 422, 409 until its lease ends (waiting up to
//	          Operation.Wait for the same request to finish), then a takeover by the same request
//	call      the handler calls out, detached from the client within the execution limit,
//	          with provider keys derived from (scope, key) and recorded before each call
//	          (Lease.ProviderCall)
//	complete  lock the record under our token, run the completion, store, commit; a failure
//	          releases the key, and a token taken over meanwhile discards the result
func runLease[DB any](ctx context.Context, x *exchange, st store.Transactional[DB], fn func(context.Context, *Lease) (CompleteFunc[DB], error)) result {
	if x.earlier != nil {
		return x.earlierLease(ctx, st)
	}
	if x.rt.drain.refusing() {
		return x.drained(ctx, st)
	}
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
	res.claimed = start
	return res
}

// ownLease runs a lease-mode request that holds the claim of its key under token: the call
// phase, then the completion or the release.
func ownLease[DB any](ctx context.Context, x *exchange, st store.Transactional[DB], fn func(context.Context, *Lease) (CompleteFunc[DB], error), claim *store.Claim, token int64) result {
	lease := &Lease{st: st, claim: *claim, token: token, secret: x.rt.cfg.ProviderKeySecret, timeout: x.rt.cfg.StoreTimeout}
	// The key is ours: the call phase runs detached from the client within the operation's
	// execution limit (detach). Should the process leave before the call phase ends
	// (Runtime.Shutdown's deadline), the lease ends at once, so that the same request's retry on
	// another replica takes the key over without waiting for it to run out.
	x.rt.drain.holding(x.flight, func(ctx context.Context) error { return st.Extend(ctx, claim.ID, token, 0) })
	hctx, release := x.detach(ctx)
	complete, failure := callPhase(hctx, x, func(ctx context.Context) (CompleteFunc[DB], error) { return fn(ctx, lease) }, checkCallPhase[DB])
	release()
	x.rt.drain.holding(x.flight, nil)
	x.calledOut = true

	// The call phase is over: the completion is not canceled by a client that went away (the
	// external effect has happened), whether or not the operation is detached; its handler
	// phase gets an execution limit of its own.
	ctx = context.WithoutCancel(ctx)
	if failure != nil {
		var notRecorded *callError
		lost := errors.As(failure.err, &notRecorded) && errors.Is(notRecorded.err, store.ErrLost)
		if !lost {
			if err := x.storeCall(ctx, spanComplete, 0, func(ctx context.Context) error { return st.Release(ctx, claim.ID, token) }); err != nil {
				// The lease ends on its own; the retry then takes it over.
				x.rt.log.LogAttrs(ctx, slog.LevelWarn, "release lease failed", append(x.logAttrs(), slog.Any("error", err))...)
			}
		}
		if notRecorded != nil {
			// The store failed (or the lease was lost) before a provider call the handler did
			// not make: the store's failure, answered as one. It is "not processed" only when
			// no earlier call of the call phase was recorded (and so possibly made).
			x.calledOut = len(lease.recorded()) > 0
			return x.storeFailed(notRecorded.err)
		}
		return result{ending: endHandlerFailed, err: failure.err, stack: failure.stack}
	}
	calls := lease.recorded()
	c := *claim
	c.Calls = len(calls) > 0
	var tx store.Tx[DB]
	err := x.storeCall(ctx, spanComplete, 0, func(ctx context.Context) (err error) {
		tx, err = st.BeginCompletion(ctx, c, token)
		return err
	})
	if err != nil {
		x.uncertain(ctx, st, &c, token, calls, err)
		return x.storeFailed(err)
	}
	// A commit that fails leaves the lease in place: a retry after it ends takes over, and the
	// provider's deduplication on ProviderKey keeps the external effect single. Until then the
	// record is uncertain when the call phase recorded calls (x.uncertain).
	wtx := &watchedTx[DB]{Tx: tx}
	hctx, release = x.detach(ctx)
	defer release()
	res := completeTx(ctx, x, store.Tx[DB](wtx), callHandler(tx.HandlerContext(hctx), x, tx.DB(), complete))
	if wtx.err != nil {
		x.uncertain(ctx, st, &c, token, calls, wtx.err)
	}
	return res
}

// watchedTx is a completion's transaction that remembers the error of its Commit or Abort.
type watchedTx[DB any] struct {
	store.Tx[DB]
	err error
}

func (w *watchedTx[DB]) Commit(ctx context.Context, resp store.Response) error {
	w.err = w.Tx.Commit(ctx, resp)
	return w.err
}

func (w *watchedTx[DB]) Abort(ctx context.Context) error {
	w.err = w.Tx.Abort(ctx)
	return w.err
}

// uncertain marks the record held under token uncertain after its completion failed with err,
// when its call phase recorded calls: the provider may have acted, and nobody knows what it did
// until a retry takes over, or reconciliation with the provider's report settles it. A lost
// lease (another request took over or completed) and a concurrent completion leave it alone. The
// mark is best effort: a store that cannot be reached leaves the record to its lease, which
// then makes it uncertain all the same.
func (x *exchange) uncertain(ctx context.Context, st store.Store, c *store.Claim, token int64, calls []store.Call, err error) {
	var done *store.CompletedError
	if len(calls) == 0 || errors.Is(err, store.ErrLost) || errors.Is(err, store.ErrBusy) || errors.As(err, &done) {
		return
	}
	reason := store.UncertainCompletionFailed
	if errors.Is(err, store.ErrOutcomeUnknown) {
		reason = store.UncertainOutcomeUnknown
	}
	attrs := append(x.logAttrs(), slog.String("reason", reason.String()), slog.Int64("token", token), slog.Any("error", err))
	for _, call := range calls {
		attrs = append(attrs, slog.String("provider_key."+call.Label, call.ProviderKey))
	}
	if merr := x.storeCall(ctx, spanComplete, 0, func(ctx context.Context) error { return st.MarkUncertain(ctx, c.ID, token, reason) }); merr != nil {
		attrs = append(attrs, slog.Any("mark_error", merr))
	}
	x.rt.log.LogAttrs(ctx, slog.LevelWarn, "uncertain outcome: the completion failed after provider calls", attrs...)
	if o, ok := x.rt.obs.(UncertainObserver); ok {
		o.Uncertain(x.op.ID, reason)
	}
}

// reserve claims the key for lease mode and returns its fencing token, or the ending of a
// request that does not get the key. A running claim of the same request is waited for while
// Operation.Wait allows, then answered 409 until its lease ends, then taken over. Each look at
// the record is decided once: that verdict drives the takeover, the wait and the ending.
func (x *exchange) reserve(ctx context.Context, st store.Store, claim *store.Claim) (int64, result) {
	deadline := time.Now().Add(x.op.Wait)
	for attempt := 0; ; attempt++ {
		var r store.Reservation
		err := x.storeCall(ctx, spanLookup, 0, func(ctx context.Context) (err error) {
			r, err = st.Reserve(ctx, *claim)
			return err
		})
		if err == nil && r.Claimed() {
			return r.Token, result{}
		}
		var v verdict
		if err == nil {
			v = decide(ModeLease, x.op.ID, x.fp, &r.Record)
		}
		if v == verdictTakeover {
			err = x.storeCall(ctx, spanClaim, 0, func(ctx context.Context) (err error) {
				r.Token, err = st.TakeOver(ctx, *claim, r.Record.Token)
				return err
			})
			if err == nil {
				x.rt.obs.Outcome(x.op.ID, ModeLease, OutcomeTakeover)
				x.rt.log.LogAttrs(ctx, slog.LevelInfo, "lease taken over", append(x.logAttrs(), slog.Int64("token", r.Token))...)
				return r.Token, result{}
			}
		}
		switch {
		case errors.Is(err, store.ErrLost) && attempt < 3:
			continue // someone else moved first: look again
		case errors.Is(err, store.ErrLost):
			return 0, result{ending: endInFlight} // others keep moving the record: another owner is running
		case err != nil:
			return 0, x.storeFailed(err)
		}
		wait := time.Until(deadline)
		if v != verdictInFlight || wait <= 0 {
			return 0, met(v, x.op.ID, &r.Record)
		}
		select {
		case <-ctx.Done():
			return 0, result{ending: endInFlight, after: r.Record.LeaseLeft}
		case <-time.After(min(wait, 50*time.Millisecond)):
		}
	}
}

// runUnguardedLease runs a lease-mode handler whose optional key is absent: no record; its
// derived keys come from a random nonce, so nothing downstream deduplicates either.
func runUnguardedLease[DB any](ctx context.Context, x *exchange, st store.Transactional[DB], fn func(context.Context, *Lease) (CompleteFunc[DB], error)) result {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	lease := &Lease{nonce: nonce, secret: x.rt.cfg.ProviderKeySecret}
	complete, failure := callPhase(x.rt.drain.cancelable(x.flight, ctx), x, func(ctx context.Context) (CompleteFunc[DB], error) { return fn(ctx, lease) }, checkCallPhase[DB])
	x.calledOut = true
	if failure != nil {
		return result{ending: endHandlerFailed, err: failure.err, stack: failure.stack}
	}
	return runUnguarded(ctx, x, st, complete)
}

// checkCallPhase checks what a lease-mode call phase returned: an error is its failure, and so
// is a missing completion (a bug in the handler).
func checkCallPhase[DB any](complete CompleteFunc[DB], err error) (CompleteFunc[DB], *handlerError) {
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
// derivations that make downstream calls idempotent across attempts and takeovers. Its methods
// are safe for concurrent use by the handler's goroutines.
type Lease struct {
	st      store.Store
	claim   store.Claim
	token   int64
	secret  []byte
	timeout time.Duration
	// nonce: an unguarded handle (optional key absent) derives from it: nothing to deduplicate.
	nonce []byte

	// calls are the calls recorded so far (ProviderCall).
	mu    sync.Mutex
	calls []store.Call
}

// Call describes a downstream call for Lease.ProviderCall.
type Call struct {
	// Label names the call within the request ("charge", "refund"): 1 to 100 bytes of
	// printable UTF-8. Each label has its own provider key.
	Label string
	// Amount, in the currency's minor units (cents), and Currency, an ISO 4217 code (three
	// letters, any case), are what the call charges: reconciliation compares them with the
	// provider's report. Leave Currency empty for a call that charges nothing.
	Amount   int64
	Currency string
}

// ProviderKey returns the idempotency key to send to a downstream provider for the call named
// label, after recording it with the call phase: ProviderCall with only a label. Call it, and
// check its error, before the provider call it keys.
func (l *Lease) ProviderKey(ctx context.Context, label string) (string, error) {
	return l.ProviderCall(ctx, Call{Label: label})
}

// ProviderCall records, before the handler makes it, that this claim's call phase starts the
// downstream call c, and returns the idempotency key to send with it: 64 lowercase hex digits,
// the same on every attempt and takeover of this (scope, key), different for every label, scope
// and key (see ProviderKey's framing below). Recording makes the request's outcome visible when
// it ends without a completion (the process killed, the lease lost, the completion failed): its
// record is then uncertain, listed by `idemgen records uncertain` and the support page, and
// `idemgen reconcile` matches it by this key against the provider's report (docs/runtime.md,
// "Uncertain outcomes and reconciliation"). Recording a label again returns its key without a
// store call. It costs one store round trip per label, bounded by Config.StoreTimeout.
//
// The key is SHA-256, or HMAC-SHA256 under Config.ProviderKeySecret, over a length-prefixed
// framing of "idemgen/provider-key/v1", scope, the stored key (operation-qualified under scope
// operation) and the label, so no two inputs share a framing; the secret is never stored.
//
// Errors (the key is "" then, and the handler must not make the call; returning the error as
// is lets the runtime answer it as the store's failure: 409 for a lost lease, else 503 "not
// processed" when no call was made yet): one that matches ErrLeaseLost when the claim's token is
// no longer the record's, the store's error (wrapped), or an invalid label or currency (which
// the runtime answers 500, a bug in the handler). An unguarded handle (no key) records nothing
// and never fails.
func (l *Lease) ProviderCall(ctx context.Context, c Call) (string, error) {
	if err := c.check(); err != nil {
		return "", err
	}
	key := l.providerKey(c.Label)
	if l.nonce != nil {
		return key, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, have := range l.calls {
		if have.Label == c.Label {
			return key, nil
		}
	}
	call := store.Call{Label: c.Label, ProviderKey: key, Amount: c.Amount, Currency: strings.ToUpper(c.Currency)}
	if call.Currency == "" {
		call.Amount = 0
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.st.BeginCall(ctx, l.claim, l.token, call); err != nil {
		return "", &callError{label: c.Label, err: err}
	}
	l.calls = append(l.calls, call)
	return key, nil
}

// callError is a provider call the store could not record (ProviderCall's error). A handler that
// returns it (wrapped or not) is answered as a store failure, not as its own: 409 when the lease
// was lost (errors.Is(err, ErrLeaseLost)), else 503, "not processed" when no earlier call was
// recorded.
type callError struct {
	label string
	err   error
}

func (e *callError) Error() string {
	return fmt.Sprintf("record the provider call %q: %v", e.label, e.err)
}

func (e *callError) Unwrap() error { return e.err }

// check validates a Call's label and currency.
func (c Call) check() error {
	switch {
	case c.Label == "" || len(c.Label) > 100 || !utf8.ValidString(c.Label):
		return fmt.Errorf("provider call label %q: want 1 to 100 bytes of UTF-8", c.Label)
	case strings.IndexFunc(c.Label, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("provider call label %q: control characters", c.Label)
	case c.Currency != "" && (len(c.Currency) != 3 || strings.IndexFunc(c.Currency, func(r rune) bool { return (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') }) >= 0):
		return fmt.Errorf("provider call %q: currency %q is not an ISO 4217 code (three letters)", c.Label, c.Currency)
	}
	return nil
}

// recorded returns the calls recorded so far.
func (l *Lease) recorded() []store.Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// Token returns the fencing token of this claim: 1 for the first claim of a key, one more for
// each takeover. A downstream system that stores it can refuse writes carrying a smaller one.
// An unguarded handle (no key) has token 0.
func (l *Lease) Token() int64 { return l.token }

// providerKey derives the provider key of label (see ProviderCall), without recording it.
func (l *Lease) providerKey(label string) string {
	return hex.EncodeToString(l.derive("idemgen/provider-key/v1", label))
}

// DeriveID derives a deterministic resource id (an RFC 9562 version 8 UUID in its text form)
// for the resource named label, so a handler that creates "the payment of this key" gives it the
// same id on every attempt and takeover. The framing is ProviderCall's with the domain
// "idemgen/resource-id/v1". It records nothing.
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
		frame([]byte(l.claim.ID.Scope))
		frame([]byte(l.claim.ID.Key))
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
	return l.st.Extend(ctx, l.claim.ID, l.token, d)
}
