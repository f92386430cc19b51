package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
	"github.com/idemgen/idemgen/runtime/store/memstore"
)

// Uncertain outcomes in the lease machine (docs/runtime.md, "Uncertain outcomes and
// reconciliation"): the calls a call phase records, and the record the runtime marks when its
// completion fails after them. memstore is the store; the shared suite (storetest) checks that
// every real store keeps the marks.

// completionStore is memstore whose lease completions fail the way a store that loses its
// connection does: BeginCompletion fails, or Commit's answer is lost while the record stays
// running. It counts the runtime's marks.
type completionStore struct {
	*memstore.Store
	begin, commit error
	// callFails makes BeginCall of that label fail with callErr.
	callFails string
	callErr   error
	mu        sync.Mutex
	marked    []store.Uncertainty
}

func (s *completionStore) BeginCall(ctx context.Context, c store.Claim, token int64, call store.Call) error {
	if call.Label == s.callFails {
		return s.callErr
	}
	return s.Store.BeginCall(ctx, c, token, call)
}

func (s *completionStore) BeginCompletion(ctx context.Context, c store.Claim, token int64) (store.Tx[*memstore.DB], error) {
	if s.begin != nil {
		return nil, s.begin
	}
	tx, err := s.Store.BeginCompletion(ctx, c, token)
	if tx != nil && s.commit != nil {
		tx = &lostCommit{Tx: tx, err: s.commit}
	}
	return tx, err
}

func (s *completionStore) MarkUncertain(ctx context.Context, id store.ID, token int64, reason store.Uncertainty) error {
	s.mu.Lock()
	s.marked = append(s.marked, reason)
	s.mu.Unlock()
	return s.Store.MarkUncertain(ctx, id, token, reason)
}

// lostCommit is a commit whose answer was lost before it reached the store: nothing changed.
type lostCommit struct {
	store.Tx[*memstore.DB]
	err error
}

func (t *lostCommit) Commit(context.Context, store.Response) error { return t.err }

type uncertainObserver struct {
	recordingObserver
	mu      sync.Mutex
	reasons []store.Uncertainty
}

func (o *uncertainObserver) Uncertain(_ string, r store.Uncertainty) {
	o.mu.Lock()
	o.reasons = append(o.reasons, r)
	o.mu.Unlock()
}

// chargeHandler records its provider call (unless X-No-Call), twice under the same label, then
// completes with 201.
func (e *memEnv) chargeHandler(op *Operation) http.Handler {
	return LeaseHandler(e.rt, op, BindLease(decodePay, func(ctx context.Context, l *Lease, r *payReq) (CompleteFunc[*memstore.DB], error) {
		if r.Header.Get("X-No-Call") == "" {
			for range 2 {
				pk, err := l.ProviderCall(ctx, Call{Label: "charge", Amount: r.Amount, Currency: "eur"})
				if err != nil {
					return nil, err
				}
				e.charge(pk)
			}
		}
		return func(ctx context.Context, db *memstore.DB) (Response, error) {
			e.pay(db, r)
			return Response{Status: 201}, nil
		}, nil
	}))
}

func TestUncertainAfterFailedCompletion(t *testing.T) {
	for _, tc := range []struct {
		name          string
		begin, commit error
		noCall        bool
		want          store.Uncertainty
	}{
		{name: "completion could not begin", begin: errRefused, want: store.UncertainCompletionFailed},
		{name: "commit outcome unknown", commit: fmt.Errorf("commit: %w: unexpected EOF", store.ErrOutcomeUnknown), want: store.UncertainOutcomeUnknown},
		{name: "commit failed", commit: errRefused, want: store.UncertainCompletionFailed},
		{name: "lease lost", commit: store.ErrLost, want: store.NotUncertain},
		{name: "no provider call", begin: errRefused, noCall: true, want: store.NotUncertain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cs *completionStore
			obs := &uncertainObserver{}
			e := newMemEnv(t, func(c *Config) {
				cs = &completionStore{Store: c.Store.(*memstore.Store), begin: tc.begin, commit: tc.commit}
				c.Store, c.Observer = cs, obs
			})
			r := req("t1", key1, body100)
			if tc.noCall {
				r.Header.Set("X-No-Call", "1")
			}
			w := serveReq(e.chargeHandler(leaseOp()), r)
			if w.Code < 500 && tc.commit != store.ErrLost {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			got, calls := e.mem.Uncertain(store.ID{Scope: "t1", Key: key1})
			if got != tc.want {
				t.Errorf("record uncertain %q, want %q", got, tc.want)
			}
			if !tc.noCall && (len(calls) != 1 || calls[0].Label != "charge" || calls[0].Amount != 100 || calls[0].Currency != "EUR" || len(calls[0].ProviderKey) != 64) {
				t.Errorf("recorded calls %+v, want one charge of 100 EUR", calls)
			}
			wantObs := 0
			if tc.want != store.NotUncertain {
				wantObs = 1
			}
			if len(obs.reasons) != wantObs || len(cs.marked) != wantObs {
				t.Errorf("observer saw %v, store marked %v; want %d", obs.reasons, cs.marked, wantObs)
			}
			if logs := e.logs.String(); (wantObs == 1) != strings.Contains(logs, "uncertain outcome") ||
				(wantObs == 1 && !strings.Contains(logs, "provider_key.charge="+calls[0].ProviderKey)) {
				t.Errorf("logs: %s", logs)
			}
			if tc.want != store.NotUncertain {
				// The record stays running: after its lease a retry takes over and completes.
				e.clock.advance(time.Second)
				cs.begin, cs.commit = nil, nil
				if w := serveReq(e.chargeHandler(leaseOp()), req("t1", key1, body100)); w.Code != 201 {
					t.Fatalf("retry after the lease: %d %s", w.Code, w.Body)
				}
				if got, _ := e.mem.Uncertain(store.ID{Scope: "t1", Key: key1}); got != store.NotUncertain {
					t.Errorf("after the retry's completion: %q", got)
				}
			}
		})
	}
}

