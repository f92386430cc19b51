package canonical

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func TestParseForm(t *testing.T) {
	fields, err := ParseForm([]byte("amount=2500&&description=Order+42%21&metadata[order]=7&flag&x=%E2%82%AC&amount=1&="))
	if err != nil {
		t.Fatal(err)
	}
	want := []FormField{{"amount", "2500"}, {"description", "Order 42!"}, {"metadata[order]", "7"}, {"flag", ""}, {"x", "€"}, {"amount", "1"}, {"", ""}}
	if len(fields) != len(want) {
		t.Fatalf("got %q", fields)
	}
	for i := range want {
		if fields[i] != want[i] {
			t.Errorf("field %d: got %q, want %q", i, fields[i], want[i])
		}
	}
	for in, pointer := range map[string]string{
		"a=%zz":         "/a",
		"a=%4":          "/a",
		"a/b%=1":        "/a~1b",
		"a=1&b=%ff%fe":  "/b",
		"ok=1&n%C3=x":   "/n\xc3",
		"text=%E2%82":   "/text",
		"%":             "/",
		"c=ok&d=%GG&e=": "/d",
	} {
		_, err := ParseForm([]byte(in))
		var e *Error
		if !errors.As(err, &e) || e.Pointer != pointer {
			t.Errorf("%q: got %v, want error at %q", in, err, pointer)
		}
	}
}

// Case 018: percent-decoding variants and field order do not matter,
// repeated fields keep their order, exclusions drop fields by name.
func TestCanonicalForm(t *testing.T) {
	form := func(in string, exclude ...string) string {
		t.Helper()
		b, err := AppendCanonicalForm(nil, []byte(in), exclude...)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		return string(b)
	}
	a := form("amount=2500&currency=usd&description=Order%2042")
	if a != "amount=2500&currency=usd&description=Order%2042" {
		t.Errorf("canonical %s", a)
	}
	for _, v := range []string{"description=Order+42&currency=usd&amount=2500", "currency=%75sd&amount=2500&description=Order%2042&", "%61mount=2500&description=Order%20%34%32&currency=usd"} {
		if got := form(v); got != a {
			t.Errorf("%s: got %s, want %s", v, got, a)
		}
	}
	if form("amount=2600&currency=usd&description=Order%2042") == a {
		t.Error("changed amount has the same form")
	}
	if got := form("tag=b&a=1&tag=a"); got != "a=1&tag=b&tag=a" {
		t.Errorf("repeated fields: %s", got)
	}
	if form("tag=b&tag=a") == form("tag=a&tag=b") {
		t.Error("order of repeated fields ignored")
	}
	if got := form("metadata[order]=1&metadata[a]=2&idempotency_key=k&ts=1", "idempotency_key", "ts"); got != "metadata%5Ba%5D=2&metadata%5Border%5D=1" {
		t.Errorf("brackets and exclusion: %s", got)
	}
	// "a" and "a=" are the same field by the WHATWG algorithm; a repeated field is not one.
	if form("a") != form("a=") {
		t.Error(`"a" and "a=" differ`)
	}
	if form("a=1") == form("a=1&a=1") {
		t.Error("repeated field collapsed")
	}
	if form("a=%2B") == form("a=+") {
		t.Error("'%2B' (plus sign) and '+' (space) are equal")
	}
}

// The framing is the documented byte layout (Framer doc): a stable contract, since stored
// fingerprints must stay comparable for one Version.
func TestFramingLayout(t *testing.T) {
	var f Framer
	f.Begin("op", "POST", "/p/{id}")
	f.PathParam("id", "7")
	f.Query("q", []string{"a", ""})
	f.MediaType("application/json")
	f.Header("X-Account", nil)
	f.BodyEnd(append(f.BodyStart(), "{}"...))
	got := f.Sum()
	want := []byte{byte(Version >> 8), byte(Version),
		'O', 2, 'o', 'p',
		'M', 4, 'P', 'O', 'S', 'T',
		'P', 7, '/', 'p', '/', '{', 'i', 'd', '}',
		'p', 2, 'i', 'd', 'v', 1, '7',
		'q', 1, 'q', 'v', 1, 'a', 'v', 0,
		'T', 16}
	want = append(want, "application/json"...)
	want = append(want, 'h', 9)
	want = append(want, "X-Account"...)
	want = append(want, 'J', 2, '{', '}')
	if got != (Fingerprint{Version: Version, Sum: sha256.Sum256(want)}) {
		t.Errorf("framing changed: %s", got)
	}
}

// Bodies of 128 bytes and more get a longer varint length; the body moves right intact.
func TestFramingLongBody(t *testing.T) {
	for _, n := range []int{0, 127, 128, 300, 16383, 16384, 70000} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte('a' + i%26)
		}
		var f Framer
		f.Begin("op", "POST", "/")
		f.BodyEnd(append(f.BodyStart(), body...))
		got := f.Sum()
		want := []byte{byte(Version >> 8), byte(Version), 'O', 2, 'o', 'p', 'M', 4, 'P', 'O', 'S', 'T', 'P', 1, '/', 'J'}
		want = binary.AppendUvarint(want, uint64(n))
		want = append(want, body...)
		if got.Sum != sha256.Sum256(want) {
			t.Errorf("body of %d bytes framed wrongly", n)
		}
	}
}

