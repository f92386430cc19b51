//go:build goexperiment.jsonv2

package canonicalbench

import (
	"crypto/sha256"
	"encoding/json/jsontext"
	"testing"
)

// extraFingerprintImpls adds Go's own RFC 8785 canonicalizer, jsontext.Value.Canonicalize, on
// a reused buffer, + SHA-256.
func extraFingerprintImpls() []impl {
	return []impl{{name: "jsontext", run: func(b *testing.B, raw []byte) {
		var buf jsontext.Value
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			buf = append(buf[:0], raw...)
			if err := buf.Canonicalize(); err != nil {
				b.Fatal(err)
			}
			sink = sha256.Sum256(buf)
		}
	}}}
}

// extraGenericImpls adds jsontext.Value.Canonicalize alone, on a reused buffer.
func extraGenericImpls() []impl {
	return []impl{{name: "jsontext", run: func(b *testing.B, raw []byte) {
		var buf jsontext.Value
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			buf = append(buf[:0], raw...)
			if err := buf.Canonicalize(); err != nil {
				b.Fatal(err)
			}
		}
	}}}
}
