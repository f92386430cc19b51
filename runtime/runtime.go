// Package runtime is the part of idemgen that generated code imports: the idempotency state
// machine of DESIGN sections 1, 4 and 5 (New, In-flight, Replay, Mismatch), its PostgreSQL
// store on pgx/v5, the HTTP exchange with its RFC 9457 problems, the sweeper and the observer.
//
// Two modes make an operation's effects happen at most once per (scope, key):
//   - Atomic (default): the claim, the handler's writes and the stored response commit in one
//     transaction; anything that is not a final response rolls all of it back.
//   - Lease: the claim commits first with a lease and a fencing token; the handler calls out of
//     the database, then completes in a transaction that compares and swaps the token.
//
// docs/runtime.md describes the protocol, its SQL and the number of round trips per path.
package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/gen"
)

// ScopeFunc returns the scope (tenant) of a request; an error refuses it (401 by default, see
// Config.ScopeStatus) before any key lookup (DESIGN section 4). Keys are unique per scope, so the
// function must return the authenticated principal, never something the client merely asserts.
type ScopeFunc func(r *http.Request) (string, error)

// ClaimStrategy chooses how the database round trips of an atomic-mode request are built. All
// three answer a replay, a mismatch and a conflict in one round trip; they differ in what that
// round trip costs the database and in the round trips of a new key (docs/runtime.md and
// bench/README.md have the measurements).
type ClaimStrategy uint8

const (
	// ClaimWithStatement (the default) reads the record with a plain SELECT first, as
	// ClaimReadFirst does: a replay, mismatch or running lease is answered from that one cheap
	// read (no transaction id, no error). For a new key, BEGIN and the advisory claim lock are
	// queued in front of the handler's first statement and travel in its round trip, and the
	// record is inserted, completed, with the COMMIT: the handler's statements plus two round
	// trips, as many as the same handler in a plain pgx BEGIN/…/COMMIT. If the handler sends no
	// statement within Config.ClaimDelay, the claim goes out alone then, so a concurrent
	// duplicate still gets 409 while the handler works (a duplicate that arrives within that
	// delay may run the handler's code up to its first statement, and is then answered 409 or
	// replayed: atomic-mode handlers keep their effects in the database, DESIGN section 4).
	ClaimWithStatement ClaimStrategy = iota
	// ClaimReadFirst reads the record first, then takes the advisory claim lock in a round trip
	// of its own before the handler starts: the handler's statements plus three round trips.
	// Use it when a handler does slow work before its first statement and no duplicate may
	// start that work at all.
	ClaimReadFirst
	// ClaimPipelined sends the claim and the transaction's BEGIN in one pipeline whose middle
	// statement fails on purpose when the key already exists, so a new key costs two round trips
	// plus the handler's statements, but it inserts its record running and updates it at
	// completion. A replay also costs one round trip, a dearer one: the claim statement, an
	// aborted implicit transaction and one ERROR line ("idemgen: ... not an error") in the
	// PostgreSQL server log for every replay, mismatch and conflict.
	ClaimPipelined
)

