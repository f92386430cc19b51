package gen

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/canonical"
)

const testBoundary = "b0undary"

// mpart is one part of a test body: its name, filename, Content-Type and content.
type mpart struct{ name, filename, ctype, data string }

// mpBody writes parts as a multipart/form-data body with testBoundary.
func mpBody(t testing.TB, parts ...mpart) string {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(testBoundary); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		cd := fmt.Sprintf("form-data; name=%q", p.name)
		if p.filename != "" {
			cd += fmt.Sprintf("; filename=%q", p.filename)
		}
		h.Set("Content-Disposition", cd)
		if p.ctype != "" {
			h.Set("Content-Type", p.ctype)
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write([]byte(p.data))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// mpInput is an Input on a multipart request with the given Content-Type and body.
func mpInput(contentType, body string) *Input {
	r := httptest.NewRequest("POST", "/upload", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	in := &Input{}
	in.Reset(r, []byte(body), "multipart/form-data", "multipart/form-data", nil, &Matcher{})
	return in
}

const mpType = "multipart/form-data; boundary=" + testBoundary

// upload is what decodeUpload fills: the shape the generator emits for a body with a required
// text field, an integer, a repeated text field, a file, repeated files, a JSON part, a
// schema-less part and undeclared parts kept (an open schema).
type upload struct {
	Title string
	Pages *int64
	Tags  []string
	File  File
	More  []File
	Meta  struct{ Source string }
	Any   json.RawMessage
	Extra canonical.Members
}

// decodeUpload is written as generated code decodes a multipart body (generator/multipart.go):
// limit is limits.part; closed refuses undeclared parts.
func decodeUpload(in *Input, limit int64, closed bool) (upload, error) {
	var v upload
	var seen uint64
	m := in.Multipart(limit)
	for m.Next() {
		switch m.Name() {
		case "title":
			v.Title = m.Text(&seen, 0).Str()
			m.Length(v.Title, 1, 20)
		case "file":
			v.File = m.File(&seen, 1)
		case "pages":
			v.Pages = canonical.Ptr(m.Text(&seen, 2).Int64())
			m.Min(*v.Pages, 1)
		case "tags":
			v.Tags = append(v.Tags, m.Item(&seen, 3).Str())
		case "more":
			v.More = append(v.More, m.FileItem(&seen, 4))
		case "meta":
			d := m.JSON(&seen, 5)
			var ms uint64
			for d.BeginObject(); d.NextMember(); {
				switch string(d.Name()) {
				case "source":
					v.Meta.Source = d.Field(&ms, 0).Str()
				default:
					d.Unknown(&v.Extra) // any sink: the test only needs strictness
				}
			}
			d.EndObject()
			d.Required(ms, "source")
		case "any":
			v.Any = m.Raw(&seen, 6)
		default:
			if closed {
				m.Reject()
			} else {
				m.Unknown(&v.Extra)
			}
		}
	}
	if v.Tags != nil {
		m.Items(len(v.Tags), -1, 2)
	}
	m.Required(seen, "title", "file")
	return v, in.Err()
}

func TestMultipartDecode(t *testing.T) {
	body := mpBody(t,
		mpart{"tags", "", "", "a"},
		mpart{"file", "r.pdf", "application/pdf", "%PDF\x00\xff"},
		mpart{"title", "", "", "Report"},
		mpart{"pages", "", "", "007"},
		mpart{"more", "x.txt", "text/plain", "x"},
		mpart{"tags", "", "", "b"},
		mpart{"more", "y.txt", "", "y"},
		mpart{"meta", "", "application/json", ` {"source":"scan"} `},
		mpart{"any", "", "application/json; charset=utf-8", `{"b":1.0,"a":"x"}`},
		mpart{"note", "", "", "hello"},
		mpart{"blob", "b.bin", "application/octet-stream", "\x00"},
	)
	v, err := decodeUpload(mpInput(mpType, body), 64, false)
	if err != nil {
		t.Fatal(err)
	}
	if v.Title != "Report" || *v.Pages != 7 || strings.Join(v.Tags, ",") != "a,b" || v.Meta.Source != "scan" ||
		string(v.Any) != `{"a":"x","b":1}` {
		t.Errorf("decoded %+v", v)
	}
	if v.File.Filename != "r.pdf" || v.File.ContentType != "application/pdf" || string(v.File.Data) != "%PDF\x00\xff" {
		t.Errorf("file %+v", v.File)
	}
	if len(v.More) != 2 || v.More[0].Filename != "x.txt" || v.More[1].ContentType != "" || string(v.More[1].Data) != "y" {
		t.Errorf("more %+v", v.More)
	}
	// Undeclared parts of an open schema: text as a string, anything else as its file object.
	if len(v.Extra) != 2 || v.Extra[0].Name != "blob" || v.Extra[1].Name != "note" || string(v.Extra[1].Value) != `"hello"` ||
		!strings.Contains(string(v.Extra[0].Value), `"filename":"b.bin"`) {
		t.Errorf("extra %+v", v.Extra)
	}
	// A schema-less part that is not JSON is its text, as a JSON string.
	body = mpBody(t, mpart{"title", "", "", "T"}, mpart{"file", "", "", ""}, mpart{"any", "", "text/plain", `{"not":"json"}`})
	if v, err := decodeUpload(mpInput(mpType, body), 64, true); err != nil || string(v.Any) != `"{\"not\":\"json\"}"` {
		t.Errorf("text part as any: %s, %v", v.Any, err)
	}
	// The boundary parameter is case-insensitive and may be quoted.
	if _, err := decodeUpload(mpInput(`Multipart/Form-Data; BOUNDARY="`+testBoundary+`"`, body), 64, true); err != nil {
		t.Errorf("quoted boundary: %v", err)
	}
}

// TestMultipartRefused: every malformed or refused body is an error that names where, never a
// panic; a part over the cap is 413 naming the part.
func TestMultipartRefused(t *testing.T) {
	ok := []mpart{{"title", "", "", "T"}, {"file", "f", "", "data"}}
	with := func(extra ...mpart) string { return mpBody(t, append(append([]mpart{}, ok...), extra...)...) }
	cases := []struct {
		name, ctype, body string
		limit             int64
		closed            bool
		at, reason        string
		status            int
	}{
		{"no content type", "", with(), 64, false, "", "without a boundary", 0},
		{"no boundary", "multipart/form-data", with(), 64, false, "", "without a boundary", 0},
		{"bad content type", "multipart/form-data; boundary", with(), 64, false, "", "without a boundary", 0},
		{"other boundary", "multipart/form-data; boundary=other", with(), 64, false, "", "malformed multipart body", 0},
		{"truncated", mpType, strings.TrimSuffix(with(), "--\r\n"), 64, false, "", "malformed multipart body", 0},
		{"cut in a part", mpType, with()[:60], 64, false, "", "malformed multipart body", 0},
		{"header without colon", mpType, "--" + testBoundary + "\r\nnot a header\r\n\r\nx\r\n--" + testBoundary + "--\r\n", 64, false, "", "malformed multipart body", 0},
		{"no disposition", mpType, "--" + testBoundary + "\r\nContent-Type: text/plain\r\n\r\nx\r\n--" + testBoundary + "--\r\n", 64, false, "", "without a form-data Content-Disposition name", 0},
		{"attachment", mpType, "--" + testBoundary + "\r\nContent-Disposition: attachment; name=\"title\"\r\n\r\nx\r\n--" + testBoundary + "--\r\n", 64, false, "", "without a form-data Content-Disposition name", 0},
		{"empty body", mpType, "", 64, false, "", "malformed multipart body", 0},
		{"preamble only", mpType, "just text\r\n", 64, false, "", "malformed multipart body", 0},
		{"no parts", mpType, "--" + testBoundary + "--\r\n", 64, false, "/title", "missing required part", 0},
		{"missing file", mpType, mpBody(t, ok[0]), 64, false, "/file", "missing required part", 0},
		{"part over the cap", mpType, with(mpart{"note", "", "", strings.Repeat("n", 65)}), 64, false, "/note", `part "note" is larger than the limit of 64 bytes per part (limits.part)`, 413},
		{"file over the cap", mpType, mpBody(t, ok[0], mpart{"file", "f", "", strings.Repeat("f", 5)}), 4, false, "/file", "larger than the limit of 4 bytes", 413},
		{"twice", mpType, with(mpart{"title", "", "", "again"}), 64, false, "/title", "part given more than once", 0},
		{"file twice", mpType, with(ok[1]), 64, false, "/file", "part given more than once", 0},
		{"undeclared twice", mpType, with(mpart{"x", "", "", "1"}, mpart{"x", "", "", "2"}), 64, false, "/x", "part given more than once", 0},
		{"undeclared, closed", mpType, with(mpart{"x", "", "", "1"}), 64, true, "/x", "part not allowed by the schema", 0},
		{"a slash in the name", mpType, with(mpart{"a/b~c", "", "", "1"}), 64, true, "/a~1b~0c", "part not allowed by the schema", 0},
		{"a slash in a big part", mpType, with(mpart{"a/b", "", "", strings.Repeat("n", 65)}), 64, false, "/a~1b", `part "a/b" is larger`, 413},
		{"not utf-8", mpType, with(mpart{"tags", "", "", "\xff"}), 64, false, "/tags", "not valid UTF-8", 0},
		{"not an integer", mpType, with(mpart{"pages", "", "", "two"}), 64, false, "/pages", "", 0},
		{"below minimum", mpType, with(mpart{"pages", "", "", "0"}), 64, false, "/pages", "at least 1", 0},
		{"too long", mpType, mpBody(t, mpart{"title", "", "", strings.Repeat("t", 21)}, ok[1]), 64, false, "/title", "", 0},
		{"too many items", mpType, with(mpart{"tags", "", "", "a"}, mpart{"tags", "", "", "b"}, mpart{"tags", "", "", "c"}), 64, false, "/tags", "at most 2 items", 0},
		{"json part not json", mpType, with(mpart{"meta", "", "application/json", "{"}), 64, false, "/meta", `in part "meta"`, 0},
		{"json part wrong type", mpType, with(mpart{"meta", "", "application/json", `{"source":1}`}), 64, false, "/meta/source", `in part "meta"`, 0},
		{"json part trailing data", mpType, with(mpart{"meta", "", "application/json", `{"source":"a"} x`}), 64, false, "/meta", "after the document", 0},
		{"json part missing member", mpType, with(mpart{"meta", "", "application/json", `{}`}), 64, false, "/meta", "", 0},
		{"any part bad json", mpType, with(mpart{"any", "", "application/json", `{"a":}`}), 64, false, "/any/a", `in part "any"`, 0},
		{"any part a file", mpType, with(mpart{"any", "a.bin", "", "x"}), 64, false, "/any", "is a file", 0},
		{"any part bytes", mpType, with(mpart{"any", "", "", "\xfe"}), 64, false, "/any", "is a file", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeUpload(mpInput(c.ctype, c.body), c.limit, c.closed)
			if err == nil {
				t.Fatal("accepted")
			}
			at, reason := refusal(err)
			var be *BodyError
			status := 0
			if errors.As(err, &be) {
				status = be.Status
			}
			if at != c.at || !strings.Contains(reason, c.reason) || status != c.status {
				t.Errorf("refused at %q (%d): %s; want %q (%d) containing %q", at, status, reason, c.at, c.status, c.reason)
			}
		})
	}
}

// TestMultipartCapExact: a part of exactly limits.part bytes is accepted.
func TestMultipartCapExact(t *testing.T) {
	body := mpBody(t, mpart{"title", "", "", "T"}, mpart{"file", "f", "", strings.Repeat("f", 64)})
	if v, err := decodeUpload(mpInput(mpType, body), 64, true); err != nil || len(v.File.Data) != 64 {
		t.Errorf("a part of exactly the limit: %d bytes, %v", len(v.File.Data), err)
	}
}

// TestMultipartReused: a pooled Input reset for another request reads that request's parts
// only, even when the last one stopped inside a JSON part.
func TestMultipartReused(t *testing.T) {
	in := mpInput(mpType, mpBody(t, mpart{"meta", "", "application/json", `{"source":`}))
	if _, err := decodeUpload(in, 64, true); err == nil {
		t.Fatal("broken JSON part accepted")
	}
	body := mpBody(t, mpart{"title", "", "", "Second"}, mpart{"file", "g", "", "g"})
	r := httptest.NewRequest("POST", "/upload", strings.NewReader(body))
	r.Header.Set("Content-Type", mpType)
	in.Reset(r, []byte(body), "multipart/form-data", "multipart/form-data", nil, &Matcher{})
	v, err := decodeUpload(in, 64, true)
	if err != nil || v.Title != "Second" || v.Meta.Source != "" || string(v.File.Data) != "g" {
		t.Errorf("second request: %+v, %v", v, err)
	}
}

func TestAppendFile(t *testing.T) {
	data := []byte("abc")
	sum := sha256.Sum256(data)
	got := string(AppendFile([]byte("x"), &File{Filename: "a \"b\".txt", ContentType: "text/plain", Data: data}))
	want := `x{"content_type":"text/plain","filename":"a \"b\".txt","sha256":"` + hex.EncodeToString(sum[:]) + `","size":3}`
	if got != want {
		t.Errorf("AppendFile = %s, want %s", got, want)
	}
	if got := string(AppendFile(nil, &File{})); !strings.Contains(got, `"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":0`) {
		t.Errorf("empty file: %s", got)
	}
}

// FuzzMultipart: any body, with any boundary, is decoded or refused with an error, never a
// panic; an accepted body decodes the same way twice and its undeclared parts are canonical
// JSON values.
func FuzzMultipart(f *testing.F) {
	f.Add(testBoundary, mpBody(f, mpart{"title", "", "", "T"}, mpart{"file", "f", "", "x"}, mpart{"tags", "", "", "a"},
		mpart{"meta", "", "application/json", `{"source":"s"}`}, mpart{"any", "", "", "1"}, mpart{"u", "u.bin", "", "\x00"}))
	f.Add(testBoundary, "--"+testBoundary+"\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\n")
	f.Add("x", "--x\r\n\r\n--x--")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, boundary, body string) {
		ctype := "multipart/form-data; boundary=" + strconvQuote(boundary)
		v1, err1 := decodeUpload(mpInput(ctype, body), 32, false)
		v2, err2 := decodeUpload(mpInput(ctype, body), 32, false)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("two decodings differ: %v / %v", err1, err2)
		}
		if err1 != nil {
			return
		}
		if v1.Title != v2.Title || len(v1.Extra) != len(v2.Extra) {
			t.Fatalf("two decodings differ: %+v / %+v", v1, v2)
		}
		for _, m := range v1.Extra {
			if !json.Valid(m.Value) {
				t.Fatalf("undeclared part %q kept as %q", m.Name, m.Value)
			}
		}
		if v1.Any != nil && !json.Valid(v1.Any) {
			t.Fatalf("schema-less part kept as %q", v1.Any)
		}
	})
}

// strconvQuote quotes a boundary as a MIME parameter value (any bytes, so that the fuzzer
// reaches the parser with odd boundaries rather than only with refused Content-Types).
func strconvQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range []byte(s) {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(r)
	}
	b.WriteByte('"')
	return b.String()
}
