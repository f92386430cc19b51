package runtime

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/defaults"
	"github.com/idemgen/idemgen/runtime/gen"
)

// Defaults of the x-idempotent settings, used when an Operation leaves a field zero: the values
// of runtime/defaults, which the loader and the generator read too.
const (
	// DefaultRetention is `retention`: how long a completed record replays (24h).
	DefaultRetention = defaults.Retention
	// DefaultTombstone is `tombstone`: how long after completion a key is remembered (30 days).
	DefaultTombstone = defaults.Tombstone
	// NoTombstone is the Operation.Tombstone of `tombstone: 0s`: no tombstone is kept.
	NoTombstone time.Duration = -1
	// DefaultLease is `lease`: how long a lease-mode claim blocks others before takeover (30s).
	DefaultLease = defaults.Lease
	// DefaultExecutionLimit is `execution.limit`: how long a handler that holds its key may run,
	// detached from its client (1m).
	DefaultExecutionLimit = defaults.ExecutionLimit
	// DefaultBodyLimit is `limits.body` and `limits.response`: 1 MiB.
	DefaultBodyLimit = defaults.BodyLimit
	// DefaultKeyMinLength and DefaultKeyMaxLength bound a key's length in bytes (16 and 255).
	DefaultKeyMinLength = defaults.KeyMinLength
	DefaultKeyMaxLength = defaults.KeyMaxLength
)

// Key syntax settings (runtime/defaults, keys.go): the characters a key may have and how an
// RFC 8941 quoted string is read.
type (
	KeyCharacters = defaults.KeyCharacters
	KeyQuoting    = defaults.KeyQuoting
)

const (
	KeyVisible        = defaults.KeyVisible
	KeyOpaque         = defaults.KeyOpaque
	KeyQuotedAccepted = defaults.KeyQuotedAccepted
	KeyQuotedRequired = defaults.KeyQuotedRequired
	KeyQuotedLiteral  = defaults.KeyQuotedLiteral
)

// Mode is how an operation's effects are made at most once.
type Mode uint8

const (
	// ModeAtomic: the claim, the handler's writes and the stored response commit in one
	// database transaction; anything that is not a final response rolls all of it back.
	ModeAtomic Mode = iota
	// ModeLease: the claim commits first with a lease and a fencing token; the handler calls
	// out of the database, then completes in a transaction that compares and swaps the token.
	ModeLease
)

// String names the mode as x-idempotent does ("atomic", "lease").
func (m Mode) String() string {
	if m == ModeLease {
		return "lease"
	}
	return "atomic"
}

// Scope says what an idempotency key is unique within.
type Scope uint8

const (
	// ScopeTenant: one key names one request per tenant, across operations (Stripe's rule), so
	// reusing a key on another operation is a mismatch (422).
	ScopeTenant Scope = iota
	// ScopeOperation: keys are unique per tenant and operation.
	ScopeOperation
	// ScopePath: keys are unique per tenant, operation and the values of the request's path
	// parameters: per endpoint path, as the Agentic Commerce Protocol scopes them
	// (agentic-checkout RFC section 6.1, "authenticated identity + endpoint path"), so one key
	// sent to update two checkout sessions names two requests.
	ScopePath
)

// String names the scope as x-idempotent's `scope` does ("tenant", "operation", "path").
func (s Scope) String() string {
	switch s {
	case ScopeOperation:
		return defaults.ScopeOperation
	case ScopePath:
		return defaults.ScopePath
	}
	return defaults.ScopeTenant
}

