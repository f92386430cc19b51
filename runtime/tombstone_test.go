package runtime

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A retry that comes back after the retention meets its key's tombstone: 410 result-expired,
// saying when the operation completed and how, and nothing runs again; another request under
// the key is still a mismatch; once the tombstone's horizon has passed too, the key is new.
// Before tombstones, the late retry ran the operation a second time (a second charge).
func TestLateRetryMeetsTheTombstone(t *testing.T) {
	for _, mode := range []Mode{ModeAtomic, ModeLease} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newMemEnv(t, nil)
			op := payOp()
			h := e.atomicHandler(op)
			if mode == ModeLease {
				op = leaseOp()
				h = e.leaseHandler(op)
			}
			op.Tombstone = 30 * 24 * time.Hour
			if w := serveReq(h, req("t1", key1, body100)); w.Code != http.StatusCreated {
				t.Fatalf("first: %d %s", w.Code, w.Body)
			}
			e.clock.advance(op.Retention + time.Minute)

			late := serveReq(h, req("t1", key1, body100))
			p := problemOf(t, late)
			if late.Code != http.StatusGone || p.name != ProblemResultExpired || !strings.Contains(p.doc.Detail, "2xx") {
				t.Fatalf("late retry: %d %s, want 410 result-expired naming the 2xx it had", late.Code, late.Body)
			}
			if v := late.Header().Get("Retry-After"); v != "" {
				t.Errorf("410 with Retry-After %q: retrying cannot change it", v)
			}
			other := serveReq(h, req("t1", key1, `{"amount":7}`))
			if other.Code != http.StatusUnprocessableEntity || problemType(t, other) != ProblemPayloadMismatch {
				t.Errorf("another request under the remembered key: %d %s, want 422", other.Code, other.Body)
			}
			if n := e.payments("t1"); n != 1 {
				t.Fatalf("payments = %d after the late retries, want 1", n)
			}
			if got := e.obs.get(OutcomeExpired); got != 1 {
				t.Errorf("result_expired outcomes = %d, want 1", got)
			}

			e.clock.advance(op.Tombstone)
			if w := serveReq(h, req("t1", key1, body100)); w.Code != http.StatusCreated || w.Header().Get(HeaderReplayed) != "" {
				t.Fatalf("after the tombstone's horizon: %d %v, want a new execution", w.Code, w.Header())
			}
			if n := e.payments("t1"); n != 2 {
				t.Errorf("payments = %d, want 2 (the key was forgotten)", n)
			}
		})
	}
}

// NoTombstone keeps none: the key is new again when the retention ends, as it was before.
func TestNoTombstone(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Tombstone = NoTombstone
	h := e.atomicHandler(op)
	serveReq(h, req("t1", key1, body100))
	e.clock.advance(op.Retention + time.Minute)
	if w := serveReq(h, req("t1", key1, body100)); w.Code != http.StatusCreated || e.payments("t1") != 2 {
		t.Fatalf("retry after the retention without a tombstone: %d, payments %d; want a new execution", w.Code, e.payments("t1"))
	}
}
