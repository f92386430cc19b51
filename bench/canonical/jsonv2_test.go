//go:build goexperiment.jsonv2

package canonicalbench

import (
	"encoding/json/jsontext"
	"testing"
)

// extraGenericImpls adds Go's own RFC 8785 canonicalizer, jsontext.Value.Canonicalize, alone,
// on a reused buffer.
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
