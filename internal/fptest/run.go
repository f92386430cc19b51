package fptest

import (
	"bytes"
	"io"
	"net/http"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
)

// Fingerprinter computes a corpus request's fingerprint, or refuses it.
type Fingerprinter func(c Request, r *http.Request) (canonical.Fingerprint, error)

// Run is the fingerprint of an operation's generated decode function, computed as the runtime
// computes it for the request (runtime.Fingerprint, the runtime's one decode path): the body and
// media type from the request, the declared entry that admits it, the path values found by the
// operation's path template.
func Run[R any](op *runtime.Operation, decode func(*gen.Input) (R, error)) Fingerprinter {
	return func(c Request, r *http.Request) (canonical.Fingerprint, error) {
		_, fp, err := runtime.Fingerprint(op, decode, r)
		return fp, err
	}
}

// ByOp dispatches each request to the Fingerprinter of its operation.
func ByOp(ops map[string]Fingerprinter) Fingerprinter {
	return func(c Request, r *http.Request) (canonical.Fingerprint, error) { return ops[c.Op](c, r) }
}

// Decode runs an operation's generated decode function on r with body (of the media type mt, ""
// for none) as the runtime does (runtime.Fingerprint), and returns the decoded request and its
// fingerprint, or the refusal.
func Decode[R any](op *runtime.Operation, decode func(*gen.Input) (R, error), r *http.Request, mt string, body []byte) (R, canonical.Fingerprint, error) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	if mt != "" {
		r.Header.Set("Content-Type", mt)
	}
	return runtime.Fingerprint(op, decode, r)
}
