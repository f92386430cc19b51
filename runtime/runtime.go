// Package runtime makes marked HTTP operations safe to retry: a request with an idempotency key
// runs its handler at most once per (tenant, key), and every retry gets the first response.
//
//	rt, err := runtime.New(runtime.Config{Store: pgstore.New(pool, pgstore.Options{}), Scope: tenantOf})
//	err = api.Register(mux, rt, api.Handlers{CreatePayment: createPayment}) // generated
//
// For each request to a marked operation the runtime reads the key, checks the request with the
// operation's generated decoder and fingerprints it, then runs the state machine of the
// operation's mode against the store:
//
//	no record for the key            the handler runs; its final response is stored
//	a record still running           409 in-flight with Retry-After (never stored)
//	completed with the same request  the stored response, with Idempotent-Replayed: true
//	the key names another request    422 payload-mismatch; nothing runs
//	key missing or malformed         400 key-missing / key-invalid
//	the store cannot be used         503 store-unavailable with Retry-After; nothing runs
//
// Two modes make the effects happen at most once: ModeAtomic (the claim, the handler's writes
// and the stored response commit in one transaction) and ModeLease (the claim commits first
// with a lease and a fencing token; the handler calls out, then completes under the token).
// Errors are written by Config.ProblemWriter, RFC 9457 problem+json by default. Stores live in
// their own packages: runtime/pgstore (PostgreSQL), runtime/store/memstore (tests).
package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store"
)

// ScopeFunc returns the scope (tenant) of a request; an error refuses it (401 by default, see
// Config.ScopeStatus) before any key lookup. Keys are unique per scope, so the function must
// return the authenticated principal, never something the client merely asserts.
type ScopeFunc func(r *http.Request) (string, error)

// Config configures a Runtime. Zero values take the defaults stated on each field.
type Config struct {
	// Store keeps the idempotency records: pgstore.New(pool, ...) for PostgreSQL. Required.
	// Atomic-mode operations need a store that runs the handler's writes in its transactions
	// (store.Transactional); the generated Register checks it.
	Store store.Store
	// Scope is mandatory unless SingleTenant is set.
	Scope ScopeFunc
	// SingleTenant declares that the service has one tenant: every request gets the scope "".
	// It exists so that forgetting Scope is an error rather than a silent shared key space.
	SingleTenant bool
	// ScopeStatus is the status of the `unauthenticated` problem when Scope fails; default 401.
	ScopeStatus int
	// ProblemWriter writes every error the runtime answers, except those of operations whose
	// profile has a writer of its own (Profile.Problems); default ProblemJSON("").
	ProblemWriter ProblemWriter
	// Profile is the profile of every operation that names none (Operation.Profile nil): its
	// errors (Profile.Problems, instead of ProblemWriter: set one of the two), request ids,
	// echoed key and replayed headers. Its settings (key lengths, scope headers, wait) are not
	// applied at run time: put them in the spec's x-idempotency, or use Profile.Apply on
	// operations built by hand. Default none.
	Profile *Profile
	// Logger receives structured logs, with each request's context; keys appear as a short
	// hash, never raw. Default slog.Default().
	Logger *slog.Logger
	// Observer receives outcomes, claim latencies and sweep counts; default none. One that also
	// implements ExecutionObserver receives the first owner's execution times.
	Observer Observer
	// TracerProvider makes the OpenTelemetry spans of each request: "idempotency" around the
	// runtime's work, with children for the lookup, the claim, the handler and the completion;
	// attributes name the operation, the mode, the outcome and a hash of the key (never the
	// key). Default otel.GetTracerProvider(), the global provider: while the application has
	// not set one (otel.SetTracerProvider, before or after New), the runtime starts no span and
	// pays nothing for tracing; from the moment it sets one, requests are traced. A provider set
	// here is used as given, even a no-op one or OpenTelemetry's default (set the latter when the
	// process runs under eBPF auto-instrumentation, which traces through the unset default).
	TracerProvider trace.TracerProvider
	// StoreTimeout bounds each store call (a claim also waits up to the operation's
	// concurrency.wait), so that an unreachable store answers 503 instead of hanging. Default 5s.
	StoreTimeout time.Duration
	// StoreRetryAfter is the Retry-After of a 503 store-unavailable, rounded up to whole
	// seconds (at least 1). Default 1s.
	StoreRetryAfter time.Duration
	// ConflictRetryAfter is the Retry-After of an atomic-mode 409 in-flight, rounded up to
	// whole seconds (at least 1); lease mode answers the lease's remaining time. Default 1s.
	ConflictRetryAfter time.Duration
	// ProviderKeySecret, when set, turns Lease.ProviderKey and Lease.DeriveID into HMAC-SHA256
	// under this secret, so a downstream provider cannot link derived keys to client keys.
	// Changing it changes every derived key: never rotate it while records are in flight.
	ProviderKeySecret []byte
}

