package runtime

// Stubs of the generated-code contract. The runtime issue (7) replaces every function in this
// file with its implementation and deletes the file; until then generated code compiles against
// these signatures.

import (
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// ScopeFunc returns the scope (tenant) of a request; an error refuses it (401 by default) before
// any key lookup.
type ScopeFunc func(r *http.Request) (string, error)

// Config configures a Runtime.
type Config struct {
	Pool *pgxpool.Pool
	// Scope is mandatory unless SingleTenant is set.
	Scope        ScopeFunc
	SingleTenant bool
}

// Runtime runs the idempotency state machine for generated handlers.
type Runtime struct {
	cfg Config
}

// New checks cfg and returns a Runtime.
func New(cfg Config) (*Runtime, error) { panic("runtime: not implemented yet") }

// Begin resolves the scope, reads the body (capped) and checks the media type. When it returns
// false it has already written the error response.
func (rt *Runtime) Begin(w http.ResponseWriter, r *http.Request, op *Operation) (*Exchange, bool) {
	panic("runtime: not implemented yet")
}

// Fail answers the request with the problem err describes: a *canonical.Error or *BodyError
// becomes 400 body-invalid naming its JSON pointer; anything else 500.
func (x *Exchange) Fail(err error) { panic("runtime: not implemented yet") }

// HeaderKey reads the key from the operation's key header.
func (x *Exchange) HeaderKey() Key { panic("runtime: not implemented yet") }

// RunAtomic validates key, then runs the state machine in atomic mode.
func (x *Exchange) RunAtomic(key Key, fp canonical.Fingerprint, fn AtomicFunc) {
	panic("runtime: not implemented yet")
}

// RunLease validates key, then runs the state machine in lease mode.
func (x *Exchange) RunLease(key Key, fp canonical.Fingerprint, fn LeaseFunc) {
	panic("runtime: not implemented yet")
}

// LeaseHandle is a lease-mode handler's view of its claim.
type LeaseHandle struct{}

// ProviderKey derives the key to send to a downstream provider from (scope, key, label).
func (l *LeaseHandle) ProviderKey(label string) string { panic("runtime: not implemented yet") }

// Extend pushes the lease's end to now()+d on the database clock.
func (l *LeaseHandle) Extend(d time.Duration) error { panic("runtime: not implemented yet") }

// SchemaSQL returns the SQL that creates the idempotency table and its index (every embedded
// migration, in order), for `idemgen sql` and for users who manage their schema themselves.
func SchemaSQL() string { panic("runtime: not implemented yet") }
