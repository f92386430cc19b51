package runtime

// This file is the contract between generated code and the runtime, agreed before either was
// written (see docs/architecture.md). Generated code uses only what is declared here.

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
)

// Mode is how an operation's effects are made at most once (DESIGN section 4).
type Mode uint8

const (
	// Atomic: the claim, the handler's writes and the stored response commit in one transaction.
	Atomic Mode = iota
	// Lease: the claim commits first with a lease and a fencing token; the handler calls out;
	// completion is a compare-and-swap on the token.
	Lease
)

// Scope says what an idempotency key is unique within (DESIGN section 2, `scope`).
type Scope uint8

const (
	// ScopeTenant: one key names one request per tenant, across operations (Stripe's rule), so
	// reusing a key on another operation is a mismatch (422).
	ScopeTenant Scope = iota
	// ScopeOperation: keys are unique per tenant and operation.
	ScopeOperation
)

// KeyRule says where the idempotency key travels and what a valid key looks like
// (DESIGN section 2, `key.*`).
type KeyRule struct {
	// Header is the header carrying the key (matched case-insensitively); "" when the key is in
	// the body.
	Header string
	// BodyPointer is the JSON pointer (RFC 6901) of a body-carried key, or the form field name for
	// form bodies; "" for header keys. The generated decoder extracts the value.
	BodyPointer string
	// Required: a missing key is 400 key-missing; when false the request runs unguarded.
	Required bool
	// MinLength and MaxLength bound the key's length in bytes (all key characters are ASCII).
	MinLength, MaxLength int
	// Pattern, when set, must match the whole key: a regular expression as the spec writes it
	// (key.pattern), compiled once per Runtime (Runtime.Matcher).
	Pattern string
}

// StatusRule is one entry of replay.statuses: a status code or a class (2 for "2xx"), possibly
// excluding ("!409").
type StatusRule struct {
	Code    int
	Class   int
	Exclude bool
}

// Operation is the resolved idempotency settings of one marked operation. Generated code holds
// one per operation in its operation table; the runtime never mutates it.
type Operation struct {
	// ID is the operationId; it labels metrics and is framed into the fingerprint.
	ID string
	// Method ("POST") and Path (the OpenAPI template, "/v1/payments/{payment_id}/refunds").
	Method string
	Path   string
	Mode   Mode
	Scope  Scope
	Key    KeyRule
	// Retention is how long a completed record replays; afterwards the key is new again.
	Retention time.Duration
	// Lease is how long an in-progress claim blocks others before takeover (lease mode).
	Lease time.Duration
	// Wait is concurrency.wait: how long a duplicate waits for the first request to finish
	// (then replays) before it gets 409. Zero answers 409 at once.
	Wait time.Duration
	// BodyLimit caps the request body in bytes (413 above it); ResponseLimit caps the stored
	// response body in bytes (DESIGN section 5).
	BodyLimit     int64
	ResponseLimit int64
	// MediaTypes are the accepted request media types, lower case without parameters; empty
	// when the operation declares no body. Anything else is 415.
	MediaTypes []string
	// ReplayHeaders are response headers stored and replayed in addition to the default
	// allow-list of DESIGN section 5 (canonical MIME names).
	ReplayHeaders []string
	// Statuses decide which outcomes are final and stored; nil means the default
	// [2xx, 4xx, !408, !409, !425, !429].
	Statuses []StatusRule
	// FingerprintHeaders are request headers folded into the fingerprint (canonical MIME names,
	// sorted).
	FingerprintHeaders []string
	// Query are the declared query parameters, sorted by name; their values are framed into the
	// fingerprint (gen.Input.Begin).
	Query []string
}

// Response is what a handler answers. Body is sent as is; Header may be nil.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// AtomicFunc is an atomic-mode handler body: it makes its writes through tx, which commits
// together with the idempotency record when the response is final.
type AtomicFunc func(ctx context.Context, tx pgx.Tx) (Response, error)

// LeaseFunc is the call phase of a lease-mode handler: it runs outside any transaction, may call
// external services with lease.ProviderKey, and returns the completion phase.
type LeaseFunc func(ctx context.Context, lease *LeaseHandle) (CompleteFunc, error)

// CompleteFunc is the completion phase of a lease-mode handler: it writes its rows through tx,
// the transaction that also completes the record under the fencing token.
type CompleteFunc func(ctx context.Context, tx pgx.Tx) (Response, error)

// Key is an idempotency key as the request carried it, before validation. Generated code builds
// body-carried keys as Key{Value: v, Present: found}; Exchange.HeaderKey builds header keys.
type Key struct {
	Value   string
	Present bool
	// lines counts the key header lines (two or more is 400 key-invalid, DESIGN section 2).
	lines int
}

// Exchange is one request to a marked operation on its way through the runtime. Generated
// handlers obtain it from Runtime.Begin and end it with exactly one of Fail, RunAtomic or
// RunLease.
//
// The order of checks is fixed (DESIGN section 4, shared/cases): scope (401), body size (413),
// media type (415) — all in Begin — then the generated decoder (400 body-invalid), then the key
// (400 key-missing / key-invalid), then the state machine.
type Exchange struct {
	rt        *Runtime
	w         http.ResponseWriter
	r         *http.Request
	op        *Operation
	scope     string
	mediaType string
	body      []byte
	// done is set by the first of Fail, RunAtomic and RunLease; a later call is a bug in the
	// caller, logged and ignored.
	done bool
}

// Body returns the request body bytes, read whole in Begin (at most Operation.BodyLimit bytes).
func (x *Exchange) Body() []byte { return x.body }

// MediaType returns the request media type, lower case without parameters ("" without a body).
func (x *Exchange) MediaType() string { return x.mediaType }

// Request returns the HTTP request.
func (x *Exchange) Request() *http.Request { return x.r }

// Scope returns the scope (tenant) the ScopeFunc gave for this request.
func (x *Exchange) Scope() string { return x.scope }