// KeyRule says where the idempotency key travels and what a valid key looks like.
type KeyRule struct {
	// Header is the header carrying the key (matched case-insensitively); "" when the key is in
	// the body.
	Header string
	// BodyPointer is the JSON pointer (RFC 6901) of a body-carried key, or the form field name
	// for form bodies; "" for header keys. The operation's decoder extracts the value.
	BodyPointer string
	// Query is the query parameter carrying the key (matched exactly; Google AIP-155's
	// request_id on REST APIs whose request body is the resource), when Header is "". The
	// parameter is not framed into the fingerprint, as the key header is not; given twice it
	// is 400 key-invalid, as two key header lines are.
	Query string
	// Required: a missing key is 400 key-missing; when false the request runs unguarded.
	Required bool
	// MinLength and MaxLength bound the key's length in characters (Unicode code points: bytes
	// for a visible ASCII key); zero means DefaultKeyMinLength and DefaultKeyMaxLength.
	MinLength, MaxLength int
	// Pattern, when set, is a regular expression (ECMA-262 syntax, as OpenAPI writes it) that
	// must match the whole key.
	Pattern string
	// Characters are the characters a key may have (key.characters): KeyVisible, the zero value,
	// is visible ASCII except ','; KeyOpaque is any text without control characters.
	Characters KeyCharacters
	// Quoted is how a key sent as an RFC 8941 quoted string is read (key.quoted):
	// KeyQuotedAccepted, the zero value, takes `"abc"` as the key abc; KeyQuotedRequired
	// refuses a bare key (the IETF draft's syntax); KeyQuotedLiteral keeps the quotes.
	Quoted KeyQuoting
	// Echo (key.echo): every answer carries the key header as the request sent it, as
	// Profile.EchoKey does for every operation of a profile (the Agentic Commerce Protocol's
	// agentic-checkout RFC section 3.1: "Idempotency-Key — echo on all POST responses").
	Echo bool
	// FirstSent, when set, is the header that carries the time of the request's first attempt
	// under OASIS Repeatable Requests 1.0 ("Repeatability-First-Sent", an IMF-fixdate, RFC 9110
	// section 5.6.7). A key without a valid time is 400 key-invalid; a first attempt older than
	// the operation's retention is 412 key-expired before any lookup, because the server may
	// already have forgotten whether it ran; every answer carries Repeatability-Result.
	FirstSent string
}

// StatusRule is one entry of replay.statuses: a status code or a class (2 for "2xx"),
// possibly excluding ("!409"). It is the contract table's type (runtime/defaults), whose Final
// says which statuses a list of rules stores: the last matching rule decides.
type StatusRule = defaults.StatusRule

