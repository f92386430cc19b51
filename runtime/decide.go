package runtime

import (
	"errors"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/store"
)

// This file holds the decisions of the state machine as pure functions: what to do with a
// request given what the store knows of its key, and what a store error means for the client.
// The machines (atomic.go, lease.go) act on them through machine.go, which turns them into
// endings; decide_test.go checks every row without a database.

// verdict is what the machine does next with a request.
type verdict uint8

const (
	// verdictRun: the key has no live record: claim it and run the handler.
	verdictRun verdict = iota
	// verdictReplay: the key completed with the same request: send the stored response.
	verdictReplay
	// verdictInFlight: the same request is still running under the key: 409 (or wait).
	verdictInFlight
	// verdictMismatch: the key names another request, or another operation: 422.
	verdictMismatch
	// verdictTakeover: lease mode; the same request's lease has ended: take the claim over.
	verdictTakeover
	// verdictExpired: the same request completed under the key and its answer is gone (the
	// retention ended; a tombstone remembers the key): 410, nothing runs again.
	verdictExpired
)

// decide is the verdict for a request to operation op with fingerprint fp, in mode, given the
// key's live record (nil: none).
//
// A record names one request: another operation reusing the key is a mismatch (Stripe's rule;
// scope "operation" keys are per operation, so they never meet one), and so is another
// fingerprint, even while the first request still runs. A record written under another
// fingerprint version cannot be compared, and is never answered 422 for it (after an upgrade
// that would be a wave of false mismatches, which clients do not retry): a completed one
// replays (the key names the operation, and a replay runs nothing); a running one is in flight
// (409, retry later: its retry replays once it completes) and is never taken over, by a
// request the first may not match. Only lease mode takes over: an atomic-mode request that
// meets a running lease-mode record of the same request waits for it like any duplicate.
//
// A tombstone (an Expired record) keeps only the fingerprint's first bytes and no operation: the
// fingerprint frames the operation, so another operation's request differs from it too. The
// same request gets verdictExpired, never a run; another one a mismatch, as before the
// retention ended; one under another fingerprint version cannot be compared and is refused as
// expired (never run: it may be the same request).
func decide(mode Mode, op string, fp canonical.Fingerprint, rec *store.Record) verdict {
	switch {
	case rec == nil:
		return verdictRun
	case rec.State == store.Expired:
		if rec.Fingerprint.Version == fp.Version && !store.SameTombstoneSum(rec.Fingerprint.Sum, fp.Sum) {
			return verdictMismatch
		}
		return verdictExpired
	case rec.Operation != op:
		return verdictMismatch
	case rec.Fingerprint.Version != fp.Version && rec.State == store.Completed:
		return verdictReplay
	case rec.Fingerprint.Version != fp.Version:
		return verdictInFlight
	case rec.Fingerprint.Sum != fp.Sum:
		return verdictMismatch
	case rec.State == store.Completed:
		return verdictReplay
	case mode == ModeLease && rec.LeaseLeft <= 0:
		return verdictTakeover
	default:
		return verdictInFlight
	}
}

// fault is what a store error means for the client.
type fault uint8

const (
	// faultBusy: a concurrent request holds the key: 409 in-flight.
	faultBusy fault = iota + 1
	// faultCompleted: a concurrent request completed the key first: answer from its record.
	faultCompleted
	// faultLeaseLost: lease mode; the claim was taken over: 409, the retry replays the new
	// owner's result.
	faultLeaseLost
	// faultHandler: the handler's transaction cannot commit because of what the handler did:
	// 500, the key is free again.
	faultHandler
	// faultUnknown: the commit was sent and its outcome is unknown: 503, and the retry with the
	// same key finds out (a replay if it committed, a new run if not).
	faultUnknown
	// faultUnavailable: the store failed before anything was committed: 503.
	faultUnavailable
	// faultLimited: the store refused a new record under a per-scope limit: 429, nothing ran.
	faultLimited
)

// classify maps an error returned by a store to the fault it means. An atomic-mode record that
// is no longer ours at commit is a failure of this request (500): nothing was committed and
// the key is free.
func classify(mode Mode, err error) fault {
	var done *store.CompletedError
	switch {
	case errors.Is(err, store.ErrBusy):
		return faultBusy
	case errors.As(err, &done):
		return faultCompleted
	case errors.Is(err, store.ErrLost) && mode == ModeLease:
		return faultLeaseLost
	case errors.Is(err, store.ErrLost), errors.Is(err, store.ErrTxFailed):
		return faultHandler
	case errors.Is(err, store.ErrOutcomeUnknown):
		return faultUnknown
	case errors.Is(err, store.ErrLimited):
		return faultLimited
	default:
		return faultUnavailable
	}
}
