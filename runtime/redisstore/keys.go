package redisstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/store"
)

// keyName is the Redis key of a record: prefix, then the record's digest (store.DigestOf,
// the 128 bits pgstore stores as key_id) as a UUID inside a hash tag:
// "idemgen:lease:{1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b}". No raw scope or key is ever part of a
// name, so SCAN, MONITOR, SLOWLOG, the AOF and `redis-cli --bigkeys` show none (a scope is often
// a credential); support tools that know (tenant, key) compute the same name. The braces make
// Redis Cluster hash the name by the digest alone, so each record's commands run on one node
// and records spread evenly over the slots.
func keyName(prefix string, id store.ID) string {
	return prefix + "{" + store.DigestOf(id).KeyUUID() + "}"
}

// tombstoneName is the key of the tombstone of the record named record (keyName): the same
// name with ":t" after the hash tag, so the record's scripts touch both on one node.
func tombstoneName(record string) string { return record + ":t" }

// isTombstoneName reports whether a key of the store's prefix is a tombstone's.
func isTombstoneName(k string) bool { return strings.HasSuffix(k, "}:t") }

// checkPrefix refuses a key prefix with a brace: the record's hash tag must be the first one in
// its name.
func checkPrefix(p string) error {
	if strings.ContainsAny(p, "{}") {
		return fmt.Errorf("redisstore: key prefix %q contains a brace", p)
	}
	return nil
}

// fingerprintBytes is a fingerprint as stored: the 2-byte version, big-endian, then the sum.
func fingerprintBytes(fp canonical.Fingerprint) string {
	var b [2 + len(fp.Sum)]byte
	binary.BigEndian.PutUint16(b[:2], fp.Version)
	copy(b[2:], fp.Sum[:])
	return string(b[:])
}

func parseFingerprint(s string) (canonical.Fingerprint, error) {
	var fp canonical.Fingerprint
	if len(s) != 2+len(fp.Sum) {
		return fp, fmt.Errorf("fingerprint of %d bytes", len(s))
	}
	fp.Version = binary.BigEndian.Uint16([]byte(s[:2]))
	copy(fp.Sum[:], s[2:])
	return fp, nil
}

// micros formats d in whole microseconds (at least 1 for a positive d).
func micros(d time.Duration) string {
	us := d.Microseconds()
	if d > 0 && us == 0 {
		us = 1
	}
	return strconv.FormatInt(us, 10)
}

// errFormat is a value in Redis that this package did not write (or a newer version wrote):
// the lease store reports it, the cache treats it as a miss.
var errFormat = errors.New("redisstore: unexpected value in Redis")

// Cached values (the replay cache): one completed record, encoded as
//
//	1 byte      format version (1)
//	uvarint     length of the operation ID, then the ID
//	2 + 32      fingerprint version (big-endian) and sum
//	varint      fencing token
//	uvarint     response status
//	1 byte      1 when the body was omitted
//	uvarint     length of the headers (JSON), then the headers
//	rest        the body
const cacheFormat = 1

func encodeRecord(rec *store.Record) []byte {
	r := &rec.Response
	b := make([]byte, 0, 1+binary.MaxVarintLen64*4+len(rec.Operation)+34+1+len(r.Header)+len(r.Body))
	b = append(b, cacheFormat)
	b = binary.AppendUvarint(b, uint64(len(rec.Operation)))
	b = append(b, rec.Operation...)
	b = binary.BigEndian.AppendUint16(b, rec.Fingerprint.Version)
	b = append(b, rec.Fingerprint.Sum[:]...)
	b = binary.AppendVarint(b, rec.Token)
	b = binary.AppendUvarint(b, uint64(r.Status))
	if r.BodyOmitted {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Header)))
	b = append(b, r.Header...)
	return append(b, r.Body...)
}

// decodeRecord decodes a cached value into a completed record; errFormat when it is not one.
// The record's byte slices are copies, never views into b.
func decodeRecord(b []byte) (store.Record, error) {
	rec := store.Record{State: store.Completed}
	bad := func() (store.Record, error) { return store.Record{}, errFormat }
	if len(b) == 0 || b[0] != cacheFormat {
		return bad()
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return bad()
	}
	rec.Operation = string(b[k : k+int(n)])
	b = b[k+int(n):]
	if len(b) < 34 {
		return bad()
	}
	rec.Fingerprint.Version = binary.BigEndian.Uint16(b[:2])
	copy(rec.Fingerprint.Sum[:], b[2:34])
	b = b[34:]
	tok, k := binary.Varint(b)
	if k <= 0 {
		return bad()
	}
	rec.Token, b = tok, b[k:]
	status, k := binary.Uvarint(b)
	if k <= 0 || status < 100 || status > 999 || len(b) < k+1 {
		return bad()
	}
	rec.Response.Status = int(status)
	switch b[k] {
	case 0:
	case 1:
		rec.Response.BodyOmitted = true
	default:
		return bad()
	}
	b = b[k+1:]
	n, k = binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return bad()
	}
	if n > 0 {
		rec.Response.Header = append([]byte(nil), b[k:k+int(n)]...)
	}
	b = b[k+int(n):]
	switch {
	case rec.Response.BodyOmitted && len(b) > 0:
		return bad()
	case !rec.Response.BodyOmitted:
		rec.Response.Body = append([]byte{}, b...)
	}
	return rec, nil
}
