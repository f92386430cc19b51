package runtime

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/store"
)

// Every row of the contract's decision table, without a store: what a request gets given the
// record its key already has.
func TestDecide(t *testing.T) {
	fp := func(s string) canonical.Fingerprint {
		return canonical.Fingerprint{Version: canonical.Version, Sum: sha256.Sum256([]byte(s))}
	}
	old := func(s string) canonical.Fingerprint { f := fp(s); f.Version--; return f }
	completed := func(op string, f canonical.Fingerprint) *store.Record {
		return &store.Record{Operation: op, Fingerprint: f, State: store.Completed}
	}
	running := func(op string, f canonical.Fingerprint, left time.Duration) *store.Record {
		return &store.Record{Operation: op, Fingerprint: f, State: store.Running, LeaseLeft: left}
	}
	cases := []struct {
		name string
		mode Mode
		rec  *store.Record
		want verdict
	}{
		{"no record: new", ModeAtomic, nil, verdictRun},
		{"no record: new (lease)", ModeLease, nil, verdictRun},
		{"completed, same request: replay", ModeAtomic, completed("pay", fp("a")), verdictReplay},
		{"completed, same request: replay (lease)", ModeLease, completed("pay", fp("a")), verdictReplay},
		{"completed, other body: 422", ModeAtomic, completed("pay", fp("b")), verdictMismatch},
		{"completed, other operation: 422", ModeAtomic, completed("refund", fp("a")), verdictMismatch},
		{"completed under an older framing: replay", ModeAtomic, completed("pay", old("zzz")), verdictReplay},
		{"completed under an older framing, other operation: 422", ModeAtomic, completed("refund", old("a")), verdictMismatch},
		{"running, same request, lease running: 409", ModeLease, running("pay", fp("a"), time.Second), verdictInFlight},
		{"running, other body, lease running: 422", ModeLease, running("pay", fp("b"), time.Second), verdictMismatch},
		{"running, other operation: 422", ModeLease, running("refund", fp("a"), time.Second), verdictMismatch},
		{"running, same request, lease ended: takeover", ModeLease, running("pay", fp("a"), 0), verdictTakeover},
		{"running, same request, lease long ended: takeover", ModeLease, running("pay", fp("a"), -time.Hour), verdictTakeover},
		{"running, other body, lease ended: 422", ModeLease, running("pay", fp("b"), -time.Second), verdictMismatch},
		{"running under an older framing, lease ended: 409, never a takeover", ModeLease, running("pay", old("a"), -time.Second), verdictInFlight},
		{"running under an older framing, lease running: 409", ModeLease, running("pay", old("zzz"), time.Second), verdictInFlight},
		{"running under an older framing (atomic): 409, not a false 422", ModeAtomic, running("pay", old("zzz"), time.Second), verdictInFlight},
		{"running under an older framing, other operation: 422", ModeAtomic, running("refund", old("a"), time.Second), verdictMismatch},
		{"atomic request meets a running lease record whose lease ended: 409", ModeAtomic, running("pay", fp("a"), -time.Second), verdictInFlight},
	}
	for _, c := range cases {
		if got := decide(c.mode, "pay", fp("a"), c.rec); got != c.want {
			t.Errorf("%s: verdict %d, want %d", c.name, got, c.want)
		}
	}
}

// What a store error means for the client, in each mode.
func TestClassify(t *testing.T) {
	cases := []struct {
		err    error
		atomic fault
		lease  fault
	}{
		{store.ErrBusy, faultBusy, faultBusy},
		{fmt.Errorf("claim: %w", store.ErrBusy), faultBusy, faultBusy},
		{&store.CompletedError{}, faultCompleted, faultCompleted},
		{store.ErrLost, faultHandler, faultLeaseLost},
		{fmt.Errorf("%w: x", store.ErrTxFailed), faultHandler, faultHandler},
		{fmt.Errorf("commit: %w: eof", store.ErrOutcomeUnknown), faultUnknown, faultUnknown},
		{errors.New("connection refused"), faultUnavailable, faultUnavailable},
		{fmt.Errorf("claim: %w", &store.LimitError{RetryAfter: time.Second}), faultLimited, faultLimited},
	}
	for _, c := range cases {
		if got := classify(ModeAtomic, c.err); got != c.atomic {
			t.Errorf("atomic %v: %d, want %d", c.err, got, c.atomic)
		}
		if got := classify(ModeLease, c.err); got != c.lease {
			t.Errorf("lease %v: %d, want %d", c.err, got, c.lease)
		}
	}
}
