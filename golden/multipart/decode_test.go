package multipart

// multipart/form-data: parts decoded by the schema, the key inside a JSON part (Square), files by
// content hash, a cap per part (413), strictness; the fingerprints are pinned.

import (
	"bytes"
	"errors"
	"fmt"
	"mime/multipart"
	"net/textproto"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/fptest"
	"github.com/idemgen/idemgen/runtime/gen"
)

// part is one part of a test body: name, optional filename and content type, content.
type part struct{ name, filename, ctype, data string }

// body writes parts as a multipart/form-data body with a fixed boundary.
func body(parts ...part) string {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary("idemgen-test-boundary"); err != nil {
		panic(err)
	}
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		cd := fmt.Sprintf(`form-data; name="%s"`, p.name)
		if p.filename != "" {
			cd += fmt.Sprintf(`; filename="%s"`, p.filename)
		}
		h.Set("Content-Disposition", cd)
		if p.ctype != "" {
			h.Set("Content-Type", p.ctype)
		}
		pw, _ := w.CreatePart(h)
		pw.Write([]byte(p.data))
	}
	w.Close()
	return b.String()
}

const mt = "multipart/form-data"

func req(op, target string, parts ...part) fptest.Request {
	return fptest.Request{Op: op, Target: target, MediaType: mt, Body: body(parts...),
		Header: []string{"Content-Type", mt + "; boundary=idemgen-test-boundary"}}
}

var (
	jpeg     = part{"image_file", "a.jpg", "image/jpeg", "\xff\xd8\xff\xe0 not really a jpeg \x00\x01"}
	reqJSON  = part{"request", "", "application/json", `{"idempotency_key":"k-1","object_id":"obj_1","is_primary":true}`}
	reqJSON2 = part{"request", "", "application/json; charset=utf-8", `{"is_primary":true,"object_id":"obj_1","idempotency_key":"k-2"}`}
	pdf      = part{"file", "doc.pdf", "application/pdf", "%PDF-1.7 ..."}
)

var corpus = []fptest.Request{
	// 0-5 createCatalogImage (Square's shape): the key is in the JSON part "request".
	req("createCatalogImage", "/catalog/images", reqJSON, jpeg),
	req("createCatalogImage", "/catalog/images", jpeg, reqJSON2), // parts and members reordered, another key: same fingerprint
	req("createCatalogImage", "/catalog/images", reqJSON, part{"image_file", "a.jpg", "image/jpeg", jpeg.data + "!"}),
	req("createCatalogImage", "/catalog/images", reqJSON, part{"image_file", "b.jpg", "image/jpeg", jpeg.data}),
	req("createCatalogImage", "/catalog/images", reqJSON, part{"image_file", "a.jpg", "image/png", jpeg.data}),
	req("createCatalogImage", "/catalog/images", part{"request", "", "application/json", `{"idempotency_key":"k-1","is_primary":"yes"}`}, jpeg),
	// 6-17 createDocument: text, repeated and file parts; limits.part 1KiB.
	req("createDocument", "/documents", part{"title", "", "", "Invoice 7"}, part{"pages", "", "", "2"}, part{"tags", "", "", "a"}, part{"tags", "", "", "b"}, pdf,
		part{"meta", "", "application/json", `{"source":"scan"}`}, part{"extra", "", "application/json", `{"b":1,"a":[1.0]}`}, part{"trace", "", "", "t-1"}),
	req("createDocument", "/documents", part{"pages", "", "", "02"}, pdf, part{"title", "", "", "Invoice 7"}, part{"tags", "", "", "a"}, part{"tags", "", "", "b"},
		part{"meta", "", "application/json", `{ "source": "scan" }`}, part{"extra", "", "application/json", `{"a":[1],"b":1}`}, part{"trace", "", "", "t-2"}),
	req("createDocument", "/documents", part{"title", "", "", "Invoice 7"}, pdf, part{"extra", "", "", "just text"}),
	req("createDocument", "/documents", part{"title", "", "", "Invoice 7"}, pdf, part{"attachments", "x.txt", "text/plain", "x"}, part{"attachments", "y.txt", "text/plain", "y"}),
	req("createDocument", "/documents", part{"title", "", "", "Invoice 7"}, part{"file", "big.pdf", "application/pdf", strings.Repeat("x", 1025)}),
	req("createDocument", "/documents", pdf),
	req("createDocument", "/documents", part{"title", "", "", "Invoice 7"}, pdf, part{"colour", "", "", "red"}),
	req("createDocument", "/documents", part{"title", "", "", "Invoice 7"}, pdf, part{"title", "", "", "again"}),
	req("createDocument", "/documents", part{"title", "", "", "Invoice 7"}, pdf, part{"pages", "", "", "0"}),
	req("createDocument", "/documents", part{"title", "", "", "x\xff"}, pdf),
	req("createDocument", "/documents", part{"title", "", "", "Invoice 7"}, pdf, part{"tags", "", "", "1"}, part{"tags", "", "", "2"}, part{"tags", "", "", "3"}, part{"tags", "", "", "4"}),
	req("createDocument", "/documents", part{"title", "", "", "Invoice 7"}, pdf, part{"extra", "e.bin", "application/octet-stream", "\x00\x01"}),
	// 18-19 createLetter: one schema for JSON and multipart (Lob's shape).
	req("createLetter", "/letters", part{"to", "", "application/json", `{"name":"Ada","zip":"94107"}`}, part{"color", "", "", "true"}, part{"metadata", "", "application/json", `{"k":"v"}`}, part{"campaign", "", "", "fall"}),
	req("createLetter", "/letters", part{"to", "", "application/json", `{"name":1}`}, part{"color", "", "", "true"}),
}

