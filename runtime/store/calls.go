package store

import (
	"context"
	"time"
)

// Call is one downstream call that the call phase of a lease-mode claim starts, recorded before
// the handler makes it (runtime.Lease.ProviderKey). A request interrupted after that point (the
// process killed, the lease taken over, the completion failed) leaves an uncertain record whose
// calls can be found by ProviderKey in the provider's own report, and reconciled with it
// (runtime/reconcile).
type Call struct {
	// Label names the call within its request ("charge"): the label given to ProviderKey.
	Label string
	// ProviderKey is the idempotency key the call sends to the provider: 64 lowercase hex digits
	// (runtime.Lease.ProviderKey).
	ProviderKey string
	// Amount, in the currency's minor units (cents), and Currency, an ISO 4217 code in upper
	// case, are what the call charges, when the handler said so (runtime.Call). Currency is
	// empty when it did not; reconciliation then compares no amount.
	Amount   int64
	Currency string
}

// Uncertainty says why the outcome of a running lease-mode record is uncertain: its call phase
// started a downstream call (Store.BeginCall) that may have reached the provider, and no
// completion is known. The record stays running, answering its retries as before (409 until its
// lease ends, then a takeover by the same request); a completion, a release or an operator's
// resolution (runtime/reconcile) ends the uncertainty.
type Uncertainty uint8

const (
	// NotUncertain: the record's outcome is known, or its call phase started no call.
	NotUncertain Uncertainty = iota
	// UncertainLeaseEnded: the lease ended during the call phase and nobody marked the record:
	// its process died (SIGKILL, a crash, a lost host) or the call outlived the lease without
	// Lease.Extend. Stores derive it when they read; none writes it.
	UncertainLeaseEnded
	// UncertainCompletionFailed: the completion failed after the call phase, on a store error
	// before its commit was sent.
	UncertainCompletionFailed
	// UncertainOutcomeUnknown: the completion's commit was sent and its answer was lost
	// (ErrOutcomeUnknown).
	UncertainOutcomeUnknown
	// UncertainTakenOver: the lease ended after the call phase had started a call, and a retry
	// of the same request took the record over; its call phase runs again under the same
	// provider keys, and its completion ends the uncertainty.
	UncertainTakenOver
)

// String returns the name support tools and metrics show: "lease_ended", "completion_failed",
// "outcome_unknown", "taken_over", or "" for NotUncertain.
func (u Uncertainty) String() string {
	switch u {
	case UncertainLeaseEnded:
		return "lease_ended"
	case UncertainCompletionFailed:
		return "completion_failed"
	case UncertainOutcomeUnknown:
		return "outcome_unknown"
	case UncertainTakenOver:
		return "taken_over"
	case NotUncertain:
		return ""
	}
	return "unknown"
}

// CallLog is an optional capability of a database store: it keeps the provider call log for a
// lease store that holds its claims elsewhere (runtime/redisstore's Paired keeps them in Redis
// and its completions in the database), so that reconciliation finds those calls in the same
// place as the store's own. runtime/pgstore implements it.
type CallLog interface {
	// LogCall records call as started by the claim c held under token, whose record this store
	// does not hold. Recording the same call again does nothing but update its token. Errors
	// are the store's, wrapped.
	LogCall(ctx context.Context, c Claim, token int64, call Call) error
	// ReleaseCalls records that the claim of id was released with its calls still started (its
	// handler failed after the call phase, or answered a status that is not final). Errors are
	// the store's, wrapped.
	ReleaseCalls(ctx context.Context, id ID) error
}

// CallOutcome is what the call log knows of a call's request.
type CallOutcome uint8

const (
	// CallStarted: no completion is known. The record may still be running (its call phase or
	// completion in progress), uncertain, or gone (abandoned and swept).
	CallStarted CallOutcome = iota
	// CallCompleted: the record completed with the response status CallRecord.Status.
	CallCompleted
	// CallReleased: the record was released after the call phase (the handler failed or
	// answered a status that is not final): the key is new again.
	CallReleased
	// CallResolvedCompleted: an operator's resolution completed the record with the provider's
	// outcome (Reconcilable.Resolve).
	CallResolvedCompleted
	// CallResolvedReleased: an operator's resolution released the record.
	CallResolvedReleased
)

