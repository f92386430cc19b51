//go:build goexperiment.jsonv2

package conformance

import (
	"crypto/sha256"
	"encoding/json/jsontext"
	"testing"
)

// extraFingerprintImpls adds Go's own RFC 8785 canonicalizer (GOEXPERIMENT=jsonv2):
// jsontext.Value.Canonicalize on a reused buffer + SHA-256.
func extraFingerprintImpls() []impl {
	return []impl{{name: "jsontext", run: func(b *testing.B, raw []byte) {
		var buf jsontext.Value
		loop(b, raw, func() {
			buf = append(buf[:0], raw...)
			if err := buf.Canonicalize(); err != nil {
				b.Fatal(err)
			}
			sink = sha256.Sum256(buf)
		})
	}}}
}
