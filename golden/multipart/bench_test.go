package multipart

import (
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/runtime/gen"
)

// letterJSON is corpus[18]'s letter as a JSON body.
const letterJSON = `{"to":{"name":"Ada","zip":"94107"},"color":true,"metadata":{"k":"v"},"campaign":"fall"}`

// BenchmarkDecodeLetter decodes and fingerprints one letter (createLetter: one schema for JSON
// and multipart) sent as JSON and as multipart/form-data: the cost of reading a body part by part
// (mime/multipart, then the same JSON decoders for the JSON parts).
func BenchmarkDecodeLetter(b *testing.B) {
	mp := corpus[18]
	for _, c := range []struct {
		name, mediaType, contentType, body string
	}{
		{"json", "application/json", "application/json", letterJSON},
		{"multipart", mt, mt + "; boundary=idemgen-test-boundary", mp.Body},
	} {
		b.Run(c.name, func(b *testing.B) {
			op := operationCreateLetter()
			r := httptest.NewRequest("POST", "/letters", nil)
			r.Header.Set("Content-Type", c.contentType)
			raw := []byte(c.body)
			m := &gen.Matcher{}
			var in gen.Input
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			// By hand, not runtime.Fingerprint: that reads the body and allocates an Input per call, which is not measured here.
			for b.Loop() {
				in.Reset(r, raw, c.mediaType, c.mediaType, nil, m)
				in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
				if _, err := decodeCreateLetter(&in); err != nil {
					b.Fatal(err)
				}
				in.Sum()
			}
		})
	}
}

// BenchmarkDecodeUpload decodes and fingerprints a document upload with a small PDF, repeated tags, a JSON part and a schema-less part
// (createDocument): the SHA-256 of the file is part of the cost.
func BenchmarkDecodeUpload(b *testing.B) {
	c := corpus[6]
	op := operationCreateDocument()
	r := c.HTTP()
	raw := []byte(c.Body)
	m := &gen.Matcher{}
	var in gen.Input
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	// By hand, not runtime.Fingerprint: that reads the body and allocates an Input per call, which is not measured here.
	for b.Loop() {
		in.Reset(r, raw, mt, mt, nil, m)
		in.Begin(op.ID, op.Method, op.Path, op.Query, op.FingerprintHeaders)
		if _, err := decodeCreateDocument(&in); err != nil {
			b.Fatal(err)
		}
		in.Sum()
	}
}
