package fptest

import (
	"net/http"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
)

// Fingerprinter computes a corpus request's fingerprint, or refuses it.
type Fingerprinter func(c Request, r *http.Request) (canonical.Fingerprint, error)

// Run is the fingerprint of an operation's generated decode function, called as the generated
// handler calls it: gen.Input reset on the request, the request line framed by Begin from the
// operation's settings, then decode, then Sum.
func Run[R any](op *runtime.Operation, decode func(*gen.Input) (R, error)) Fingerprinter {
	m := &gen.Matcher{}
	return func(c Request, r *http.Request) (canonical.Fingerprint, error) {
		var in gen.Input
		in.Reset(r, []byte(c.Body), c.MediaType, c.DeclaredType(), nil, m)
		in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
		if _, err := decode(&in); err != nil {
			in.Release()
			return canonical.Fingerprint{}, err
		}
		return in.Sum(), nil
	}
}

// ByOp dispatches each request to the Fingerprinter of its operation.
func ByOp(ops map[string]Fingerprinter) Fingerprinter {
	return func(c Request, r *http.Request) (canonical.Fingerprint, error) { return ops[c.Op](c, r) }
}

// Decode runs an operation's generated decode function on r with body (of the media type mt, ""
// for none, which is also the declared entry) as the generated handler does, and returns the
// decoded request and its fingerprint, or the refusal.
func Decode[R any](op *runtime.Operation, decode func(*gen.Input) (R, error), r *http.Request, mt string, body []byte) (R, canonical.Fingerprint, error) {
	var in gen.Input
	in.Reset(r, body, mt, mt, nil, nil)
	in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
	v, err := decode(&in)
	if err != nil {
		in.Release()
		return v, canonical.Fingerprint{}, err
	}
	return v, in.Sum(), nil
}
