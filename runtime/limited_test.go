package runtime

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// A store's per-scope limit (store.LimitError, pgstore.Options.Limits) refuses a new key: 429
// rate-limited with the limit's Retry-After, in both modes; nothing runs, nothing is stored.
func TestScopeLimitIs429(t *testing.T) {
	for _, mode := range []Mode{ModeAtomic, ModeLease} {
		t.Run(mode.String(), func(t *testing.T) {
			e, f := newFaultEnv(t, nil)
			f.beginAtomic = func(context.Context) error {
				return fmt.Errorf("claim: %w", &store.LimitError{RetryAfter: 2300 * time.Millisecond})
			}
			f.reserve = f.beginAtomic
			h := e.atomicHandler(payOp())
			if mode == ModeLease {
				h = e.leaseHandler(leaseOp())
			}
			w := serveReq(h, req("t1", key1, body100))
			p := problemOf(t, w)
			if w.Code != 429 || p.name != ProblemRateLimited || w.Header().Get("Retry-After") != "3" {
				t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
			}
			if e.payments("t1") != 0 || e.charges() != 0 || e.obs.get(OutcomeLimited) != 1 {
				t.Errorf("payments %d, charges %d, outcomes %v", e.payments("t1"), e.charges(), e.obs)
			}
		})
	}
}
