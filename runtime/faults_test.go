package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// What each store failure means for the client (docs/design.md section 1, last row; docs/runtime.md
// "Store unreachable"), with a memstore whose calls the test makes fail.

// faultStore is memstore with injected failures: each hook, when set, runs before the call and
// its error is returned instead of the call's (transactions are aborted underneath so that the
// key stays free).
type faultStore struct {
	*memstore.Store
	beginAtomic func(ctx context.Context) error
	reserve     func(ctx context.Context) error
	completion  func() error
	release     func() error
	commit      func() error
	abort       func() error
}

func (f *faultStore) BeginAtomic(ctx context.Context, c store.Claim) (store.Tx[*memstore.DB], *store.Record, error) {
	if f.beginAtomic != nil {
		if err := f.beginAtomic(ctx); err != nil {
			return nil, nil, err
		}
	}
	tx, rec, err := f.Store.BeginAtomic(ctx, c)
	if tx != nil {
		tx = &faultTx{Tx: tx, f: f}
	}
	return tx, rec, err
}

func (f *faultStore) BeginCompletion(ctx context.Context, c store.Claim, token int64) (store.Tx[*memstore.DB], error) {
	if f.completion != nil {
		if err := f.completion(); err != nil {
			return nil, err
		}
	}
	tx, err := f.Store.BeginCompletion(ctx, c, token)
	if tx != nil {
		tx = &faultTx{Tx: tx, f: f}
	}
	return tx, err
}

func (f *faultStore) Reserve(ctx context.Context, c store.Claim) (store.Reservation, error) {
	if f.reserve != nil {
		if err := f.reserve(ctx); err != nil {
			return store.Reservation{}, err
		}
	}
	return f.Store.Reserve(ctx, c)
}

func (f *faultStore) Release(ctx context.Context, id store.ID, token int64) error {
	if f.release != nil {
		if err := f.release(); err != nil {
			return err
		}
	}
	return f.Store.Release(ctx, id, token)
}

type faultTx struct {
	store.Tx[*memstore.DB]
	f *faultStore
}

func (t *faultTx) Commit(ctx context.Context, resp store.Response) error {
	if t.f.commit != nil {
		if err := t.f.commit(); err != nil {
			_ = t.Tx.Abort(ctx)
			return err
		}
	}
	return t.Tx.Commit(ctx, resp)
}

func (t *faultTx) Abort(ctx context.Context) error {
	err := t.Tx.Abort(ctx)
	if t.f.abort != nil {
		return t.f.abort()
	}
	return err
}

func newFaultEnv(t *testing.T, tweak func(*Config)) (*memEnv, *faultStore) {
	t.Helper()
	var f *faultStore
	e := newMemEnv(t, func(c *Config) {
		f = &faultStore{Store: c.Store.(*memstore.Store)}
		c.Store = f
		if tweak != nil {
			tweak(c)
		}
	})
	return e, f
}

var errRefused = errors.New("dial tcp 127.0.0.1:5432: connection refused")

// The store cannot be reached before the handler: 503 store-unavailable with Retry-After
// (Config.StoreRetryAfter), the handler never runs, the failure is logged at Error.
func TestStoreUnavailable(t *testing.T) {
	for _, mode := range []Mode{ModeAtomic, ModeLease} {
		t.Run(mode.String(), func(t *testing.T) {
			e, f := newFaultEnv(t, func(c *Config) { c.StoreRetryAfter = 1500 * time.Millisecond })
			f.beginAtomic = func(context.Context) error { return errRefused }
			f.reserve = f.beginAtomic
			h := e.atomicHandler(payOp())
			if mode == ModeLease {
				h = e.leaseHandler(leaseOp())
			}
			w := serveReq(h, req("t1", key1, body100))
			p := problemOf(t, w)
			if w.Code != 503 || p.name != ProblemStoreUnavailable || w.Header().Get("Retry-After") != "2" ||
				!strings.Contains(p.doc.Detail, "not processed") {
				t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
			}
			if e.payments("t1") != 0 || e.charges() != 0 || e.obs.get(OutcomeStoreError) != 1 {
				t.Errorf("payments %d, charges %d, outcomes %v", e.payments("t1"), e.charges(), e.obs)
			}
			if logs := e.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "connection refused") {
				t.Errorf("logs: %s", logs)
			}
		})
	}
}

