// Package store defines what an idempotency store does for the runtime's state machine: find a
// key's record, claim a key under a fencing token, extend, complete and release the claim. The
// runtime decides (replay, 409, 422, takeover); a store only keeps records and answers by its
// own clock. Every store passes the shared suite in runtime/store/storetest.
//
// Two capabilities exist:
//   - Store, the protocol of lease mode: claims commit at once, completion is a compare-and-swap
//     on the fencing token. Any store with an atomic compare-and-swap can offer it (PostgreSQL,
//     Redis).
//   - Transactional, for stores that can run the handler's own writes in the transaction that
//     holds the claim and stores the response (atomic mode, and the completion phase of lease
//     mode). Only a database store can offer it: runtime/pgstore does.
//
// Implementations: runtime/pgstore (PostgreSQL, both capabilities) and runtime/store/memstore
// (in memory, for unit tests of the machine; never the proof that a real store works).
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// ID names one record: the scope (the tenant from the runtime's ScopeFunc) and the key as
// stored. For operations with scope "operation" the runtime stores the operation ID, one space
// and the key; keys never contain a space, so the two forms cannot meet.
type ID struct {
	Scope string
	Key   string
}

// State is where a record stands.
type State uint8

const (
	// Running: a lease-mode claim whose handler has not completed. Atomic-mode claims are never
	// visible while running: they commit completed or not at all.
	Running State = iota + 1
	// Completed: the final response is stored and replays until the record expires.
	Completed
	// Expired: a tombstone. The record completed and its retention has ended, so its response
	// is gone, but the key is remembered until Claim.Tombstone after its completion: a retry
	// must not run the operation a second time (the runtime answers 410 result-expired), and
	// another request under the key is still a mismatch. Only Fingerprint (its version and
	// first TombstoneSumBytes bytes), StatusClass, CompletedAt and ForgetLeft are set.
	Expired
)

// TombstoneSumBytes is how many leading bytes of a fingerprint's Sum a tombstone keeps (an
// Expired record's Fingerprint.Sum holds them, the rest zero): 128 bits tell a retry from
// another request under the same key with a false match of 2^-128, and a false match only
// turns a 422 into a 410, both refusals. Stores keep no more, so that a tombstone stays under
// 100 bytes.
const TombstoneSumBytes = 16

// SameTombstoneSum reports whether a tombstone's fingerprint sum (its first TombstoneSumBytes
// bytes) is that of sum.
func SameTombstoneSum(tomb, sum [32]byte) bool {
	return [TombstoneSumBytes]byte(tomb[:TombstoneSumBytes]) == [TombstoneSumBytes]byte(sum[:TombstoneSumBytes])
}

// Response is a final response as a store keeps it.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Header holds the stored response headers as a JSON object of string arrays with canonical
	// MIME names, sorted ({"Content-Type":["application/json"]}); nil when there are none.
	Header []byte
	// Body is the exact body bytes; nil when BodyOmitted.
	Body []byte
	// BodyOmitted: the body was larger than the operation's stored-response limit, so it was
	// delivered but not kept; a replay sends the status and headers with an empty body.
	BodyOmitted bool
}

// Record is the live record of a key: a completed record until its retention ends (then the key
// is new again), a running one until it is completed or released (its owner may complete it,
// or the same request take it over, however long the call takes).
type Record struct {
	// Operation is the operation ID of the request that claimed the key.
	Operation string
	// Fingerprint is that request's fingerprint, with the framing version it was computed under.
	Fingerprint canonical.Fingerprint
	State       State
	// Token is the fencing token: positive, and larger for every later claim of the key (a
	// takeover, or a new claim after the record expired). pgstore counts 1 for the first
	// lease-mode claim of a key and one more for each takeover; runtime/redisstore uses the
	// Redis server's clock in microseconds. Atomic-mode records hold an opaque claim id.
	Token int64
	// LeaseLeft is, for a running record, how long its lease still runs by the store's clock;
	// zero or negative once it has ended.
	LeaseLeft time.Duration
	// RetentionLeft is, for a completed record, how long it still replays by the store's clock,
	// counted from a moment inside the store call that returned it; zero for a running record
	// (it lives until it is completed or released) and when the store does not say. A cache in
	// front of the store (runtime/redisstore) uses it so that its copy never outlives the record.
	RetentionLeft time.Duration
	// Response is the stored final response of a completed record.
	Response Response
	// StatusClass is, for an Expired record, the class of its final response's status (2 for
	// a 2xx, 4 for a 4xx); CompletedAt when it completed, and ForgetLeft how long the tombstone
	// still remembers the key, both by the store's clock. Zero for other states.
	StatusClass int
	CompletedAt time.Time
	ForgetLeft  time.Duration
}