// Operation is the resolved idempotency settings of one marked operation, as `idemgen list`
// prints them. Generated code builds one per operation (see the generated Operations
// function); the runtime never changes it. Zero durations and sizes take the defaults above.
type Operation struct {
	// ID is the operationId: it labels metrics and logs and is framed into the fingerprint.
	ID string
	// Method ("POST") and Path (the OpenAPI path template, "/v1/payments/{payment_id}/refunds").
	Method string
	Path   string
	Mode   Mode
	Scope  Scope
	Key    KeyRule
	// Retention is how long a completed record replays its stored response.
	Retention time.Duration
	// Tombstone is how long after completion the key is still remembered once the retention
	// has ended: a compact tombstone (the key's digests, the fingerprint, the status class and
	// the completion time; no response) refuses a late retry with 410 result-expired instead of
	// running the operation again, and another request with the key is still a 422 mismatch.
	// Zero means DefaultTombstone (30 days); NoTombstone (negative) keeps none, so the key is
	// new again when the retention ends. A Tombstone not longer than Retention keeps none.
	Tombstone time.Duration
	// Lease is how long an in-progress lease-mode claim blocks others before a takeover.
	Lease time.Duration
	// Wait is concurrency.wait: how long a duplicate waits for the first request to finish
	// (then replays) before it gets 409. Zero answers 409 at once.
	Wait time.Duration
	// ExecutionLimit is execution.limit: how long a request that holds its key may run its
	// handler (atomic mode: the handler; lease mode: the call phase and the completion, each),
	// whether or not its client is still connected. Zero means DefaultExecutionLimit (1m).
	ExecutionLimit time.Duration
	// Attached is execution.detach false: the handler's context ends when the client goes away
	// (its transaction rolls back, the key is released), as it did before idemgen finished
	// accepted operations. Leave it false unless the handler truly must stop with its client:
	// a retry then starts the operation over, and a client whose attempts are shorter than the
	// handler never succeeds.
	Attached bool
	// BodyLimit caps the request body in bytes (413 above it); ResponseLimit caps the stored
	// response body in bytes (a larger body is delivered, not stored, and replayed empty).
	BodyLimit     int64
	ResponseLimit int64
	// MediaTypes are the accepted request media types, lower case without parameters; empty
	// when the operation declares no body. Anything else is 415.
	MediaTypes []string
	// Query are the declared query parameters, sorted: they are framed into the fingerprint.
	Query []string
	// FingerprintHeaders are request headers framed into the fingerprint (canonical MIME names).
	FingerprintHeaders []string
	// Exclude are the fingerprint.exclude JSON pointers (RFC 6901; `*` for every element):
	// body members the fingerprint leaves out. The decoder applies them; they are here so that
	// tools and logs can show them.
	Exclude []string
	// RawBody: fingerprint.body is raw, so the body is fingerprinted byte for byte.
	RawBody bool
	// ReplayHeaders are response headers stored and replayed in addition to the default
	// allow-list (Content-Type, Content-Encoding, Content-Language, Content-Disposition,
	// Location, ETag, Link).
	ReplayHeaders []string
	// Statuses decide which outcomes are final and stored; nil means the default
	// [2xx, 4xx, !408, !409, !425, !429]: the last matching rule decides.
	Statuses []StatusRule
	// ScopeHeaders are request headers whose values become part of the scope, after the
	// ScopeFunc's tenant: the same key sent for another value (Stripe's Stripe-Account, a
	// connected account) names another request and never replays its response.
	ScopeHeaders []string
	// Profile, when set, is the contract of a known API the operation answers in (its errors,
	// request ids, echoed key, extra replayed headers); nil leaves it to Config.Profile. See
	// Profile and StripeProfile.
	Profile *Profile
}

// Response is what a handler answers. Body is sent as is; Header may be nil. A zero Status
// is 200.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON returns the Response a handler answers with v as its JSON body: status, Content-Type
// application/json, and v encoded by encoding/json (HTML characters escaped, no trailing
// newline). Its error is encoding/json's for a value it cannot encode (a channel, a NaN),
// wrapped; a handler returns it as is, which answers 500 and releases the key:
//
//	return runtime.JSON(http.StatusCreated, order)
func JSON(status int, v any) (Response, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return Response{}, fmt.Errorf("runtime.JSON: encode %T: %w", v, err)
	}
	return Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, nil
}

// isFinal reports whether status is final under the operation's replay.statuses
// (defaults.Final: the last matching rule decides; nil rules are the default). A non-final
// outcome is never stored and releases the key, so the client's retry runs again.
func (op *Operation) isFinal(status int) bool { return defaults.Final(op.Statuses, status) }

func (op *Operation) retention() time.Duration { return orDefault(op.Retention, DefaultRetention) }
func (op *Operation) lease() time.Duration     { return orDefault(op.Lease, DefaultLease) }

// tombstone is how long after completion the key is remembered, 0 for none (NoTombstone, or a
// horizon that would end before the retention).
func (op *Operation) tombstone() time.Duration {
	t := orDefault(op.Tombstone, DefaultTombstone)
	if op.Tombstone < 0 || t <= op.retention() {
		return 0
	}
	return t
}
func (op *Operation) executionLimit() time.Duration {
	return orDefault(op.ExecutionLimit, DefaultExecutionLimit)
}
func (op *Operation) bodyLimit() int64     { return orDefault(op.BodyLimit, DefaultBodyLimit) }
func (op *Operation) responseLimit() int64 { return orDefault(op.ResponseLimit, DefaultBodyLimit) }

