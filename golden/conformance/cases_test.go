package conformance

// The shared request-sequence cases about request identity, replayed at the fingerprint layer
// on the generated code: no database, no HTTP server; each request is
// routed by the generated operations' patterns, decoded and fingerprinted by the generated decode
// function, as the generated handlers do before they call the runtime. internal/testkit/conformance runs every case end to end against PostgreSQL.

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/cases"
	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
)

// fingerprinter decodes and fingerprints a request the way the generated handler of one
// operation does; errors are the decoder's (400 body-invalid).
type fingerprinter func(r *http.Request, mediaType string, body []byte) (canonical.Fingerprint, error)

// typed runs one operation's generated decode function.
func typed[R any](op *runtime.Operation, decode func(*gen.Input) (R, error)) fingerprinter {
	return func(r *http.Request, mediaType string, body []byte) (canonical.Fingerprint, error) {
		_, fp, err := fptest.Decode(op, decode, r, mediaType, body)
		return fp, err
	}
}

// operations pairs every operation with its generated decode function.
var operations = []struct {
	op *runtime.Operation
	fp fingerprinter
}{
	{operationCreateCharge(), typed(operationCreateCharge(), decodeCreateCharge)},
	{operationCreateOrder(), typed(operationCreateOrder(), decodeCreateOrder)},
	{operationCreatePayment(), typed(operationCreatePayment(), decodeCreatePayment)},
	{operationCreateRefund(), typed(operationCreateRefund(), decodeCreateRefund)},
	{operationCreateProviderCharge(), typed(operationCreateProviderCharge(), decodeCreateProviderCharge)},
	{operationCreateTransfer(), typed(operationCreateTransfer(), decodeCreateTransfer)},
}

// fingerprintRequest routes method and path through a ServeMux holding the operation table's
// patterns (so path parameters reach the request as they do in the generated handlers), then
// decodes and fingerprints body as that operation's handler does.
func fingerprintRequest(method, path, mediaType string, body []byte) (canonical.Fingerprint, error) {
	var fp canonical.Fingerprint
	err := fmt.Errorf("no operation for %s %s", method, path)
	mux := http.NewServeMux()
	for _, o := range operations {
		mux.HandleFunc(o.op.Method+" "+o.op.Path, func(_ http.ResponseWriter, r *http.Request) {
			fp, err = o.fp(r, mediaType, body)
		})
	}
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, nil))
	return fp, err
}

// reference is a `${N.field}` reference to an earlier step's response: at this layer there is
// no response, so each reference becomes a distinct stand-in value.
var reference = regexp.MustCompile(`\$\{(\d+)\.(\w+)\}`)

// TestCases replays the request sequences of the cases about request identity: a body the
// decoder refuses must be expected as 400 body-invalid; otherwise, for each tenant and
// idempotency key, the first fingerprint is recorded, and a later request must be expected as a
// replay when its fingerprint is equal and as a 422 payload-mismatch when it differs.
func TestCases(t *testing.T) {
	for _, name := range []string{
		"001-first-request-executes",
		"002-retry-replays-stored-response",
		"003-key-order-and-whitespace-replay",
		"004-nested-order-replays-array-order-mismatches",
		"005-changed-amount-is-rejected",
		"013-excluded-field-ignored",
		"014-number-spellings",
		"015-string-escapes",
		"016-duplicate-member-names",
		"018-form-body",
		"019-path-parameters-are-part-of-the-request",
		"020-key-reused-on-another-operation",
		"022-different-keys-same-body",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := cases.ParseFile(filepath.Join("..", "..", "testdata", "cases", name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			recorded := map[string]canonical.Fingerprint{}
			for i, s := range c.Steps {
				var tenant, key, mediaType string
				for _, h := range s.Request.Header {
					switch http.CanonicalHeaderKey(h.Name) {
					case "Authorization":
						tenant = h.Value
					case "Idempotency-Key":
						key = h.Value
					case "Content-Type":
						mediaType, _, _ = mime.ParseMediaType(h.Value)
					}
				}
				path := reference.ReplaceAllString(s.Request.Path, "ref-$1-$2")
				fp, err := fingerprintRequest(s.Request.Method, path, mediaType, s.Request.Body)
				replay := s.Expect.HasSameAs
				for _, h := range s.Expect.Headers {
					replay = replay || strings.EqualFold(h.Name, "Idempotent-Replayed") && h.Value == "true"
				}
				var ce *canonical.Error
				switch {
				case err != nil:
					if !errors.As(err, &ce) || s.Expect.Problem != "body-invalid" {
						t.Errorf("step %d (line %d): refused with %v, expected %+v", i, s.Line, err, s.Expect)
					}
					continue
				case s.Expect.Problem == "body-invalid":
					t.Errorf("step %d (line %d): accepted, expected body-invalid", i, s.Line)
					continue
				}
				first, ok := recorded[tenant+"\x00"+key]
				switch {
				case !ok:
					if replay || s.Expect.Problem != "" {
						t.Errorf("step %d (line %d): first request for its key, expected %+v", i, s.Line, s.Expect)
					}
					recorded[tenant+"\x00"+key] = fp
				case first == fp:
					if !replay {
						t.Errorf("step %d (line %d): fingerprint equals the recorded one (replay), expected %+v", i, s.Line, s.Expect)
					}
				default:
					if s.Expect.Problem != "payload-mismatch" {
						t.Errorf("step %d (line %d): fingerprint differs (mismatch), expected %+v", i, s.Line, s.Expect)
					}
				}
			}
		})
	}
}