// Claim is what a new claim of a key writes.
type Claim struct {
	ID ID
	// Tenant is who the claim counts against for a store's per-tenant bounds (pgstore's
	// per-scope limits and handler shares): the tenant the runtime's ScopeFunc returned,
	// before an operation's scope headers (Stripe-Account) joined it to make ID.Scope, so that
	// rotating such a header never gives a tenant more room. Empty: ID.Scope.
	Tenant      string
	Operation   string
	Fingerprint canonical.Fingerprint
	// Retention is how long the completed record replays, counted from completion by the
	// store's clock. Must be positive.
	Retention time.Duration
	// Tombstone is how long after completion the key is remembered once the retention has
	// ended, by a compact tombstone (an Expired record: the key's digests, the fingerprint's
	// first TombstoneSumBytes bytes and version, the status class and the completion time);
	// zero (or not longer than Retention) keeps none, so the key is new again when the
	// retention ends.
	Tombstone time.Duration
	// Lease is how long a lease-mode claim holds the key before another request with the same
	// fingerprint may take it over. Zero for atomic-mode claims.
	Lease time.Duration
	// Counted says that the claim was already counted against the tenant's per-scope limits
	// when it was granted elsewhere (a paired lease store's completion, counted at its Redis
	// claim through Admitter): the store must neither count nor refuse it again.
	Counted bool
	// Wait is, for an atomic-mode claim, how long it may wait for a concurrent claim of the key
	// to end (concurrency.wait) before ErrBusy. Zero answers ErrBusy at once.
	Wait time.Duration
	// Calls is set on the claim of a lease-mode completion (Transactional.BeginCompletion)
	// whose call phase recorded calls (Store.BeginCall): a store that keeps the call log
	// records their outcome with the completion's commit, or with its release.
	Calls bool
}

// Reservation is the answer of Store.Reserve: either this request now holds the key (Token is
// positive) or the key has a live record (Record).
type Reservation struct {
	Token  int64
	Record Record
}

// Claimed reports whether the reservation holds the key.
func (r Reservation) Claimed() bool { return r.Token > 0 }

