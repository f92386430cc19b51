package fptest

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

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
// for none; r's Content-Type when it names mt) as the runtime does (runtime.Fingerprint), and
// returns the decoded request and its fingerprint, or the refusal.
func Decode[R any](op *runtime.Operation, decode func(*gen.Input) (R, error), r *http.Request, mt string, body []byte) (R, canonical.Fingerprint, error) {
	withBody(r, mt, body)
	return runtime.Fingerprint(op, decode, r)
}

// BodyKey is Decode for an operation whose key is in the body: it returns the decoded request
// and the key the decode function reported, and whether the body carried one
// (gen.Input.BodyKey, which the runtime reads after decoding), or the refusal.
func BodyKey[R any](op *runtime.Operation, decode func(*gen.Input) (R, error), r *http.Request, mt string, body []byte) (v R, key string, present bool, err error) {
	withBody(r, mt, body)
	v, _, err = runtime.Fingerprint(op, func(in *gen.Input) (R, error) {
		v, err := decode(in)
		key, present = in.BodyKey()
		return v, err
	}, r)
	if err != nil {
		return v, "", false, err
	}
	return v, key, present, nil
}

// Reencoded runs decode on r with body (of the media type mt, "" for none; r's Content-Type
// when it names mt) as runtime.Middleware does (gen.Input.Reencode, through runtime.Fingerprint),
// and returns the decoded request, its fingerprint, and the body the wrapped handler reads in
// place of body, with the Content-Type it goes with ("" for r's own), or the refusal.
func Reencoded[R any](op *runtime.Operation, decode func(*gen.Input) (R, error), r *http.Request, mt string, body []byte) (v R, fp canonical.Fingerprint, delivered []byte, contentType string, err error) {
	withBody(r, mt, body)
	v, fp, err = runtime.Fingerprint(op, func(in *gen.Input) (R, error) {
		in.Reencode()
		v, err := decode(in)
		if err == nil {
			delivered, contentType = in.ReencodedBody()
		}
		return v, err
	}, r)
	if err != nil {
		return v, canonical.Fingerprint{}, nil, "", err
	}
	return v, fp, delivered, contentType, nil
}

// withBody makes body r's body, of the media type mt: r's Content-Type when it names mt (with
// its parameters, a multipart boundary), else mt.
func withBody(r *http.Request, mt string, body []byte) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	if mt == "" {
		return
	}
	if have, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || !strings.EqualFold(have, mt) {
		r.Header.Set("Content-Type", mt)
	}
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
