package gen

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/canonical"
)

func newInput(target, body string, header ...string) *Input {
	r := httptest.NewRequest("POST", target, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	in := &Input{}
	in.Reset(r, []byte(body), "application/x-www-form-urlencoded", "application/x-www-form-urlencoded", nil, &Matcher{})
	return in
}

// refusal returns the pointer and text of a parameter or form error.
func refusal(err error) (at, text string) {
	var be *BodyError
	var ce *canonical.Error
	switch {
	case errors.As(err, &be):
		return be.At, be.Reason
	case errors.As(err, &ce):
		return ce.Pointer, ce.Reason
	case err == nil:
		return "", "<nil>"
	}
	return "?", err.Error()
}

func TestParams(t *testing.T) {
	in := newInput("/x?limit=7&ids=1|2&ids=3&tags=a,+b&e=x&e=y&n=1.5&f=true", "", "X-Id", "abc", "X-List", "p, q", "X-List", "r")
	in.Request.SetPathValue("id", "42")
	p := in.Params()
	if v := p.Path("id").Int64(); v != 42 {
		t.Errorf("path id = %d", v)
	}
	if p.Query("limit", true).Int32() != 7 {
		t.Error("limit")
	}
	if p.Query("absent", false).Present() {
		t.Error("absent optional reported present")
	}
	var ids []int64
	for p.QueryList("ids", "|", false); p.Next(); {
		ids = append(ids, p.Int64())
	}
	var tags, hdr []string
	for p.QueryList("tags", ",", true); p.Next(); {
		tags = append(tags, p.Str())
	}
	if p.HeaderList("X-List", true).Present() {
		for p.Next() {
			hdr = append(hdr, p.Str())
		}
	}
	if p.Header("x-id", true).Enum("abc", "def") != "abc" || p.Query("n", true).Float64() != 1.5 || !p.Query("f", true).Bool() {
		t.Error("header, enum, number or bool")
	}
	if err := in.Err(); err != nil || len(ids) != 3 || ids[2] != 3 || strings.Join(tags, "/") != "a/b" || strings.Join(hdr, "/") != "p/q/r" {
		t.Fatalf("err %v ids %v tags %q header %q", err, ids, tags, hdr)
	}

	for _, tt := range []struct {
		name string
		read func(p *Params)
		at   string
		text string
	}{
		{"missing", func(p *Params) { p.Header("X-None", true) }, "/header/X-None", `header parameter "X-None": missing`},
		{"twice", func(p *Params) { p.Query("e", false) }, "/query/e", `query parameter "e": given more than once`},
		{"missing list", func(p *Params) { p.QueryList("none", "", true) }, "/query/none", `query parameter "none": missing`},
		{"int64", func(p *Params) { p.Query("n", true).Int64() }, "/query/n", `query parameter "n": must be an integer (int64)`},
		{"twice, a list read as one", func(p *Params) { p.Query("ids", false) }, "/query/ids", `query parameter "ids": given more than once`},
		{"bool", func(p *Params) { p.Query("limit", true).Bool() }, "/query/limit", `query parameter "limit": must be true or false`},
		{"number", func(p *Params) { p.Header("X-Id", true).Float64() }, "/header/X-Id", `header parameter "X-Id": must be a number`},
		{"enum", func(p *Params) { p.Path("id").Enum("a", "b") }, "/path/id", `path parameter "id": must be one of "a", "b"`},
		{"max", func(p *Params) { p.Max(int64(p.Query("limit", true).Int32()), 5) }, "/query/limit", `query parameter "limit": must be at most 5`},
		{"length", func(p *Params) { p.Length(p.Header("X-Id", true).Str(), 4, -1) }, "/header/X-Id", `header parameter "X-Id": length must be at least 4`},
		{"pattern", func(p *Params) { p.Pattern(p.Header("X-Id", true).Str(), `^\d+$`) }, "/header/X-Id", `header parameter "X-Id": must match the pattern "^\\d+$"`},
		{"items", func(p *Params) {
			n := 0
			for p.QueryList("ids", "|", true); p.Next(); {
				n++
			}
			p.Items(n, 4, -1)
		}, "/query/ids", `query parameter "ids": must have at least 4 items`},
		{"first error wins", func(p *Params) { p.Header("X-None", true); p.Query("e", false) }, "/header/X-None", `header parameter "X-None": missing`},
		{"an error hides later values", func(p *Params) {
			if p.Query("e", false); p.Query("limit", false).Present() {
				t.Error("present after an error")
			}
		}, "/query/e", `query parameter "e": given more than once`},
	} {
		in := newInput("/x?limit=7&ids=1|2&ids=3&e=x&e=y&n=1.5", "", "X-Id", "abc")
		in.Request.SetPathValue("id", "42")
		tt.read(in.Params())
		if at, text := refusal(in.Err()); at != tt.at || text != tt.text {
			t.Errorf("%s: refused at %q: %q, want %q: %q", tt.name, at, text, tt.at, tt.text)
		}
	}
}

func TestForm(t *testing.T) {
	type body struct {
		email   string
		balance *int64
		expand  []string
	}
	decode := func(raw string, closed bool) (body, error) {
		in := newInput("/x", raw)
		var v body
		var seen uint64
		f := in.Form()
		for f.Next() {
			switch f.Name() {
			case "email":
				v.email = f.Once(&seen, 0).Str()
				f.Length(v.email, -1, 5)
			case "balance":
				v.balance = canonical.Ptr(f.Once(&seen, 1).Int64())
			default:
				switch f.Base() {
				case "expand":
					f.Item(&seen, 2)
				default:
					if closed {
						f.Reject()
					} else {
						f.Undeclared("email", "balance", "expand")
					}
				}
			}
		}
		if f.List("expand") {
			v.expand = []string{}
			for f.NextItem() {
				v.expand = append(v.expand, f.Enum("a", "b"))
			}
			f.Items(len(v.expand), -1, 12)
		}
		f.Required(seen, "email")
		return v, in.Err()
	}
	v, err := decode("email=a%40b&balance=-3&expand[]=a&expand=b&other=1", false)
	if err != nil || v.email != "a@b" || *v.balance != -3 || strings.Join(v.expand, ",") != "a,b" {
		t.Fatalf("%+v, %v", v, err)
	}
	// Indexed items come in the order of their indices, not of arrival ([1]=b&[0]=a is [a b]), also
	// past 9, where the names do not sort as the numbers do.
	long := "email=x"
	for i := 11; i >= 0; i-- {
		long += fmt.Sprintf("&expand%%5B%d%%5D=%c", i, "ab"[i%2])
	}
	for raw, want := range map[string]string{
		"email=x&expand[1]=b&expand[0]=a": "a,b",
		"email=x&expand=b&expand=a":       "b,a",
		"email=x":                         "",
		long:                              "a,b,a,b,a,b,a,b,a,b,a,b",
	} {
		v, err := decode(raw, true)
		if err != nil || strings.Join(v.expand, ",") != want || (want == "") != (v.expand == nil) {
			t.Errorf("%s: %q (%v), want %q", raw, v.expand, err, want)
		}
	}
	for _, tt := range []struct {
		raw        string
		closed     bool
		at, reason string
	}{
		{"email=a&email=b", false, "/email", "field given more than once"},
		{"email=abcdef", false, "/email", "length must be at most 5"},
		{"email=a&balance=x", false, "/balance", "must be an integer (int64)"},
		{"email=a&expand[0]=c", false, "/expand[0]", `must be one of "a", "b"`},
		{"email=a&expand[0]=a&expand[2]=b", false, "/expand[1]", "array index 1 is missing (the indices must run 0, 1, 2, … without gaps)"},
		{"email=a&expand[0]=a&expand[0]=b", false, "/expand[0]", "field given more than once"},
		{"email=a&expand[1]=a", false, "/expand[0]", "array index 0 is missing (the indices must run 0, 1, 2, … without gaps)"},
		{"email=a&expand[01]=a", false, "/expand[01]", "array index 01 is out of range or has a leading zero"},
		{"email=a&expand[x]=a", true, "/expand[x]", "field not allowed by the schema"},
		{"email=a&expand[0][y]=a", true, "/expand[0][y]", "field not allowed by the schema"},
		{"email=a&expand[]=a&expand[0]=b", false, "/expand[0]", "mixes unindexed (expand, expand[]) and indexed elements"},
		{"email=a" + strings.Repeat("&expand=a", 13), false, "/expand", "must have at most 12 items"},
		{"email=a&other[x]=1", true, "/other[x]", "field not allowed by the schema"},
		{"balance=1", false, "/email", "missing required field"},
		{"email=%zz", false, "/email", "'%' not followed by two hex digits"},
		{"email=a&email=b&balance=x", false, "/email", "field given more than once"},
		// An undeclared name whose brackets do not parse (a closed schema refuses any).
		{"email=a&other[x=1", false, "/other[x", badBrackets},
		{"email=a&[=1", false, "/[", badBrackets},
		{"email=a&o]x[y]=1", false, "/o]x[y]", badBrackets},
		{"email=a&Email[x]=1", false, "/Email[x]", canonical.CaseVariantReason("email")},
	} {
		_, err := decode(tt.raw, tt.closed)
		if at, reason := refusal(err); at != tt.at || reason != tt.reason {
			t.Errorf("%s: refused at %q: %q, want %q: %q", tt.raw, at, reason, tt.at, tt.reason)
		}
	}
}

// TestChecksReadAsDecoder: a constraint refuses a parameter or form field with the reason
// canonical.Decoder gives a JSON value.
func TestChecksReadAsDecoder(t *testing.T) {
	m := &Matcher{}
	for _, tt := range []struct {
		name string
		text func(c *checker)
		json func(d *canonical.Decoder)
	}{
		{"length exact", func(c *checker) { c.Length("ab", 3, 3) }, func(d *canonical.Decoder) { d.Length("ab", 3, 3) }},
		{"length min", func(c *checker) { c.Length("ab", 3, 9) }, func(d *canonical.Decoder) { d.Length("ab", 3, 9) }},
		{"length max", func(c *checker) { c.Length("abé", -1, 2) }, func(d *canonical.Decoder) { d.Length("abé", -1, 2) }},
		{"length max 0", func(c *checker) { c.Length("a", -1, 0) }, func(d *canonical.Decoder) { d.Length("a", -1, 0) }},
		{"items", func(c *checker) { c.Items(1, 2, -1) }, func(d *canonical.Decoder) { d.Items(1, 2, -1) }},
		{"items max", func(c *checker) { c.Items(3, -1, 2) }, func(d *canonical.Decoder) { d.Items(3, -1, 2) }},
		{"min", func(c *checker) { c.Min(0, 1) }, func(d *canonical.Decoder) { d.Min(0, 1) }},
		{"max big", func(c *checker) { c.Max(2e6, 1e6) }, func(d *canonical.Decoder) { d.Max(2e6, 1e6) }},
		{"exclusive min", func(c *checker) { c.ExclusiveMin(1, 1) }, func(d *canonical.Decoder) { d.ExclusiveMin(1, 1) }},
		{"exclusive max", func(c *checker) { c.ExclusiveMax(1, 1) }, func(d *canonical.Decoder) { d.ExclusiveMax(1, 1) }},
		{"min float", func(c *checker) { c.MinFloat(0.25, 0.5) }, func(d *canonical.Decoder) { d.MinFloat(0.25, 0.5) }},
		{"max float", func(c *checker) { c.MaxFloat(1e22, 1e21) }, func(d *canonical.Decoder) { d.MaxFloat(1e22, 1e21) }},
		{"exclusive min float", func(c *checker) { c.ExclusiveMinFloat(0, 0) }, func(d *canonical.Decoder) { d.ExclusiveMinFloat(0, 0) }},
		{"exclusive max float", func(c *checker) { c.ExclusiveMaxFloat(2.5, 2.5) }, func(d *canonical.Decoder) { d.ExclusiveMaxFloat(2.5, 2.5) }},
		{"pattern", func(c *checker) { c.Pattern("x", `^\d$`) }, func(d *canonical.Decoder) { d.Pattern("x", `^\d$`) }},
		{"enum", func(c *checker) { c.cur = "c"; c.Enum("a", "b") }, func(d *canonical.Decoder) {
			d.Reset([]byte(`"c"`))
			d.Enum("a", "b")
		}},
	} {
		c := checker{m: m, where: "", name: "x"}
		tt.text(&c)
		var d canonical.Decoder
		d.SetMatcher(m)
		tt.json(&d)
		_, text := refusal(c.err)
		var ce *canonical.Error
		if !errors.As(d.Err(), &ce) || ce.Reason != text {
			t.Errorf("%s: form field %q, JSON %v", tt.name, text, d.Err())
		}
	}
}

func TestBeginFramesTemplateParamsOnce(t *testing.T) {
	frame := func(path string, values map[string]string) canonical.Fingerprint {
		r := httptest.NewRequest("POST", "/", nil)
		var in Input
		in.Reset(r, nil, "", "", func(name string) string { return values[name] }, nil)
		in.Begin("op", "POST", path, nil, nil)
		return in.Sum()
	}
	var f canonical.Framer
	f.Begin("op", "POST", "/a/{x}.{y}/b/{x}")
	f.PathParam("x", "1")
	f.PathParam("y", "2")
	f.MediaType("")
	if got, want := frame("/a/{x}.{y}/b/{x}", map[string]string{"x": "1", "y": "2"}), f.Sum(); got != want {
		t.Errorf("Begin = %s, want %s", got, want)
	}
}

func TestInputReuse(t *testing.T) {
	in := newInput("/x?a=1", "email=x&email=y")
	f := in.Form()
	var seen uint64
	for f.Next() {
		f.Once(&seen, 0)
	}
	if in.Err() == nil {
		t.Fatal("duplicate field accepted")
	}
	in.Begin("op", "POST", "/x", []string{"a"}, nil)
	r := httptest.NewRequest("POST", "/y?a=2", nil)
	in.Reset(r, []byte("email=z"), "", "", nil, nil)
	if in.Err() != nil || in.Query().Get("a") != "2" {
		t.Fatalf("Reset kept state: err %v, query %v", in.Err(), in.Query())
	}
	f = in.Form()
	if !f.Next() || f.Str() != "z" || f.Next() {
		t.Error("Reset kept the parsed form")
	}
	in.SetBodyKey("k", true)
	if k, ok := in.BodyKey(); k != "k" || !ok {
		t.Error("BodyKey")
	}
}

// TestErrOrder: a body error is reported before a parameter error, and data after the JSON
// document is a body error, although the decode function reads on past both.
func TestErrOrder(t *testing.T) {
	decode := func(body string) error {
		in := newInput("/x?limit=x", body)
		d := in.JSON()
		if d.BeginObject() {
			for d.NextMember() {
				d.Skip()
			}
			d.EndObject()
		}
		in.Params().Query("limit", true).Int64()
		return in.Err()
	}
	for body, want := range map[string]string{
		`{"a":1}`:    "/query/limit",
		`{"a":1} {}`: "",
		`{"a":}`:     "/a",
	} {
		if at, text := refusal(decode(body)); at != want {
			t.Errorf("%s: refused at %q (%s), want %q", body, at, text, want)
		}
	}
}

// TestBeginFramesRequestLine: Begin frames what the generated fingerprint functions framed, in
// their order: path values in template order, the given query parameters (absent differs from
// empty), the media type and the given headers.
func TestBeginFramesRequestLine(t *testing.T) {
	r := httptest.NewRequest("POST", "/s/7/o?b=2&a=1&a=3&c=&z=9", nil)
	r.Header.Add("X-H", "h1")
	r.Header.Add("X-H", "h2")
	r.SetPathValue("store", "7")
	var in Input
	in.Reset(r, nil, "application/json", "application/json", nil, nil)
	in.Begin("op", "POST", "/s/{store}/o", []string{"a", "b", "c", "d"}, []string{"X-H", "X-None"})
	in.RawBody()
	var f canonical.Framer
	f.Begin("op", "POST", "/s/{store}/o")
	f.PathParam("store", "7")
	f.Query("a", []string{"1", "3"})
	f.Query("b", []string{"2"})
	f.Query("c", []string{""})
	f.Query("d", nil)
	f.MediaType("application/json")
	f.Header("X-H", []string{"h1", "h2"})
	f.Header("X-None", nil)
	f.RawBody(nil)
	if got, want := in.Sum(), f.Sum(); got != want {
		t.Errorf("Begin framed %s, want %s", got, want)
	}
}

func TestSetBodyKeyAt(t *testing.T) {
	for _, tc := range []struct {
		body    string
		tokens  []string
		key     string
		present bool
	}{
		{`{"idempotency_key":"k-1","amount":1}`, []string{"idempotency_key"}, "k-1", true},
		{`{"data":{"key":"k\u002d2"}}`, []string{"data", "key"}, "k-2", true},
		{`{"amount":1}`, []string{"idempotency_key"}, "", false},
		{`{"idempotency_key":null}`, []string{"idempotency_key"}, "", false},
		{`{"idempotency_key":7}`, []string{"idempotency_key"}, "", false},
		{`[1,2]`, []string{"idempotency_key"}, "", false},
	} {
		var in Input
		in.SetBodyKeyAt([]byte(tc.body), tc.tokens...)
		if k, ok := in.BodyKey(); k != tc.key || ok != tc.present {
			t.Errorf("%s %v: key %q %v, want %q %v", tc.body, tc.tokens, k, ok, tc.key, tc.present)
		}
	}
}