func TestProviderCallErrors(t *testing.T) {
	mem := memstore.New(nil)
	c := store.Claim{ID: store.ID{Scope: "t1", Key: key1}, Operation: "op", Lease: time.Minute, Retention: time.Hour}
	r, err := mem.Reserve(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	l := &Lease{st: mem, claim: c, token: r.Token, timeout: time.Second}
	for _, bad := range []Call{{Label: ""}, {Label: "a\x00b"}, {Label: strings.Repeat("x", 101)}, {Label: "charge", Currency: "EURO"}, {Label: "charge", Currency: "E1R"}} {
		if k, err := l.ProviderCall(t.Context(), bad); err == nil || k != "" {
			t.Errorf("ProviderCall(%+v) = %q, %v; want an error", bad, k, err)
		}
	}
	pk, err := l.ProviderKey(t.Context(), "charge")
	if err != nil || pk != l.providerKey("charge") {
		t.Fatalf("ProviderKey: %q, %v", pk, err)
	}
	stale := &Lease{st: mem, claim: c, token: r.Token + 1, timeout: time.Second}
	if k, err := stale.ProviderKey(t.Context(), "charge"); !errors.Is(err, ErrLeaseLost) || k != "" {
		t.Errorf("ProviderKey under a lost token: %q, %v; want ErrLeaseLost", k, err)
	}
	unguarded := &Lease{nonce: []byte("0123456789abcdef")}
	if k, err := unguarded.ProviderCall(t.Context(), Call{Label: "charge", Amount: 1, Currency: "EUR"}); err != nil || len(k) != 64 {
		t.Errorf("unguarded ProviderCall: %q, %v", k, err)
	}
}

// A provider call the store cannot record is the store's failure: the handler that returns the
// error gets 503 "not processed" when nothing was called yet (the key is released), 503 "outcome
// unknown" when an earlier call was recorded, 409 when the lease was lost; never its own 500.
func TestProviderCallNotRecorded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fails     string
		err       error
		status    int
		detail    string
		outcome   Outcome
		recordGap bool // the record is gone (released)
	}{
		{name: "first call", fails: "charge", err: errRefused, status: 503, detail: "not processed", outcome: OutcomeStoreError, recordGap: true},
		{name: "second call", fails: "receipt", err: errRefused, status: 503, detail: "outcome is unknown", outcome: OutcomeStoreError, recordGap: true},
		{name: "lease lost", fails: "charge", err: store.ErrLost, status: 409, detail: "taken over", outcome: OutcomeLeaseLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cs *completionStore
			e := newMemEnv(t, func(c *Config) {
				cs = &completionStore{Store: c.Store.(*memstore.Store), callFails: tc.fails, callErr: tc.err}
				c.Store = cs
			})
			h := LeaseHandler(e.rt, leaseOp(), BindLease(decodePay, func(ctx context.Context, l *Lease, r *payReq) (CompleteFunc[*memstore.DB], error) {
				for _, label := range []string{"charge", "receipt"} {
					pk, err := l.ProviderKey(ctx, label)
					if err != nil {
						return nil, fmt.Errorf("charge: %w", err) // wrapped, as handlers do
					}
					e.charge(pk)
				}
				return nil, errors.New("not reached")
			}))
			w := serveReq(h, req("t1", key1, body100))
			p := problemOf(t, w)
			if w.Code != tc.status || !strings.Contains(p.doc.Detail, tc.detail) || e.obs.get(tc.outcome) != 1 {
				t.Errorf("%d %q, outcomes %v; want %d %q", w.Code, p.doc.Detail, e.obs, tc.status, tc.detail)
			}
			if _, found := e.record("t1", key1); found == tc.recordGap {
				t.Errorf("record found %v, want %v", found, !tc.recordGap)
			}
		})
	}
}
