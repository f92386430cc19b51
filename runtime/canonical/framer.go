package canonical

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// Framer builds the input of a fingerprint (docs/design.md section 3) and hashes it with SHA-256. The
// framing is unambiguous: the two-byte big-endian Version, then fields each written as a
// one-byte tag, the length in bytes as an unsigned varint (encoding/binary.AppendUvarint, the
// protobuf encoding) and the bytes, in the fixed order Begin (operationId, method, path
// template), PathParam (template order), Query (sorted by name), MediaType, Header
// (fingerprint.headers order), then at most one body field, then the deepObject query
// parameters that are present (QueryObject, in parameter order: their canonical value is known
// only once generated code has decoded them). An operation without deepObject parameters
// never writes that last field, so its fingerprints are those of earlier versions. Varint lengths keep the frame of
// a small request within as few SHA-256 blocks as possible.
//
// A Framer is used once: Begin … Sum. Its buffer comes from a pool, so a fingerprint costs no
// allocation once the pool is warm. The zero value is ready for Begin.
type Framer struct {
	p    *[]byte
	b    []byte
	body int
}

// Field tags of the framing. Changing them or their order changes Version.
const (
	tagOperation = 'O'
	tagMethod    = 'M'
	tagPath      = 'P'
	tagPathParam = 'p'
	tagQuery     = 'q'
	tagHeader    = 'h'
	tagValue     = 'v'
	tagMedia     = 'T'
	tagJSON      = 'J'
	tagForm      = 'F'
	tagRaw       = 'R'
	// tagMultipart is the canonical form of a multipart/form-data body: a JSON object of its
	// decoded parts, files as their content hash, name and type.
	tagMultipart = 'm'
	// tagQueryObject names a deepObject query parameter, whose canonical JSON value follows as
	// a tagJSON field.
	tagQueryObject = 'o'
)

// framePool holds frame buffers between requests; buffers that grew past maxPooled (large
// bodies) are dropped rather than kept alive.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooled = 256 << 10

// Begin starts a framing for the operation's operationId, HTTP method (upper case) and path
// template as written in the spec ("/v1/payments/{payment_id}/refunds").
func (f *Framer) Begin(operationID, method, pathTemplate string) {
	f.p = framePool.Get().(*[]byte)
	f.b = binary.BigEndian.AppendUint16((*f.p)[:0], Version)
	f.body = -1
	f.field(tagOperation, operationID)
	f.field(tagMethod, method)
	f.field(tagPath, pathTemplate)
}

func (f *Framer) field(tag byte, v string) {
	f.b = append(f.b, tag)
	f.b = binary.AppendUvarint(f.b, uint64(len(v)))
	f.b = append(f.b, v...)
}

// PathParam adds a path parameter's name and its value as the request carried it (decoded).
func (f *Framer) PathParam(name, value string) {
	f.field(tagPathParam, name)
	f.field(tagValue, value)
}

// Query adds a declared query parameter and its values in request order; nil values (absent)
// differ from one empty value (?name=).
func (f *Framer) Query(name string, values []string) {
	f.field(tagQuery, name)
	for _, v := range values {
		f.field(tagValue, v)
	}
}

// MediaType adds the request media type, lower case and without parameters.
func (f *Framer) MediaType(mediaType string) { f.field(tagMedia, mediaType) }

// Header adds a fingerprint.headers entry (canonical MIME name) and its values in request
// order; nil values (absent) differ from one empty value.
func (f *Framer) Header(name string, values []string) {
	f.field(tagHeader, name)
	for _, v := range values {
		f.field(tagValue, v)
	}
}

// BodyStart opens the canonical JSON body field and returns the buffer to append the body's
// canonical form to; hand the result to BodyEnd:
//
//	f.BodyEnd(appendCanonicalPaymentRequest(f.BodyStart(), &body))
func (f *Framer) BodyStart() []byte { return f.openBody(tagJSON) }

// openBody writes the body's tag and one byte for its length, which BodyEnd widens when the
// body turns out to be 128 bytes or longer.
func (f *Framer) openBody(tag byte) []byte {
	f.b = append(f.b, tag, 0)
	f.body = len(f.b)
	return f.b
}

// BodyEnd closes the body field opened by BodyStart; b is BodyStart's buffer with the body
// appended.
func (f *Framer) BodyEnd(b []byte) {
	n := uint64(len(b) - f.body)
	var lenBuf [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(lenBuf[:], n)
	if l > 1 {
		// Make room: move the body right by the extra length bytes.
		b = append(b, lenBuf[:l-1]...)
		copy(b[f.body+l-1:], b[f.body:len(b)-(l-1)])
	}
	copy(b[f.body-1:], lenBuf[:l])
	f.b = b
}

// QueryObjectStart adds a deepObject query parameter's name and opens the field of its
// canonical JSON value; append the value's canonical form to the result and hand it to BodyEnd.
func (f *Framer) QueryObjectStart(name string) []byte {
	f.field(tagQueryObject, name)
	return f.openBody(tagJSON)
}

// MultipartStart opens the canonical multipart body field (a JSON object of the decoded parts,
// in RFC 8785 form, files by content hash) and returns the buffer to append it to; hand the
// result to BodyEnd. Only multipart bodies write this field: no earlier fingerprint changes.
func (f *Framer) MultipartStart() []byte { return f.openBody(tagMultipart) }

// JSONBody adds the canonical form of a JSON body by the generic canonicalizer, leaving out
// what ex names (nil: nothing). It returns the *Error of a body that is not strict JSON.
func (f *Framer) JSONBody(body []byte, ex *Exclusion) error {
	b := f.BodyStart()
	b, err := AppendCanonicalExcluding(b, body, ex)
	f.BodyEnd(b)
	return err
}

// FormBody adds the canonical form of an application/x-www-form-urlencoded body (see
// AppendCanonicalForm), leaving out the fields named in exclude. It returns the *Error of a
// malformed body.
func (f *Framer) FormBody(body []byte, exclude ...string) error {
	b, err := AppendCanonicalForm(f.openBody(tagForm), body, exclude...)
	f.BodyEnd(b)
	return err
}

// FormFields adds the canonical form of a form body already parsed (see AppendFormFields), for
// a body whose excluded fields the caller has left out itself; it sorts fields in place. For the
// same fields it writes exactly what FormBody writes.
func (f *Framer) FormFields(fields []FormField) {
	f.BodyEnd(AppendFormFields(f.openBody(tagForm), fields))
}

// RawBody adds the body's exact bytes (fingerprint.body: raw, for signed bodies, and for media
// types other than JSON and form).
func (f *Framer) RawBody(body []byte) {
	f.b = append(f.b, tagRaw)
	f.b = binary.AppendUvarint(f.b, uint64(len(body)))
	f.b = append(f.b, body...)
}

// Sum returns the fingerprint of everything added and releases the buffer; the Framer may then
// Begin again.
func (f *Framer) Sum() Fingerprint {
	fp := Fingerprint{Version: Version, Sum: sha256.Sum256(f.b)}
	f.Release()
	return fp
}

// Release gives the buffer back without computing a fingerprint (a request refused after Begin);
// the Framer may then Begin again. Releasing a Framer that holds no buffer does nothing.
func (f *Framer) Release() {
	if f.p != nil && cap(f.b) <= maxPooled {
		*f.p = f.b[:0]
		framePool.Put(f.p)
	}
	f.p, f.b = nil, nil
}
