package store

import (
	"context"
	"time"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// Inspector is an optional capability of a Store: reading records the way support tools need
// them (timestamps, lease end, body size, expired rows not yet swept) and summarising the whole
// store. It never changes a record. The lookups and the support page of runtime/admin and
// `idemgen records` use it; runtime/pgstore implements it. Check for it with a type assertion:
//
//	in, ok := st.(store.Inspector)
type Inspector interface {
	// Inspect returns the rows stored under scope for each of keys (stored keys: for
	// per-operation keys, the operation ID, one space and the key), in the order of keys,
	// leaving out keys without a row. An expired row that the sweeper has not deleted yet is
	// returned with Live false. A key whose record is gone but whose tombstone remembers it is
	// returned as its tombstone (State Expired; Live while the tombstone's horizon runs). The
	// response body is read only when withBody is true; BodySize is always set. Errors are the
	// store's, wrapped.
	Inspect(ctx context.Context, scope string, keys []string, withBody bool) ([]Snapshot, error)
	// Stats summarises every row of the store. It may read every row: it is for support tools
	// and the command line, never for the request path. Errors are the store's, wrapped.
	Stats(ctx context.Context) (Stats, error)
	// Uncertain returns the uncertain records: running lease-mode records whose call phase
	// started a call (Store.BeginCall) and that were marked uncertain or whose lease has ended
	// (Snapshot.Uncertain says which), claimed at or after since (zero: any), oldest claim
	// first, at most limit of them (0: no limit). Snapshot.Ref is set, Snapshot.ID only when
	// the store knows the scope and key (pgstore stores digests: it does not). No body is read.
	// Errors are the store's, wrapped.
	Uncertain(ctx context.Context, since time.Time, limit int) ([]Snapshot, error)
}

// Snapshot is one stored row as an Inspector reads it. Times come from the store's clock.
type Snapshot struct {
	ID          ID
	Operation   string
	Fingerprint canonical.Fingerprint
	State       State
	// Token is the fencing token (lease mode) or the claim id (atomic mode).
	Token int64
	// Live is false once ExpiresAt has passed: the record counts as absent (the key is new
	// again) although the row is still there until the sweeper deletes it.
	Live bool
	// CreatedAt is when the key was claimed; CompletedAt when the final response was stored
	// (zero while running); ExpiresAt when the record stops replaying.
	CreatedAt, CompletedAt, ExpiresAt time.Time
	// LockedUntil is the end of a running lease-mode claim's lease (zero when there is none);
	// LeaseLeft is how long it still runs when read, zero or negative once it has ended.
	LockedUntil time.Time
	LeaseLeft   time.Duration
	// ReadAt is the store's clock when the row was read.
	ReadAt time.Time
	// Response is the stored final response (completed rows). Body is nil unless the body was
	// asked for; BodySize is its length in bytes either way.
	Response Response
	BodySize int64
	// Uncertain says why a running record's outcome is uncertain (NotUncertain otherwise);
	// UncertainSince is when it was marked, zero when the store derived it
	// (UncertainLeaseEnded: since LockedUntil).
	Uncertain      Uncertainty
	UncertainSince time.Time
	// Calls are the downstream calls the record's call phase started (Store.BeginCall), in the
	// order they started.
	Calls []Call
	// Ref is the store's own name of the record, for support staff when the scope and key are
	// not known: pgstore's key_id digest as a UUID (docs/runtime.md shows the digest in SQL),
	// the Redis key of a redisstore record.
	Ref string
	// StatusClass is, for a tombstone (State Expired), its response status's class (2 for
	// 2xx); ForgetAt, for a completed record or a tombstone, when the key stops being
	// remembered (zero: it has no tombstone, and the key is new again at ExpiresAt). A
	// tombstone's Fingerprint holds the sum's first TombstoneSumBytes bytes.
	StatusClass int
	ForgetAt    time.Time
}

// Stats summarises a store's rows at one instant (ReadAt, the store's clock).
type Stats struct {
	ReadAt time.Time `json:"read_at"`
	// Running and Completed count live and expired rows by state; Stale counts running rows
	// whose lease has ended (claims older than their lease, waiting for a takeover).
	Running   int64 `json:"running"`
	Completed int64 `json:"completed"`
	Stale     int64 `json:"stale_running"`
	// Uncertain counts the running records whose outcome is uncertain (Inspector.Uncertain).
	Uncertain int64 `json:"uncertain"`
	// OldestRunning is the creation time of the oldest running row; nil when none runs.
	OldestRunning *time.Time `json:"oldest_running,omitempty"`
	// Expired counts rows past their expiry that the sweeper has not deleted yet;
	// OldestExpired is the expiry of the oldest of them (nil when none).
	Expired       int64      `json:"expired_not_swept"`
	OldestExpired *time.Time `json:"oldest_expired,omitempty"`
	// Tombstones counts the keys remembered after their retention (State Expired), and
	// ForgottenTombstones the tombstones past their horizon that the sweeper has not deleted
	// yet.
	Tombstones          int64 `json:"tombstones"`
	ForgottenTombstones int64 `json:"tombstones_not_swept"`
	// ResponseBytes is the size of the stored response bodies and headers, in bytes;
	// StorageBytes is what the store occupies on disk (table and indexes), 0 when unknown.
	ResponseBytes int64 `json:"response_bytes"`
	StorageBytes  int64 `json:"storage_bytes"`
	// Operations breaks the counts down by operation ID, sorted by operation.
	Operations []OperationStats `json:"operations"`
}

// OperationStats is Stats for the rows of one operation.
type OperationStats struct {
	Operation     string     `json:"operation"`
	Running       int64      `json:"running"`
	Completed     int64      `json:"completed"`
	Stale         int64      `json:"stale_running"`
	Uncertain     int64      `json:"uncertain"`
	OldestRunning *time.Time `json:"oldest_running,omitempty"`
	Expired       int64      `json:"expired_not_swept"`
	ResponseBytes int64      `json:"response_bytes"`
}

// SweepReport is what a sweeper tells an observer after each sweep, for monitoring (see
// SweepObserver).
type SweepReport struct {
	// Deleted is the number of records the sweep deleted; Duration how long it took.
	// Tombstones is how many tombstones past their horizon it deleted besides.
	Deleted    int64
	Tombstones int64
	Duration   time.Duration
	// Err is why the sweep stopped early, nil when it finished.
	Err error
	// Sampled reports whether the backlog below was read; it is false when that read failed
	// (the failure is in Err when the sweep itself succeeded).
	Sampled bool
	// StaleRunning counts, by operation, running rows whose lease has ended: claims older than
	// their lease that no retry has taken over yet.
	StaleRunning map[string]int64
	// Lag is how long ago the oldest expired row still present expired, by the store's clock,
	// read after the sweep: zero when the sweeper has caught up.
	Lag time.Duration
	// Uncertain counts, by operation, the uncertain records (Inspector.Uncertain).
	Uncertain map[string]int64
}

// SweepObserver is the optional extension of a sweeper's observer (pgstore.Sweeper.Observer)
// that receives a SweepReport after every sweep. runtime/prometheus implements it.
type SweepObserver interface {
	SweepDone(SweepReport)
}