// Store keeps idempotency records and runs the lease-mode protocol. Every method takes the
// context of one bounded store call; implementations return its error (wrapped) when it ends.
// Methods are safe for concurrent use.
type Store interface {
	// Get returns the key's live record (a tombstone, State Expired, counts as one); found is
	// false when there is none, or it has expired and no tombstone remembers it.
	Get(ctx context.Context, id ID) (rec Record, found bool, err error)
	// Reserve claims c.ID with c.Lease and a fencing token, reusing an expired record's place
	// (the token keeps growing per key), unless the key has a live record, which it returns.
	Reserve(ctx context.Context, c Claim) (Reservation, error)
	// TakeOver moves a running record whose lease has ended from token old to a new owner with
	// the next token and a lease of c.Lease, and returns that token. ErrLost when the record is
	// no longer running under old with an ended lease (someone moved first).
	TakeOver(ctx context.Context, c Claim, old int64) (int64, error)
	// Extend moves the end of the running record's lease to d after the store's now. ErrLost
	// when token is no longer the record's.
	Extend(ctx context.Context, id ID, token int64, d time.Duration) error
	// Complete stores resp under token and makes the record of c.ID completed, replaying for
	// c.Retention from now, then remembered by a tombstone until c.Tombstone from now. ErrLost
	// when token is no longer the record's.
	Complete(ctx context.Context, c Claim, token int64, resp Response) error
	// Release deletes the running record held under token, so the key is new again; a record no
	// longer held under token is left alone.
	Release(ctx context.Context, id ID, token int64) error
	// BeginCall records that the call phase of the record running under c.ID's token starts
	// call, before the handler makes it, so that the record's outcome counts as uncertain from
	// then until it completes or is released (see Uncertainty): a takeover marks it
	// UncertainTakenOver, an ended lease makes it UncertainLeaseEnded. Recording a call of the
	// same label again does nothing. ErrLost when token no longer holds the record.
	BeginCall(ctx context.Context, c Claim, token int64, call Call) error
	// MarkUncertain marks the record running under token uncertain for reason
	// (UncertainCompletionFailed or UncertainOutcomeUnknown): its call phase started calls and
	// its completion failed. A record no longer running under token, or whose call phase
	// started no call, is left alone (nil). Completion clears the mark.
	MarkUncertain(ctx context.Context, id ID, token int64, reason Uncertainty) error
}

// Transactional is a Store that runs the handler's own writes, through a database handle of
// type DB, in the transaction that holds the claim and stores the response.
type Transactional[DB any] interface {
	Store
	// BeginAtomic looks the key up and, when it has no live record, claims it for an
	// atomic-mode request: exactly one of tx and rec is non-nil. The claim may be made lazily
	// (with the handler's first statement, pgstore.ClaimWithStatement); it is never visible to
	// others as a record before Tx.Commit. ErrBusy when a concurrent claim holds the key past
	// c.Wait.
	BeginAtomic(ctx context.Context, c Claim) (tx Tx[DB], rec *Record, err error)
	// BeginCompletion opens the transaction that completes a lease-mode claim held under token:
	// it locks the running record, so a takeover waits for it. ErrLost when token is no longer
	// the record's.
	BeginCompletion(ctx context.Context, c Claim, token int64) (Tx[DB], error)
	// BeginPlain opens a transaction with no record, for a request whose optional key is
	// absent: its writes commit with Commit, whose response argument is ignored.
	BeginPlain(ctx context.Context) (Tx[DB], error)
}

// Admitter is an optional capability of a Store with per-tenant limits (pgstore): Admit reads
// the key's live record and, when it has none, counts a new claim of it against the tenant's
// caps (store.LimitError when they are reached), without claiming it. A store that claims
// elsewhere (a Redis lease store paired with the database) calls it when it grants a claim, and
// marks the claim Counted when it completes it through the database.
type Admitter interface {
	Admit(ctx context.Context, c Claim) (rec Record, found bool, err error)
}

// Tx is a transaction that a handler writes through and that the runtime ends with exactly one
// of Commit and Abort.
type Tx[DB any] interface {
	// HandlerContext returns the context the handler runs under, derived from parent. A store
	// that claims in the background (pgstore.ClaimWithStatement) cancels it with cause
	// ErrClaimLost when that claim fails.
	HandlerContext(parent context.Context) context.Context
	// DB is the handle the handler writes through.
	DB() DB
	// Confirm makes sure the claim is held before the handler starts, sending it now if the
	// store would send it lazily; it returns the claim's failure (ErrBusy, *CompletedError, or
	// the store's error). The runtime calls it when the handler must not start at all for a
	// duplicate (the Middleware, whose handler it cannot see).
	Confirm(ctx context.Context) error
	// Commit stores resp as the completed record of the claim and commits it together with
	// the handler's writes. Errors: ErrBusy or *CompletedError (the claim was lost to a
	// concurrent request; nothing committed), ErrLost (lease-mode token replaced), ErrTxFailed
	// (a statement of the handler failed, so nothing can commit), an error wrapping
	// ErrOutcomeUnknown (the commit was sent and its fate is unknown), or any other error (the
	// store failed before the commit was sent: nothing committed).
	Commit(ctx context.Context, resp Response) error
	// Abort rolls the transaction back and releases the claim. It returns ErrBusy or
	// *CompletedError when the claim had been lost, or the key was completed by a concurrent
	// request meanwhile, so the runtime answers from that; otherwise nil.
	Abort(ctx context.Context) error
}

