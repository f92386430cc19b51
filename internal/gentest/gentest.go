// Package gentest helps the hand-written tests of generated packages (golden/*) compute what the
// runtime computes for a request: its decoded value and its fingerprint.
package gentest

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/canonical"
)

// Fingerprint returns the fingerprint of a request to op at path ("": op.Path) with the given media type and
// body (mediaType "" sends no Content-Type), decoded by decode; header holds extra header name,
// value pairs. A decode error fails the test.
func Fingerprint[T any](t testing.TB, op *runtime.Operation, decode runtime.DecodeFunc[T], path, mediaType, body string, header ...string) canonical.Fingerprint {
	t.Helper()
	_, fp, err := Decode(op, decode, path, mediaType, body, header...)
	if err != nil {
		t.Fatalf("%s %s: %v", op.ID, body, err)
	}
	return fp
}

// Decode runs decode on a request to op at path as the runtime would, and returns the decoded
// value, its fingerprint, and the decoder's error.
func Decode[T any](op *runtime.Operation, decode runtime.DecodeFunc[T], path, mediaType, body string, header ...string) (T, canonical.Fingerprint, error) {
	if path == "" {
		path = op.Path
	}
	r := httptest.NewRequest(op.Method, path, strings.NewReader(body))
	if mediaType != "" {
		r.Header.Set("Content-Type", mediaType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	return runtime.Fingerprint(op, decode, r)
}