// Config configures a Runtime. Zero values take the defaults stated on each field.
type Config struct {
	// Pool is the connection pool of the database that holds idempotency_records (see Migrate).
	// Required. Atomic-mode handlers write through a transaction on this pool.
	Pool *pgxpool.Pool
	// Scope is mandatory unless SingleTenant is set.
	Scope ScopeFunc
	// SingleTenant declares that the service has one tenant: every request gets the scope "".
	// It exists so that forgetting Scope is an error rather than a silent shared key space.
	SingleTenant bool
	// ScopeStatus is the status of the `unauthenticated` problem when Scope fails; default 401.
	ScopeStatus int

	// Logger receives structured logs; keys are logged as a short hash, never raw. Default
	// slog.Default().
	Logger *slog.Logger
	// Observer receives outcome events, claim latencies and sweep counts; default none.
	Observer Observer

	// ClaimStrategy: see the constants; default ClaimWithStatement.
	ClaimStrategy ClaimStrategy
	// ClaimDelay is how long a ClaimWithStatement claim waits for the handler's first statement
	// to carry it before it is sent alone; default 10ms. It bounds the time during which a
	// concurrent duplicate cannot see that the key is taken.
	ClaimDelay time.Duration
	// NoAdvisoryLocks turns off the transaction-scoped advisory lock by which an atomic-mode
	// claim detects a concurrent claim of the same key without waiting. Set it on engines
	// without pg_try_advisory_xact_lock, or where advisory locks are not cluster-wide (see
	// docs/distributed.md); a duplicate then waits up to ConflictTimeout on the uncommitted row.
	NoAdvisoryLocks bool
	// ConflictTimeout is the atomic-mode claim's lock_timeout. With advisory locks it only bounds
	// waits that are not another claim of the key (relation extension under load); default 1s.
	// With NoAdvisoryLocks it is also how long a duplicate waits for a running claim before 409;
	// default 50ms (a short one turns such unrelated waits into occasional false 409s, which
	// clients retry). Operation.Wait, when set, replaces it for the duplicate's wait.
	ConflictTimeout time.Duration
	// StoreTimeout bounds each store call (acquire a connection, claim, read) so that an
	// unreachable store answers 503 instead of hanging. Default 5s.
	StoreTimeout time.Duration
	// StoreRetryAfter is the Retry-After of a 503 store-unavailable, rounded up to whole seconds
	// (at least 1). Default 1s.
	StoreRetryAfter time.Duration
	// ConflictRetryAfter is the Retry-After of an atomic-mode 409 in-flight, rounded up to whole
	// seconds (at least 1); lease mode answers the lease's remaining time instead. Default 1s.
	ConflictRetryAfter time.Duration
	// ProblemBase prefixes every problem type URI; default DefaultProblemBase.
	ProblemBase string
	// ProviderKeySecret, when set, turns LeaseHandle.ProviderKey and DeriveID into HMAC-SHA256
	// under this secret, so a downstream provider cannot link derived keys to client keys.
	// Changing it changes every derived key: never rotate it while records are in flight.
	ProviderKeySecret []byte
}

// Runtime runs the idempotency state machine for generated handlers. It is safe for concurrent
// use; it holds no mutable state besides the pool.
type Runtime struct {
	cfg    Config
	log    *slog.Logger
	obs    Observer
	store  *store
	probes problems
	// matcher compiles each key and schema pattern once for this Runtime.
	matcher *gen.Matcher
}

// Matcher returns the Runtime's pattern cache, which generated code hands to gen.Input.
func (rt *Runtime) Matcher() *gen.Matcher { return rt.matcher }

// New checks cfg and returns a Runtime. It fails when Pool is nil, or when neither Scope nor
// SingleTenant is set (or both are).
func New(cfg Config) (*Runtime, error) {
	if cfg.Pool == nil {
		return nil, errors.New("runtime: Config.Pool is nil")
	}
	switch {
	case cfg.Scope == nil && !cfg.SingleTenant:
		return nil, errors.New("runtime: Config.Scope is required (or set SingleTenant for a one-tenant service)")
	case cfg.Scope != nil && cfg.SingleTenant:
		return nil, errors.New("runtime: set Config.Scope or SingleTenant, not both")
	}
	if cfg.ScopeStatus == 0 {
		cfg.ScopeStatus = http.StatusUnauthorized
	}
	if cfg.ScopeStatus < 400 || cfg.ScopeStatus > 599 {
		return nil, fmt.Errorf("runtime: Config.ScopeStatus %d is not an error status", cfg.ScopeStatus)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	if cfg.ConflictTimeout <= 0 {
		cfg.ConflictTimeout = time.Second
		if cfg.NoAdvisoryLocks {
			cfg.ConflictTimeout = 50 * time.Millisecond
		}
	}
	if cfg.ClaimDelay <= 0 {
		cfg.ClaimDelay = 10 * time.Millisecond
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 5 * time.Second
	}
	if cfg.StoreRetryAfter <= 0 {
		cfg.StoreRetryAfter = time.Second
	}
	if cfg.ConflictRetryAfter <= 0 {
		cfg.ConflictRetryAfter = time.Second
	}
	if cfg.ProblemBase == "" {
		cfg.ProblemBase = DefaultProblemBase
	}
	rt := &Runtime{
		cfg:     cfg,
		log:     cfg.Logger,
		obs:     cfg.Observer,
		store:   newStore(cfg.Pool),
		probes:  problems{base: cfg.ProblemBase},
		matcher: &gen.Matcher{},
	}
	return rt, nil
}