// Runtime runs the idempotency state machine for marked operations. It is safe for concurrent
// use.
type Runtime struct {
	cfg      Config
	log      *slog.Logger
	obs      Observer
	observed bool              // obs is not NopObserver: claim latencies are timed
	exec     ExecutionObserver // obs, when it implements it
	problems ProblemWriter
	// profile is Config.Profile, or an empty profile: never nil.
	profile *Profile
	tracer  trace.Tracer
	// matcher compiles key and schema patterns once per Runtime.
	matcher gen.Matcher
	// inputs keeps decoding inputs (*gen.Input) between requests: an Input holds a decoder and
	// buffers that each request would otherwise allocate again.
	inputs sync.Pool
	// fields keeps what Middleware's checks find in each type of request context and response
	// writer (frameworks.go, typeFields).
	fields typeFields
	// drain records the running requests for Shutdown (shutdown.go).
	drain drain
}

// New checks cfg and returns a Runtime. It fails when Store is nil, when neither Scope nor
// SingleTenant is set (or both are), when ScopeStatus is not an error status, or when both
// ProblemWriter and Profile.Problems are set.
func New(cfg Config) (*Runtime, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("runtime: Config.Store is nil (for PostgreSQL: pgstore.New(pool, pgstore.Options{}))")
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
	profile := cfg.Profile
	if profile == nil {
		profile = &Profile{}
	}
	if profile.Problems != nil && cfg.ProblemWriter != nil {
		return nil, fmt.Errorf("runtime: set Config.ProblemWriter or Config.Profile.Problems (profile %q), not both", profile.Name)
	}
	if cfg.ProblemWriter == nil {
		cfg.ProblemWriter = ProblemJSON("")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	cfg.StoreTimeout = orDefault(cfg.StoreTimeout, 5*time.Second)
	cfg.StoreRetryAfter = orDefault(cfg.StoreRetryAfter, time.Second)
	cfg.ConflictRetryAfter = orDefault(cfg.ConflictRetryAfter, time.Second)
	tracerGiven := cfg.TracerProvider != nil
	if !tracerGiven {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	exec, _ := cfg.Observer.(ExecutionObserver)
	_, nop := cfg.Observer.(NopObserver)
	rt := &Runtime{cfg: cfg, log: cfg.Logger, obs: cfg.Observer, observed: !nop, exec: exec, problems: cfg.ProblemWriter,
		profile: profile, tracer: newTracer(cfg.TracerProvider, tracerGiven)}
	rt.inputs.New = func() any { return new(gen.Input) }
	return rt, nil
}

// ErrClaimLost is the cause (context.Cause) of a handler context that the store canceled because
// the claim of the request's key, sent in the background (pgstore.ClaimWithStatement), failed: a
// concurrent request holds the key (the client gets 409), or the store failed (503). The
// handler's work is rolled back; it may stop at once.
var ErrClaimLost = store.ErrClaimLost