func orDefault[T time.Duration | int64](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// RecordKey returns the key that a request with the idempotency key key (validated, RFC 8941
// quotes removed: UnquoteKey) is stored under for op, the store.ID.Key of its record: key itself
// for ScopeTenant, or op.ID, one space and key for ScopeOperation. Support tools
// (runtime/admin) read records under it; the serving path stores them under it. For ScopePath
// it is the record key of a request to a path without parameter values: see RecordKeyAt.
func (op *Operation) RecordKey(key string) string { return op.storedKey(key, nil) }

// RecordKeyAt is RecordKey for a request to path, the request's URL path as sent (escaped,
// under any prefix a router adds): under ScopePath, the record key holds the values of the
// path parameters of op.Path that path carries, so that the same key on two endpoint paths
// names two records. ok is false when path does not end with op.Path's shape. Other scopes do
// not read path.
func (op *Operation) RecordKeyAt(key, path string) (stored string, ok bool) {
	if op.Scope != ScopePath {
		return op.storedKey(key, nil), true
	}
	t := gen.ParseTemplate(op.Path)
	segs := gen.DecodeSegments(gen.SplitPath(path))
	if !t.MatchEnd(segs, false) {
		return "", false
	}
	vals, ok := t.Values(segs)
	return op.storedKey(key, vals), ok
}

// storedKey is the record key of a validated key: the key itself for scope tenant, the
// operation ID, one space and the key for scope operation, and for scope path the operation
// ID, then each of pathValues (the request's path parameter values, in the template's order)
// as the byte 0x1F (unit separator), its length in decimal, ':' and the value, then 0x1F and
// the key. A visible key never contains a space, so the first two forms never meet; an opaque
// key (key.characters) may, and under scope tenant one that does is stored after the byte 0x1F,
// which no key contains, so that a tenant key "createOrder abc" never names the record of key
// abc of a scope-operation createOrder. The path form has 0x1F right after the operation ID,
// where the operation form has a space, and its values are framed with their lengths, so no
// key and values can spell another's. Every key that could be sent before opaque keys existed
// is stored as it was.
func (op *Operation) storedKey(key string, pathValues []string) string {
	switch {
	case op.Scope == ScopeOperation:
		return op.ID + " " + key
	case op.Scope == ScopePath:
		var b strings.Builder
		b.WriteString(op.ID)
		for _, v := range pathValues {
			b.WriteByte(0x1f)
			b.WriteString(strconv.Itoa(len(v)))
			b.WriteByte(':')
			b.WriteString(v)
		}
		b.WriteByte(0x1f)
		b.WriteString(key)
		return b.String()
	case strings.IndexByte(key, ' ') >= 0:
		return "\x1f" + key
	}
	return key
}

// badScopeHeader returns the first of op's scope headers whose value in h the operation's
// profile refuses (Profile.ScopeHeaderValid); an absent header is the empty value and always
// valid.
func (op *Operation) badScopeHeader(h http.Header) (string, bool) {
	if op.Profile == nil || op.Profile.ScopeHeaderValid == nil {
		return "", false
	}
	for _, name := range op.ScopeHeaders {
		if v := h.Get(name); v != "" && !op.Profile.ScopeHeaderValid(name, v) {
			return name, true
		}
	}
	return "", false
}

// RequestScope returns the scope that a request of tenant with headers h is stored under for
// op: the tenant, followed by the value of each of op.ScopeHeaders (an absent header is the
// empty value), each as the byte 0x1F (unit separator), its length in decimal, ':' and the
// value, so that no tenant and values can spell another. Without ScopeHeaders it is the tenant
// itself. (The separator is not a zero byte: PostgreSQL text cannot hold one, so such scopes
// failed every request on pgstore with 503.)
func (op *Operation) RequestScope(tenant string, h http.Header) string {
	scope := tenant
	for _, name := range op.ScopeHeaders {
		v := h.Get(name)
		scope += "\x1f" + strconv.Itoa(len(v)) + ":" + v
	}
	return scope
}
