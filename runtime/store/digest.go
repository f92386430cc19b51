package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Digest is the fixed-size name of a record, derived from its ID, under which stores keep it
// instead of the raw scope and key: a scope is often a credential or close to one (an API key,
// a bearer token, a customer id), and a store's names travel to places the records do not (a
// database's log, Redis's MONITOR, SLOWLOG and AOF, a SCAN by an operator). Every store
// derives its names from the same digests, so support tools that know (tenant, key) find the
// record in any of them.
type Digest struct {
	// Scope is the first 64 bits (big-endian) of SHA-256 over "idemgen/scope/v1", a zero byte
	// and the scope: records of one scope share it (pgstore's scope_id, the column a distributed
	// engine shards by).
	Scope int64
	// Key is the first 128 bits of SHA-256 over "idemgen/record/v1", a zero byte, the scope's
	// length in bytes as a big-endian uint64, the scope and the key (pgstore's key_id; the name
	// of the record in Redis). Two records' Keys collide with probability about n²/2¹²⁹ for n
	// records.
	Key [16]byte
	// Lock is the next 64 bits of the Key's SHA-256, independent of Key: pgstore's advisory lock
	// key for claims of the record.
	Lock int64
}

// DigestOf returns id's digests.
func DigestOf(id ID) Digest {
	var d Digest
	// The framings are hashed from one buffer, on the stack for scopes and keys of usual sizes.
	const scopeTag, recordTag = "idemgen/scope/v1\x00", "idemgen/record/v1\x00"
	var stack [256]byte
	buf := stack[:0]
	if n := len(recordTag) + 8 + len(id.Scope) + len(id.Key); n > len(stack) {
		buf = make([]byte, 0, n)
	}
	buf = append(append(buf, scopeTag...), id.Scope...)
	sum := sha256.Sum256(buf)
	d.Scope = int64(binary.BigEndian.Uint64(sum[:8]))
	buf = append(buf[:0], recordTag...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(id.Scope)))
	buf = append(append(buf, id.Scope...), id.Key...)
	sum = sha256.Sum256(buf)
	copy(d.Key[:], sum[:16])
	d.Lock = int64(binary.BigEndian.Uint64(sum[16:24]))
	return d
}

// ScopeDigest returns the Scope digest of scope alone (the same as DigestOf's for any key):
// what per-tenant counters are kept under.
func ScopeDigest(scope string) int64 {
	const scopeTag = "idemgen/scope/v1\x00"
	var stack [256]byte
	buf := stack[:0]
	if n := len(scopeTag) + len(scope); n > len(stack) {
		buf = make([]byte, 0, n)
	}
	sum := sha256.Sum256(append(append(buf, scopeTag...), scope...))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// KeyUUID returns Key in the text form of a UUID (8-4-4-4-12 lowercase hex digits), as
// PostgreSQL prints pgstore's key_id column and as Redis key names carry it.
func (d Digest) KeyUUID() string {
	var b [36]byte
	hex.Encode(b[0:8], d.Key[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], d.Key[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], d.Key[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], d.Key[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], d.Key[10:16])
	return string(b[:])
}
