// Package defaults holds the defaults of the x-idempotent settings (docs/design.md section 2),
// the one table the loader applies to every marked operation, the generator leaves out of the
// settings it writes (a zero field means the default) and the runtime applies to a zero field.
// It imports nothing but the standard library, so each of them can depend on it.
package defaults

import (
	"strconv"
	"time"
)

// The defaults of the settings, by their names in x-idempotent.
const (
	// KeyHeader is key.header: the header that carries the idempotency key
	// (draft-ietf-httpapi-idempotency-key-header).
	KeyHeader = "Idempotency-Key"
	// KeyMinLength and KeyMaxLength are key.minLength and key.maxLength, in bytes (key
	// characters are ASCII). 255 is also the longest key idemgen stores.
	KeyMinLength = 16
	KeyMaxLength = 255
	// Retention is how long a completed record replays; afterwards the key is new again.
	Retention = 24 * time.Hour
	// Tombstone is how long after its completion a key is still remembered, by a compact
	// tombstone once its response's retention has ended: a late retry within it is refused
	// (410 result-expired) instead of running the operation a second time. 30 days, the window
	// Stripe's API v2 keeps keys for; storing full responses that long is what is expensive, and
	// a tombstone is under 100 bytes.
	Tombstone = 30 * 24 * time.Hour
	// Lease is how long a lease-mode claim blocks others before a takeover.
	Lease = 30 * time.Second
	// ExecutionLimit is execution.limit: how long a request that holds its key may run its
	// handler once it is detached from its client (execution.detach, on by default). A minute
	// is twice the default lease and far above any handler that holds a database transaction
	// in a healthy service, yet short enough that a stuck handler does not hold its key and
	// its connection for long.
	ExecutionLimit = time.Minute
	// BodyLimit, ResponseLimit and PartLimit are limits.body (the request body; 413 above it),
	// limits.response (the stored response body) and limits.part (one part of a
	// multipart/form-data body; 413 above it), in bytes: 1 MiB each.
	BodyLimit     = 1 << 20
	ResponseLimit = 1 << 20
	PartLimit     = 1 << 20
)

// StatusRule is one rule of replay.statuses: a status code (Code) or a class (Class 2 for
// "2xx"), excluding when Exclude ("!409"). runtime.StatusRule and the loader's model have the
// same fields, so each converts it.
type StatusRule struct {
	Code    int
	Class   int
	Exclude bool
}

// String writes the rule as replay.statuses does: "2xx", "402", "!409".
func (r StatusRule) String() string {
	s := strconv.Itoa(r.Code)
	if r.Class != 0 {
		s = strconv.Itoa(r.Class) + "xx"
	}
	if r.Exclude {
		s = "!" + s
	}
	return s
}

// Statuses returns replay.statuses' default, [2xx, 4xx, "!408", "!409", "!425", "!429"]: 2xx
// and 4xx answers are final (stored and replayed) except 408, 409, 425 and 429, which a client
// is expected to retry (RFC 9110 sections 15.5.9 and 15.5.10, RFC 8470, RFC 6585); the last
// matching rule decides (Final). Each call returns a new slice.
func Statuses() []StatusRule {
	t := defaultStatuses // a copy: the table stays as written
	return t[:]
}