// Config.StoreTimeout bounds the claim: a store that hangs answers 503, not a hung request.
func TestStoreTimeoutBoundsTheClaim(t *testing.T) {
	e, f := newFaultEnv(t, func(c *Config) { c.StoreTimeout = 50 * time.Millisecond })
	f.beginAtomic = func(ctx context.Context) error {
		<-ctx.Done()
		return fmt.Errorf("claim: %w", ctx.Err())
	}
	start := time.Now()
	w := serveReq(e.atomicHandler(payOp()), req("t1", key1, body100))
	if w.Code != 503 || time.Since(start) > 5*time.Second || e.obs.get(OutcomeStoreError) != 1 {
		t.Errorf("%d after %v, outcomes %v", w.Code, time.Since(start), e.obs)
	}
}

// A client that goes away during the store call is outcome canceled, logged at Info, not a
// store_error; nothing runs.
func TestClientGoneIsNotAStoreErrorMachine(t *testing.T) {
	e, f := newFaultEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	f.beginAtomic = func(c context.Context) error {
		cancel()
		<-c.Done()
		return fmt.Errorf("claim: %w", c.Err())
	}
	serveReq(e.atomicHandler(payOp()), req("t1", key1, body100).WithContext(ctx))
	if e.obs.get(OutcomeCanceled) != 1 || e.obs.get(OutcomeStoreError) != 0 || e.payments("t1") != 0 {
		t.Errorf("outcomes %v, payments %d", e.obs, e.payments("t1"))
	}
	if logs := e.logs.String(); !strings.Contains(logs, "level=INFO") || strings.Contains(logs, "level=ERROR") {
		t.Errorf("logs: %s", logs)
	}
}

// What a failed completion means: each error a store's Commit or Abort may return, and the
// answer the client gets for it.
func TestCompletionFaults(t *testing.T) {
	completedAs := func(e *memEnv, body string) *store.CompletedError {
		// A record as a concurrent request would have left it: the same operation, run for
		// real under another key.
		serveReq(e.atomicHandler(payOp()), req("t1", "k-other-00000000001", body))
		rec, found := e.record("t1", "k-other-00000000001")
		if !found {
			e.t.Fatal("no record to race with")
		}
		return &store.CompletedError{Record: rec}
	}
	for _, c := range []struct {
		name     string
		commit   func(e *memEnv) error
		abort    func(e *memEnv) error
		fail     string // X-Fail of the request (abort cases)
		status   int
		problem  string
		replayed bool
		outcome  Outcome
	}{
		{name: "outcome unknown", commit: func(*memEnv) error { return fmt.Errorf("commit: %w: unexpected EOF", store.ErrOutcomeUnknown) },
			status: 503, problem: ProblemStoreUnavailable, outcome: OutcomeStoreError},
		{name: "failed before commit", commit: func(*memEnv) error { return errRefused },
			status: 503, problem: ProblemStoreUnavailable, outcome: OutcomeStoreError},
		{name: "transaction failed", commit: func(*memEnv) error { return store.ErrTxFailed },
			status: 500, problem: ProblemInternal, outcome: OutcomeReleased},
		{name: "claim no longer ours", commit: func(*memEnv) error { return store.ErrLost },
			status: 500, problem: ProblemInternal, outcome: OutcomeReleased},
		{name: "lost to a concurrent claim", commit: func(*memEnv) error { return store.ErrBusy },
			status: 409, problem: ProblemInFlight, outcome: OutcomeConflict},
		{name: "completed meanwhile, same request", commit: func(e *memEnv) error { return completedAs(e, body100) },
			status: 201, replayed: true, outcome: OutcomeReplayed},
		{name: "completed meanwhile, other request", commit: func(e *memEnv) error { return completedAs(e, `{"amount":3}`) },
			status: 422, problem: ProblemPayloadMismatch, outcome: OutcomeMismatch},
		{name: "handler error, completed meanwhile", abort: func(e *memEnv) error { return completedAs(e, body100) }, fail: "error",
			status: 201, replayed: true, outcome: OutcomeReplayed},
		{name: "non-final, abort fails", abort: func(*memEnv) error { return errRefused }, fail: "503",
			status: 503, problem: ProblemStoreUnavailable, outcome: OutcomeStoreError},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, f := newFaultEnv(t, nil)
			var injected error
			if c.commit != nil {
				injected = c.commit(e)
				f.commit = func() error { return injected }
			}
			if c.abort != nil {
				injected = c.abort(e)
				f.abort = func() error { return injected }
			}
			before := e.obs.get(c.outcome)
			var extra []string
			if c.fail != "" {
				extra = []string{"X-Fail", c.fail}
			}
			w := serveReq(e.atomicHandler(payOp()), req("t1", key1, body100, extra...))
			if w.Code != c.status || problemType(t, w) != c.problem || (w.Header().Get(HeaderReplayed) == "true") != c.replayed {
				t.Errorf("%d %q replayed %q: %s; want %d %q replayed %v", w.Code, problemType(t, w), w.Header().Get(HeaderReplayed), w.Body, c.status, c.problem, c.replayed)
			}
			if c.replayed && !strings.Contains(w.Body.String(), `"id":1`) {
				t.Errorf("answered %s, want the other request's response", w.Body)
			}
			if c.status == 503 && c.name == "outcome unknown" && !strings.Contains(w.Body.String(), "unknown") {
				t.Errorf("an unknown commit must say so: %s", w.Body)
			}
			if e.obs.get(c.outcome) != before+1 {
				t.Errorf("outcomes %v, want one more %s", e.obs, c.outcome)
			}
			// Only the racing request's payment, if there is one, commits: never this request's.
			want := 0
			if strings.Contains(c.name, "completed") {
				want = 1
			}
			if n := e.payments("t1"); n != want {
				t.Errorf("payments %d, want %d", n, want)
			}
			if _, found := e.record("t1", key1); found {
				t.Error("the failed completion left a record")
			}
		})
	}
}

