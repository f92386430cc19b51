// Package gentest helps the hand-written tests of generated packages (golden/*) compute what the
// runtime computes for a request: its decoded value and its fingerprint; and answer the
// runtime's problems through a generated ProblemWriter.
package gentest

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// Problems are the runtime's problems as it answers them, one per name, with the fields a
// writer fills a document from: a detail (none for internal, as the runtime sends none), a
// pointer for body-invalid and body-too-large, a Retry-After where the runtime sends one.
func Problems() []runtime.Problem {
	return []runtime.Problem{
		{Status: 400, Name: runtime.ProblemKeyMissing, Title: "Idempotency key missing", Detail: "The Idempotency-Key header is required."},
		{Status: 400, Name: runtime.ProblemKeyInvalid, Title: "Idempotency key invalid", Detail: "The Idempotency-Key header: the key has 300 characters; the most is 255."},
		{Status: 400, Name: runtime.ProblemBodyInvalid, Title: "Request body invalid", Detail: "invalid body at /name: a string is required", Pointer: "/name"},
		{Status: 401, Name: runtime.ProblemUnauthenticated, Title: "Unauthenticated", Detail: "The request could not be attributed to a tenant; authenticate and retry."},
		{Status: 409, Name: runtime.ProblemInFlight, Title: "Request with this idempotency key is in flight", Detail: "A request with this key is still being processed; retry after the Retry-After delay.", RetryAfter: time.Second},
		{Status: 410, Name: runtime.ProblemResultExpired, Title: "Result of this idempotency key expired", Detail: "A request with this key completed at Mon, 30 Nov 2026 10:00:00 GMT with a 2xx answer; answers are kept for 24h0m0s and this one is gone, and the operation is not run again for this key."},
		{Status: 412, Name: runtime.ProblemKeyExpired, Title: "Idempotency key older than the retention", Detail: "The first attempt is older than the retention."},
		{Status: 413, Name: runtime.ProblemBodyTooLarge, Title: "Request body too large", Detail: "The body has 2000000 bytes; the limit is 1048576."},
		{Status: 415, Name: runtime.ProblemMediaTypeUnsupported, Title: "Unsupported media type", Detail: `Content-Type "text/plain" is not one of application/json.`},
		{Status: 422, Name: runtime.ProblemPayloadMismatch, Title: "Idempotency key reused with a different request", Detail: "The key was used with a different request."},
		{Status: 429, Name: runtime.ProblemRateLimited, Title: "Too many new idempotency keys", Detail: "This tenant has created too many new idempotency keys in the current interval.", RetryAfter: 3 * time.Second},
		{Status: 500, Name: runtime.ProblemInternal, Title: "Internal server error"},
		{Status: 503, Name: runtime.ProblemStoreUnavailable, Title: "Idempotency store unavailable", Detail: "The idempotency store cannot be reached; the request was not processed.", RetryAfter: time.Second},
	}
}

// WriteProblem answers p with w as the runtime would, and returns the recorded answer.
func WriteProblem(w runtime.ProblemWriter, p runtime.Problem) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	w(rec, httptest.NewRequest("POST", "/", nil), p)
	return rec
}