func TestMultipartCorpus(t *testing.T) {
	fptest.Check(t, corpus, want, fptest.ByOp(map[string]fptest.Fingerprinter{
		"createCatalogImage": fptest.Run(operationCreateCatalogImage(), decodeCreateCatalogImage),
		"createDocument":     fptest.Run(operationCreateDocument(), decodeCreateDocument),
		"createLetter":       fptest.Run(operationCreateLetter(), decodeCreateLetter),
	}))
	for _, p := range [][2]int{{0, 1}, {6, 7}} {
		if want[p[0]] != want[p[1]] {
			t.Errorf("requests %d and %d: one request, two fingerprints", p[0], p[1])
		}
	}
	for _, p := range [][2]int{{0, 2}, {0, 3}, {0, 4}, {6, 8}, {8, 9}} {
		if want[p[0]] == want[p[1]] {
			t.Errorf("requests %d and %d: two requests, one fingerprint", p[0], p[1])
		}
	}
}

// TestMultipartDecoded: what the handler gets, the key the runtime reads, and the 413 of a part
// over limits.part.
func TestMultipartDecoded(t *testing.T) {
	c := corpus[0]
	img, key, ok, err := fptest.BodyKey(operationCreateCatalogImage(), decodeCreateCatalogImage, c.HTTP(), mt, []byte(c.Body))
	f := img.Body.ImageFile
	if err != nil || !ok || key != "k-1" || f == nil || f.Filename != "a.jpg" || f.ContentType != "image/jpeg" || string(f.Data) != jpeg.data ||
		*img.Body.Request.ObjectID != "obj_1" {
		t.Errorf("createCatalogImage: %+v key %q %v, %v", img.Body, key, ok, err)
	}
	c = corpus[6]
	doc, _, err := fptest.Decode(operationCreateDocument(), decodeCreateDocument, c.HTTP(), mt, []byte(c.Body))
	d := doc.Body
	if err != nil || d.Title != "Invoice 7" || *d.Pages != 2 || len(d.Tags) != 2 || d.File.Filename != "doc.pdf" ||
		d.Meta.Source != "scan" || string(d.Extra) != `{"a":[1],"b":1}` || *d.Trace != "t-1" {
		t.Errorf("createDocument: %+v, %v", d, err)
	}
	c = corpus[10]
	_, _, err = fptest.Decode(operationCreateDocument(), decodeCreateDocument, c.HTTP(), mt, []byte(c.Body))
	var be *gen.BodyError
	if !errors.As(err, &be) || be.Status != 413 || be.At != "/file" || !strings.Contains(be.Reason, "limits.part") {
		t.Errorf("a part over limits.part: %#v", err)
	}
	c = corpus[18]
	letter, _, err := fptest.Decode(operationCreateLetter(), decodeCreateLetter, c.HTTP(), mt, []byte(c.Body))
	if err != nil || *letter.Body.To.Name != "Ada" || !letter.Body.Color || letter.Body.Metadata["k"] != "v" || len(letter.Body.Extra) != 1 {
		t.Errorf("createLetter: %+v, %v", letter.Body, err)
	}
}