// Lease-mode store failures: a completion whose token was replaced is lease_lost (409); a
// release that fails after a handler error still answers 500 and is logged (the lease ends on
// its own).
func TestLeaseCompletionFaults(t *testing.T) {
	e, f := newFaultEnv(t, nil)
	f.completion = func() error { return store.ErrLost }
	w := serveReq(e.leaseHandler(leaseOp()), req("t1", key1, body100))
	if w.Code != 409 || problemType(t, w) != ProblemInFlight || e.obs.get(OutcomeLeaseLost) != 1 {
		t.Errorf("lost at completion: %d %s, outcomes %v", w.Code, w.Body, e.obs)
	}
	f.completion = func() error { return errRefused }
	w = serveReq(e.leaseHandler(leaseOp()), req("t1", key1+"-2", body100))
	if w.Code != 503 || problemType(t, w) != ProblemStoreUnavailable {
		t.Errorf("store down at completion: %d %s", w.Code, w.Body)
	}
	f.completion = nil
	f.release = func() error { return errRefused }
	w = serveReq(e.leaseHandler(leaseOp()), req("t1", key1+"-3", body100, "X-Fail", "error"))
	if w.Code != 500 || !strings.Contains(e.logs.String(), "release lease failed") {
		t.Errorf("release failed: %d, logs %s", w.Code, e.logs)
	}
	if rec, found := e.record("t1", key1+"-3"); !found || rec.State != store.Running {
		t.Errorf("the unreleased claim must stay running until its lease ends: %+v %v", rec, found)
	}
	if e.payments("t1") != 0 {
		t.Errorf("payments %d", e.payments("t1"))
	}
}

// A takeover that loses to another mover looks again (bounded): here every TakeOver loses, and
// after four attempts the request gets 409 in-flight (someone else is moving), never a hang.
func TestLeaseTakeoverRace(t *testing.T) {
	e, _ := newFaultEnv(t, nil)
	st := &losingTakeover{Store: e.mem}
	rt, err := New(Config{Store: st, Scope: bearerScope, Logger: discardLogger, Observer: e.obs})
	if err != nil {
		t.Fatal(err)
	}
	e.rt = rt
	h := e.leaseHandler(leaseOp())
	done := make(chan int)
	go func() { done <- serveReq(h, req("t1", key1, body100, "X-Hold", "call")).Code }()
	g := e.gate("call")
	g.wait(t)
	e.clock.advance(time.Second)
	w := serveReq(h, req("t1", key1, body100))
	if w.Code != 409 || problemType(t, w) != ProblemInFlight || st.takeovers.Load() != 4 {
		t.Errorf("%d %s after %d takeover attempts, want 409 in-flight after 4", w.Code, w.Body, st.takeovers.Load())
	}
	g.open()
	<-done
}

type losingTakeover struct {
	*memstore.Store
	takeovers atomic.Int64
}

func (l *losingTakeover) TakeOver(context.Context, store.Claim, int64) (int64, error) {
	l.takeovers.Add(1)
	return 0, store.ErrLost
}
