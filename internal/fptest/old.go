package fptest

import (
	"net/http"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
)

// Fingerprinter computes a corpus request's fingerprint, or refuses it.
type Fingerprinter func(c Request, r *http.Request) (canonical.Fingerprint, error)

// Op is one operation's code as generated before gen.Input: decoder, parameter parser and
// fingerprint function, plus what gen.Input.Begin needs and a function that frames the decoded
// body after Begin.
type Op[B, P any] struct {
	ID, Path       string
	Query, Headers []string
	// Decode decodes the body admitted by the declared media type; nil for raw bodies.
	Decode func(declared string, body []byte) (B, error)
	Parse  func(*http.Request) (P, error)
	Old    func(*http.Request, string, []byte, *P, *B) canonical.Fingerprint
	Body   func(in *gen.Input, v *B)
	// Optional: an empty body is absent (not decoded, framed as an empty raw body).
	Optional bool
}

func (o Op[B, P]) decode(c Request, r *http.Request) (B, P, error) {
	var v B
	var p P
	var err error
	if o.Decode != nil && !(o.Optional && c.Body == "") {
		if v, err = o.Decode(c.DeclaredType(), []byte(c.Body)); err != nil {
			return v, p, err
		}
	}
	p, err = o.Parse(r)
	return v, p, err
}

// Old is the fingerprint of the old generated handler.
func (o Op[B, P]) OldFingerprint(c Request, r *http.Request) (canonical.Fingerprint, error) {
	v, p, err := o.decode(c, r)
	if err != nil {
		return canonical.Fingerprint{}, err
	}
	return o.Old(r, c.MediaType, []byte(c.Body), &p, &v), nil
}

// Begin frames the request with gen.Input.Begin and the body with o.Body.
func (o Op[B, P]) Begin(c Request, r *http.Request) (canonical.Fingerprint, error) {
	v, _, err := o.decode(c, r)
	if err != nil {
		return canonical.Fingerprint{}, err
	}
	var in gen.Input
	in.Reset(r, []byte(c.Body), c.MediaType, c.DeclaredType(), nil, nil)
	in.Begin(o.ID, r.Method, o.Path, o.Query, o.Headers)
	if o.Optional && c.Body == "" {
		in.RawBody()
	} else {
		o.Body(&in, &v)
	}
	return in.Sum(), nil
}

// JSON adapts a generated JSON decoder to Op.Decode.
func JSON[B any](decode func([]byte) (B, error)) func(string, []byte) (B, error) {
	return func(_ string, b []byte) (B, error) { return decode(b) }
}

// NoBody adapts an operation without a request body.
func NoBody[P any](id, path string, query, headers []string, parse func(*http.Request) (P, error),
	old func(*http.Request, string, []byte, *P) canonical.Fingerprint) Op[struct{}, P] {
	return Op[struct{}, P]{ID: id, Path: path, Query: query, Headers: headers, Parse: parse,
		Old: func(r *http.Request, mt string, raw []byte, p *P, _ *struct{}) canonical.Fingerprint {
			return old(r, mt, raw, p)
		},
		Body: func(*gen.Input, *struct{}) {}}
}