// Kept is an optional capability of a Tx: the response as the store kept it, after a Commit
// that returned nil. A store that bounds what one scope may keep (pgstore.Limits: stored body
// bytes per scope) can keep less than it was given: the status and headers without the body
// (BodyOmitted). A store in front of another (a replay cache, a paired lease store) copies what
// the other kept, never what it was given, so every tier replays a key alike.
type Kept interface {
	// Kept returns the response stored by the last Commit; ok is false before a successful
	// Commit.
	Kept() (resp Response, ok bool)
}

// KeptResponse returns what tx kept of resp at its Commit (Kept), or resp itself when tx does
// not say.
func KeptResponse[DB any](tx Tx[DB], resp Response) Response {
	if k, ok := tx.(Kept); ok {
		if r, ok := k.Kept(); ok {
			return r
		}
	}
	return resp
}

var (
	// ErrBusy: a concurrent request holds the key (the client gets 409 in-flight).
	ErrBusy = errors.New("store: the key is held by a concurrent request")
	// ErrLost: the fencing token is no longer the record's: the lease was taken over, or the
	// record was released or completed by another request.
	ErrLost = errors.New("store: the claim's fencing token is no longer the record's")
	// ErrTxFailed: a statement of the handler failed and the database aborted the
	// transaction, yet the handler answered; nothing it wrote can commit.
	ErrTxFailed = errors.New("store: a statement failed in the handler's transaction, which the database aborted; the handler answered anyway")
	// ErrOutcomeUnknown: the commit was sent but its answer was lost (connection broken,
	// timeout). It may or may not have committed; a retry with the same key resolves it.
	ErrOutcomeUnknown = errors.New("store: the commit's outcome is unknown")
	// ErrClaimLost is the cause (context.Cause) of a handler context that a store canceled
	// because a claim it sent in the background failed. It wraps ErrBusy or the store's error.
	ErrClaimLost = errors.New("store: the claim of the idempotency key failed; the handler's work is discarded")
	// ErrTxDone: a statement through a handler's DB after its transaction was committed or
	// rolled back (a handler that kept the handle, or a framework bridge that ran the handler
	// after the runtime finished the request). Nothing of it runs.
	ErrTxDone = errors.New("store: the handler's transaction has already been committed or rolled back")
)

// tenantKey is the context key of WithTenant.
type tenantKey struct{}

// WithTenant returns ctx carrying tenant, for store calls that take no Claim (BeginPlain): a
// store counts their transactions against it as it counts a Claim's against Claim.Tenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantFrom returns the tenant WithTenant put in ctx.
func TenantFrom(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(tenantKey{}).(string)
	return t, ok
}

// ErrLimited is what a LimitError is (errors.Is): the store refused a new record because the
// scope is over one of its per-scope limits.
var ErrLimited = errors.New("store: the scope is over a per-scope limit")

// LimitError is a new key refused by a per-scope limit of the store (pgstore.Options.Limits):
// nothing ran, and the client gets 429 with RetryAfter. It matches ErrLimited.
type LimitError struct {
	// RetryAfter is how long until the limit's interval ends, by the store's clock.
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("store: the scope is over a per-scope limit until %v from now", e.RetryAfter)
}

// Unwrap returns ErrLimited.
func (e *LimitError) Unwrap() error { return ErrLimited }

// CompletedError is a claim that lost to a concurrent request which completed the key first:
// the runtime answers from Record as if the request had arrived after it.
type CompletedError struct{ Record Record }

func (e *CompletedError) Error() string {
	return "store: the key was completed by a concurrent request"
}
