package multipart

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
)

// sentPart is a part as mime/multipart reads it: what a handler's ParseMultipartForm sees.
type sentPart struct {
	name, filename, ctype string
	data                  []byte
}

// readParts reads every part of body with mime/multipart, raw (no Content-Transfer-Encoding
// applied, as the strict decoder reads them) or as ParseMultipartForm does (applied).
func readParts(body []byte, boundary string, raw bool) ([]sentPart, error) {
	r := multipart.NewReader(bytes.NewReader(body), boundary)
	var out []sentPart
	for {
		next := r.NextPart
		if raw {
			next = r.NextRawPart
		}
		p, err := next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, err
		}
		out = append(out, sentPart{p.FormName(), p.FileName(), p.Header.Get("Content-Type"), data})
	}
}

// sameContent reports whether a part's content for the handler is the one sent: the same bytes,
// or the same JSON document re-encoded.
func sameContent(sent, got []byte) bool {
	if bytes.Equal(sent, got) {
		return true
	}
	a, errA := canonical.AppendCanonical(nil, sent)
	b, errB := canonical.AppendCanonical(nil, got)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// reencodesMultipart checks the promise of the Middleware for a multipart body: when the strict
// decoder accepts it, mime/multipart (what ParseMultipartForm and the binders built on it use)
// reads the body the wrapped handler gets as the same parts, in order, with their names,
// filenames, Content-Types and contents (JSON parts re-encoded), whatever transfer encoding a
// part claimed; and the decoder reads it again to the same value and fingerprint.
func reencodesMultipart[R any](op *runtime.Operation, decode func(*gen.Input) (R, error)) func(t *testing.T, ctype string, data []byte) {
	return func(t *testing.T, ctype string, data []byte) {
		r := httptest.NewRequest(op.Method, op.Path, nil)
		r.Header.Set("Content-Type", ctype)
		v, fp, delivered, newType, err := fptest.Reencoded(op, decode, r, mt, data)
		if err != nil {
			return
		}
		_, params, _ := mime.ParseMediaType(ctype)
		boundary := params["boundary"]
		r2 := httptest.NewRequest(op.Method, op.Path, nil)
		r2.Header.Set("Content-Type", ctype)
		if newType != "" {
			_, p2, err := mime.ParseMediaType(newType)
			if err != nil {
				t.Fatalf("%s: new Content-Type %q: %v", op.ID, newType, err)
			}
			boundary = p2["boundary"]
			r2.Header.Set("Content-Type", newType)
		}
		sent, err := readParts(data, params["boundary"], true)
		if err != nil {
			t.Fatalf("%s: the decoder accepted a body mime/multipart refuses: %v", op.ID, err)
		}
		got, err := readParts(delivered, boundary, false)
		if err != nil || len(got) != len(sent) {
			t.Fatalf("%s: mime/multipart reads the re-encoding %q of %q: %d parts (sent %d), %v", op.ID, delivered, data, len(got), len(sent), err)
		}
		for i := range sent {
			s, g := sent[i], got[i]
			if s.name != g.name || s.filename != g.filename || s.ctype != g.ctype || !sameContent(s.data, g.data) {
				t.Fatalf("%s: part %d sent as %+q, mime/multipart reads the re-encoding as %+q", op.ID, i, s, g)
			}
		}
		v2, fp2, again, _, err := fptest.Reencoded(op, decode, r2, mt, delivered)
		if err != nil || fp2 != fp || !reflect.DeepEqual(v2, v) {
			t.Fatalf("%s: the re-encoding %q of %q decodes again with %v, fingerprint equal %v, value equal %v", op.ID, delivered, data, err, fp2 == fp, reflect.DeepEqual(v2, v))
		}
		if newType == "" && !bytes.Equal(again, delivered) {
			t.Fatalf("%s: re-encoding is not a fixed point:\n%q\n%q", op.ID, delivered, again)
		}
	}
}

var multipartOperations = []func(t *testing.T, ctype string, data []byte){
	reencodesMultipart(operationCreateCatalogImage(), decodeCreateCatalogImage),
	reencodesMultipart(operationCreateDocument(), decodeCreateDocument),
	reencodesMultipart(operationCreateLetter(), decodeCreateLetter),
}

const testType = mt + "; boundary=idemgen-test-boundary"

// A part that claims quoted-printable is read raw by the decoder (RFC 7578 section 4.7
// deprecates the header) and decoded by mime/multipart's NextPart, which ParseMultipartForm
// uses: the handler gets the bytes the decoder read, without the header. A JSON part reaches it
// re-encoded, with the excluded members still in.
func TestReencodedMultipart(t *testing.T) {
	qp := "--idemgen-test-boundary\r\nContent-Disposition: form-data; name=\"title\"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=41BC\r\n" +
		"--idemgen-test-boundary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\n\r\n%PDF\r\n--idemgen-test-boundary--\r\n"
	naive, err := readParts([]byte(qp), "idemgen-test-boundary", false)
	if err != nil || string(naive[0].data) != "ABC" {
		t.Fatalf("mime/multipart no longer decodes quoted-printable: %q %v", naive, err)
	}
	r := httptest.NewRequest("POST", "/documents", nil)
	r.Header.Set("Content-Type", testType)
	v, _, delivered, _, err := fptest.Reencoded(operationCreateDocument(), decodeCreateDocument, r, mt, []byte(qp))
	if err != nil || v.Body.Title != "=41BC" {
		t.Fatalf("%+v %v", v, err)
	}
	handler, err := readParts(delivered, "idemgen-test-boundary", false)
	if err != nil || string(handler[0].data) != "=41BC" || strings.Contains(string(delivered), "Transfer-Encoding") {
		t.Errorf("the handler reads %q as %q (%v)", delivered, handler, err)
	}
	image := body(part{"request", "", "application/json", `{ "idempotency_key": "k-1", "object_id": "obj_1", "is_primary": true }`}, jpeg)
	r.Header.Set("Content-Type", testType)
	_, _, delivered, _, err = fptest.Reencoded(operationCreateCatalogImage(), decodeCreateCatalogImage, r, mt, []byte(image))
	parts, _ := readParts(delivered, "idemgen-test-boundary", false)
	var req CreateCatalogImageRequest
	if err != nil || len(parts) != 2 || json.Unmarshal(parts[0].data, &req) != nil || req.IdempotencyKey == nil || string(parts[1].data) != jpeg.data {
		t.Errorf("catalog image: %q %v", parts, err)
	}
	variant := body(part{"title", "", "", "T"}, pdf, part{"Title", "", "", "U"})
	if _, _, _, _, err := fptest.Reencoded(operationCreateDocument(), decodeCreateDocument, r, mt, []byte(variant)); err == nil {
		t.Error("a case variant of a declared part was accepted")
	}
	for _, f := range multipartOperations {
		f(t, testType, []byte(body(part{"title", "", "", "T"}, pdf, part{"meta", "", "application/json", `{"source":"s","x":1.0}`}, reqJSON, jpeg)))
	}
}

// FuzzReencodedMultipart is the differential fuzzer of multipart bodies (Square's JSON part
// with a file, text, repeated, file and JSON parts, a body shared with JSON): for every body
// the strict decoder accepts, mime/multipart reads the body the Middleware hands the handler as
// the parts the decoder read (reencodesMultipart).
//
//	go test ./golden/multipart -run '^$' -fuzz FuzzReencodedMultipart -fuzztime 60s
func FuzzReencodedMultipart(f *testing.F) {
	for _, c := range corpus {
		f.Add(testType, []byte(c.Body))
	}
	f.Add(testType, []byte(body(part{"title", "", "", "T"}, part{"file", "a\"b\\c é.pdf", "application/pdf", "--idemgen-test-boundary"}, part{"meta", "", "application/json", `{"source":"\u0041","Source":1}`})))
	f.Add(mt+`; boundary="b c"`, []byte("--b c\r\nContent-Disposition: form-data; name*=utf-8''%C3%A9\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=C3=A9\r\n--b c--"))
	f.Fuzz(func(t *testing.T, ctype string, data []byte) {
		for _, check := range multipartOperations {
			check(t, ctype, data)
		}
	})
}