// String returns "started", "completed", "released", "resolved_completed" or
// "resolved_released".
func (o CallOutcome) String() string {
	switch o {
	case CallStarted:
		return "started"
	case CallCompleted:
		return "completed"
	case CallReleased:
		return "released"
	case CallResolvedCompleted:
		return "resolved_completed"
	case CallResolvedReleased:
		return "resolved_released"
	}
	return "unknown"
}

// CallRecord is one entry of the provider call log, with the state of its record when it was
// read.
type CallRecord struct {
	Call
	// Operation is the operation ID of the request; Ref the store's name of its record
	// (Snapshot.Ref); Token the fencing token of the claim that last started the call.
	Operation string
	Ref       string
	Token     int64
	// StartedAt is when the call was first recorded, by the store's clock.
	StartedAt time.Time
	// Outcome is what the log knows; Status the stored response status of a completion
	// (CallCompleted, CallResolvedCompleted), else 0; SettledAt when the outcome was written.
	Outcome   CallOutcome
	Status    int
	SettledAt time.Time
	// Record is the state of the call's record when the log was read: zero when it has none
	// (released, expired or swept; or held by another store, such as a paired Redis lease
	// store). Read only for calls whose Outcome is CallStarted.
	Record CallRecordState
}

// CallRecordState is what reconciliation needs of a call's record.
type CallRecordState struct {
	// State is Running or Completed; 0 when there is no live record.
	State State
	// Token is the record's fencing token; Status its stored response status (completed).
	Token  int64
	Status int
	// LeaseEnded reports a running record whose lease has ended by the store's clock;
	// Uncertain is why a running record is uncertain (NotUncertain while its lease runs
	// unmarked).
	LeaseEnded bool
	Uncertain  Uncertainty
}

// Resolution is an operator's settlement of an uncertain record from the provider's report
// (runtime/reconcile), with what the audit trail keeps.
type Resolution struct {
	// ProviderKey names the call the report line matched; Token is the fencing token of the
	// record as reconciliation read it.
	ProviderKey string
	Token       int64
	// Complete, when set, completes the record with Response (the provider's outcome), which
	// replays to every later retry for the operation's retention; otherwise the record is
	// released, so a later retry runs again (under the same provider keys).
	Complete bool
	Response Response
	// Class is the reconciliation class of the finding; Operator who confirmed it; Reason
	// their words; Report the provider's report line, as a JSON object.
	Class, Operator, Reason string
	Report                  []byte
}

// Resolved is what Reconcilable.Resolve did.
type Resolved struct {
	// Record reports that a running record was completed or released; false when the call's
	// record was no longer in the store (released, swept, or held by a paired lease store):
	// only the call log and the audit trail were written, and a later retry runs the handler
	// again under the same provider keys, which the provider deduplicates.
	Record bool
	// At is when the resolution was written, by the store's clock.
	At time.Time
}

// Reconcilable is an optional capability of a store that keeps the provider call log
// (runtime/pgstore): reconciliation (runtime/reconcile) reads calls by provider key and by
// time, and writes the resolutions an operator confirmed. Reads take no lock.
type Reconcilable interface {
	// FindCalls returns the logged calls of providerKeys (keys that are not 64 hex digits, or
	// that the log does not hold, are left out), in no particular order. Errors are the
	// store's, wrapped.
	FindCalls(ctx context.Context, providerKeys []string) ([]CallRecord, error)
	// ScanCalls calls fn for every logged call started in [from, to), in no particular order,
	// streaming (the log may hold millions). It stops at fn's first error and returns it.
	// Record is read only for calls whose Outcome is CallStarted.
	ScanCalls(ctx context.Context, from, to time.Time, fn func(*CallRecord) error) error
	// Resolve writes r in one transaction: the record running under r.Token whose lease has
	// ended is completed with r.Response or released, its calls get the resolved outcome, and
	// the resolution is appended to the audit trail. A call whose record is gone (Resolved.Record
	// false) has only its log and the audit trail written. ErrLost when the record is running
	// under another token or its lease still runs, or the call is no longer CallStarted or
	// CallReleased (a retry or another resolution came first).
	Resolve(ctx context.Context, r Resolution) (Resolved, error)
}
