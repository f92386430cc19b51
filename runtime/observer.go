package runtime

import (
	"time"

	"github.com/idemgen/idemgen/runtime/store"
)

// Outcome is how the runtime ended one request to a marked operation. Its string is the metrics
// label value.
type Outcome string

const (
	OutcomeExecuted     Outcome = "executed"        // the handler ran and its final response was stored
	OutcomeReplayed     Outcome = "replayed"        // a stored response was replayed
	OutcomeConflict     Outcome = "conflict"        // 409 in-flight
	OutcomeMismatch     Outcome = "mismatch"        // 422 payload-mismatch
	OutcomeKeyMissing   Outcome = "key_missing"     // 400 key-missing
	OutcomeKeyInvalid   Outcome = "key_invalid"     // 400 key-invalid
	OutcomeBodyInvalid  Outcome = "body_invalid"    // 400 body-invalid (and 413, 415)
	OutcomeStoreError   Outcome = "store_error"     // 503 store-unavailable, or a store failure after the handler
	OutcomeTakeover     Outcome = "takeover"        // lease mode: an expired lease was taken over (the handler then runs)
	OutcomeLeaseLost    Outcome = "lease_lost"      // lease mode: completion found its token replaced
	OutcomeReleased     Outcome = "released"        // the handler failed or answered a non-final status; the key is free again
	OutcomeUnguarded    Outcome = "unguarded"       // an optional key was absent; the handler ran without a record
	OutcomeUnauthorized Outcome = "unauthenticated" // the ScopeFunc refused the request
	OutcomeCanceled     Outcome = "canceled"        // the client went away before the store answered; nothing ran
	OutcomeInternal     Outcome = "internal"        // a bug before the handler (a decoder's unexpected error, a misconfigured store): 500
	OutcomeLimited      Outcome = "limited"         // 429 rate-limited: the store's per-scope limit refused a new key; nothing ran
	OutcomeExpired      Outcome = "result_expired"  // 410 result-expired: a retry met its key's tombstone after the retention; nothing ran
	OutcomeDraining     Outcome = "draining"        // 503: the process is shutting down (Runtime.Shutdown) and took no new key; nothing ran
)

// Observer receives the runtime's events. Implementations must be safe for concurrent use and
// fast: they run on the request path. runtime/prometheus adapts it to client_golang.
type Observer interface {
	// Outcome reports how one request ended; op is the operation's ID ("" before it is known).
	Outcome(op string, mode Mode, o Outcome)
	// ClaimLatency reports how long the claim (first store round trip or trips) took.
	ClaimLatency(op string, mode Mode, d time.Duration)
	// Swept reports rows deleted by one sweeper batch.
	Swept(rows int64)
}

// NopObserver ignores every event.
type NopObserver struct{}

func (NopObserver) Outcome(string, Mode, Outcome)            {}
func (NopObserver) ClaimLatency(string, Mode, time.Duration) {}
func (NopObserver) Swept(int64)                              {}

// ExecutionObserver is an optional extension of Observer (runtime/prometheus implements it):
// Execution reports how long a request that held its key's claim kept it, from the claim to
// the stored response or the release, and how the request ended (executed, released,
// lease_lost, store_error, internal). This is the first owner's execution time: while it runs,
// duplicates of the request get 409. Requests that never held the claim (replays, 409s, 422s,
// requests without a key) are not reported.
type ExecutionObserver interface {
	Execution(op string, mode Mode, o Outcome, d time.Duration)
}

// UncertainObserver is an optional extension of Observer (runtime/prometheus implements it):
// Uncertain reports a lease-mode request whose completion failed after its call phase had
// recorded provider calls, leaving an uncertain record (store.Uncertainty says why). Records
// that become uncertain without the runtime knowing (a process killed in its call phase) are
// counted by the sweeper's sample instead (store.SweepReport.Uncertain).
type UncertainObserver interface {
	Uncertain(op string, reason store.Uncertainty)
}

// executed reports, to an ExecutionObserver, a request that held its claim since start.
func (x *exchange) executed(o Outcome, start time.Time) {
	if x.rt.exec == nil {
		return
	}
	switch o {
	case OutcomeConflict, OutcomeReplayed, OutcomeMismatch, OutcomeCanceled, OutcomeDraining:
		return // the claim was lost to a concurrent request (or never made): not an owner
	}
	x.rt.exec.Execution(x.op.ID, x.op.Mode, o, time.Since(start))
}
