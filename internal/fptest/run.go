package fptest

import (
	"net/http"
	"reflect"

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

// Reencoded runs decode on r with body as runtime.Middleware does (gen.Input.Reencode), and
// returns the decoded request, its fingerprint, and the body the wrapped handler reads in place
// of body, with the Content-Type it goes with ("" for r's own), or the refusal.
func Reencoded[R any](op *runtime.Operation, decode func(*gen.Input) (R, error), r *http.Request, mt string, body []byte) (v R, fp canonical.Fingerprint, delivered []byte, contentType string, err error) {
	var in gen.Input
	in.Reset(r, body, mt, mt, nil, nil)
	in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
	in.Reencode()
	v, err = decode(&in)
	if err != nil {
		in.Release()
		return v, canonical.Fingerprint{}, nil, "", err
	}
	delivered, contentType = in.ReencodedBody()
	return v, in.Sum(), delivered, contentType, nil
}

// WithoutExtra zeroes, in the value p points to and everything it holds, every field of type
// canonical.Members: the undeclared members that generated types keep for the fingerprint only
// (json:"-"), which a handler decoding the body with encoding/json does not get.
func WithoutExtra(p any) {
	clearMembers(reflect.ValueOf(p))
}

var membersType = reflect.TypeFor[canonical.Members]()

func clearMembers(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			clearMembers(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			switch {
			case !f.CanSet():
			case f.Type() == membersType:
				f.SetZero()
			default:
				clearMembers(f)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			clearMembers(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			clearMembers(e)
			v.SetMapIndex(k, e)
		}
	}
}