// Every field has a tag of its own, so that a frame reads as one sequence of fields whatever
// the position of each.
func TestFramingTagsDistinct(t *testing.T) {
	tags := []byte{tagOperation, tagMethod, tagPath, tagPathParam, tagQuery, tagHeader, tagValue, tagMedia,
		tagJSON, tagForm, tagRaw, tagMultipart, tagQueryObject}
	seen := map[byte]bool{}
	for _, tag := range tags {
		if seen[tag] {
			t.Errorf("tag %q used by two fields", tag)
		}
		seen[tag] = true
	}
}

// A multipart body is its own field: the same canonical JSON as a JSON body is another request.
func TestFramingMultipart(t *testing.T) {
	var f Framer
	f.Begin("op", "POST", "/")
	f.MediaType("multipart/form-data")
	f.BodyEnd(append(f.MultipartStart(), "{}"...))
	got := f.Sum()
	want := []byte{byte(Version >> 8), byte(Version), 'O', 2, 'o', 'p', 'M', 4, 'P', 'O', 'S', 'T', 'P', 1, '/', 'T', 19}
	want = append(want, "multipart/form-data"...)
	want = append(want, 'm', 2, '{', '}')
	if got.Sum != sha256.Sum256(want) {
		t.Errorf("multipart framing changed: %s", got)
	}
	var j Framer
	j.Begin("op", "POST", "/")
	j.MediaType("multipart/form-data")
	j.BodyEnd(append(j.BodyStart(), "{}"...))
	if j.Sum() == got {
		t.Error("a multipart body and a JSON body with the same canonical form share a fingerprint")
	}
}

func TestFramingDistinguishes(t *testing.T) {
	sum := func(build func(f *Framer)) Fingerprint {
		var f Framer
		f.Begin("op", "POST", "/p/{id}")
		build(&f)
		return f.Sum()
	}
	all := map[string]Fingerprint{
		"nothing":        sum(func(f *Framer) {}),
		"param 7":        sum(func(f *Framer) { f.PathParam("id", "7") }),
		"param 8":        sum(func(f *Framer) { f.PathParam("id", "8") }),
		"query absent":   sum(func(f *Framer) { f.Query("q", nil) }),
		"query empty":    sum(func(f *Framer) { f.Query("q", []string{""}) }),
		"query ab":       sum(func(f *Framer) { f.Query("q", []string{"a", "b"}) }),
		"query a,b":      sum(func(f *Framer) { f.Query("q", []string{"a,b"}) }),
		"header":         sum(func(f *Framer) { f.Header("X-A", []string{"1"}) }),
		"raw {}":         sum(func(f *Framer) { f.RawBody([]byte("{}")) }),
		"json {}":        sum(func(f *Framer) { f.BodyEnd(append(f.BodyStart(), "{}"...)) }),
		"empty raw":      sum(func(f *Framer) { f.RawBody(nil) }),
		"form":           sum(func(f *Framer) { _ = f.FormBody([]byte("a=1")) }),
		"query then raw": sum(func(f *Framer) { f.Query("q", nil); f.RawBody([]byte("q")) }),
	}
	seen := map[Fingerprint]string{}
	for name, fp := range all {
		if other, dup := seen[fp]; dup {
			t.Errorf("%s and %s have one fingerprint", name, other)
		}
		seen[fp] = name
	}
	// fingerprint.body: raw keeps every byte.
	raw := func(b string) Fingerprint { return sum(func(f *Framer) { f.RawBody([]byte(b)) }) }
	if raw(`{"a":1}`) == raw(`{"a": 1}`) {
		t.Error("raw body normalised")
	}
	var f Framer
	f.Begin("op", "POST", "/")
	if err := f.JSONBody([]byte(`{"a":1,"a":2}`), nil); err == nil {
		t.Error("JSONBody accepted a duplicate")
	}
	f.Sum()
	if got := (Fingerprint{Version: 1}).String(); got != "v1:0000000000000000000000000000000000000000000000000000000000000000" {
		t.Errorf("String %s", got)
	}
}

// TestFormFields: a form body parsed, filtered and framed by FormFields frames exactly as
// FormBody frames the body with the same fields excluded by name.
func TestFormFields(t *testing.T) {
	sum := func(body func(f *Framer)) Fingerprint {
		var f Framer
		f.Begin("op", "POST", "/x")
		f.MediaType("application/x-www-form-urlencoded")
		body(&f)
		return f.Sum()
	}
	// A body of more than 127 bytes: its length takes two varint bytes.
	body := []byte("b[1]=x&a=1&b%5B0%5D=y&key=k&c[]=2&c[]=1&d=" + strings.Repeat("v", 300))
	fields, err := ParseForm(body)
	if err != nil {
		t.Fatal(err)
	}
	var kept []FormField
	for _, f := range fields {
		if f.Name != "key" {
			kept = append(kept, f)
		}
	}
	a := sum(func(f *Framer) { f.FormFields(kept) })
	b := sum(func(f *Framer) {
		if err := f.FormBody(body, "key"); err != nil {
			t.Fatal(err)
		}
	})
	if a != b {
		t.Errorf("FormFields %s, FormBody %s", a, b)
	}
}