// want are the outcomes of corpus, recorded from the generated code (fptest.Check).
var want = []string{
	"v2:9bfc3b36d1c2837d7eb4242dbb4391d34ba2f6c812cc09a3477f4c390c967f56",                                                                                                   // 0 createCatalogImage
	"v2:9bfc3b36d1c2837d7eb4242dbb4391d34ba2f6c812cc09a3477f4c390c967f56",                                                                                                   // 1 createCatalogImage
	"v2:cbb63b9bc73afd841ed3c0b201c521cba43d4b40a765bd44bbd03ab4787f97d0",                                                                                                   // 2 createCatalogImage
	"v2:e8b56340f313a2c34b3447422d712a6198c64574c27f23ec53ae285b58723b83",                                                                                                   // 3 createCatalogImage
	"v2:bc86fdfa981e8e6d7f42785a45bbaa28a622bbb3662f3539496b2f31526e1497",                                                                                                   // 4 createCatalogImage
	"refused at \"/request/is_primary\": invalid body at /request/is_primary (byte 38): in part \"request\": expected a boolean, found a string",                            // 5 createCatalogImage
	"v2:83509488defcc212420d76ad0549454efd46a7a32a10abd1287ee002cd5d25cf",                                                                                                   // 6 createDocument
	"v2:83509488defcc212420d76ad0549454efd46a7a32a10abd1287ee002cd5d25cf",                                                                                                   // 7 createDocument
	"v2:9c2be47e2c99cfbe3e9667c1ed0a5f95b75926e6a7769c9995a2bd0d8346a320",                                                                                                   // 8 createDocument
	"v2:23f342d26063853a27a2b60e78d34c382ad68315ac61b09c57f056edd5de40b4",                                                                                                   // 9 createDocument
	"refused at \"/file\": part \"file\" is larger than the limit of 1024 bytes per part (limits.part)",                                                                     // 10 createDocument
	"refused at \"/title\": invalid body at /title: missing required part",                                                                                                  // 11 createDocument
	"refused at \"/colour\": invalid body at /colour: part not allowed by the schema",                                                                                       // 12 createDocument
	"refused at \"/title\": invalid body at /title: part given more than once",                                                                                              // 13 createDocument
	"refused at \"/pages\": invalid body at /pages: must be at least 1",                                                                                                     // 14 createDocument
	"refused at \"/title\": invalid body at /title: field value is not valid UTF-8",                                                                                         // 15 createDocument
	"refused at \"/tags\": invalid body at /tags: must have at most 3 items",                                                                                                // 16 createDocument
	"refused at \"/extra\": invalid body at /extra: is a file, which fits only a property of type string, format binary (a JSON part needs Content-Type: application/json)", // 17 createDocument
	"v2:2a1c7a9421ecff4e24da1cf5e1d249d99898c198ba8dad4e06e6d16f3adefe11",                                                                                                   // 18 createLetter
	"refused at \"/to/name\": invalid body at /to/name (byte 8): in part \"to\": expected a string, found a number",                                                         // 19 createLetter
}
