// Package canonical turns request bodies into their canonical form (RFC 8785 JSON, sorted form
// fields, or raw bytes) and frames them with the rest of the request into a versioned SHA-256
// fingerprint. Generated code calls it; so does the runtime for generic (schema-less) values.
package canonical

// Version is the fingerprint algorithm version. It is stored with every idempotency record, so
// a future change of the framing or canonical form is detected (and the old records handled)
// instead of surfacing as a wave of false 422 mismatches.
const Version uint16 = 1

// Fingerprint is the SHA-256 digest of a request's framing, with the algorithm version that
// produced it.
type Fingerprint struct {
	Version uint16
	Sum     [32]byte
}
