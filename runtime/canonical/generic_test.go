package canonical

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The example of RFC 8785 section 3.2.2 (whitespace and line breaks as in the RFC). Its first
// number, 333333333.33333329, has 17 significant digits and rounds to 333333333.3333333 as the
// RFC says; a spelling with more digits than a double holds is refused (see "Numbers" in the
// package doc and TestInexactNumbersRefused).
func TestRFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	if got := canon(t, in); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// assertInexact checks that the generic canonicalizer refuses in at pointer as a number that
// is not exactly a double.
func assertInexact(t *testing.T, in, pointer string) {
	t.Helper()
	_, err := AppendCanonical(nil, []byte(in))
	var e *Error
	if !errors.As(err, &e) || e.Pointer != pointer || e.Reason != reasonInexact {
		t.Errorf("%s: got %v, want the inexact-number refusal at %s", in, err, pointer)
	}
}

// The sorting example of RFC 8785 section 3.2.3: UTF-16 code unit order puts U+1F600 (a
// surrogate pair) before U+FB33.
func TestRFC8785Sorting(t *testing.T) {
	in := `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	if got := canon(t, in); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// jcsInexact are the vectors holding a number with more significant digits than a double holds,
// with its pointer (none of the published vectors does).
var jcsInexact = map[string]string{}

func TestJCSVectors(t *testing.T) {
	files, err := filepath.Glob("testdata/jcs/input/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("testdata/jcs/output", filepath.Base(f)))
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := jcsInexact[filepath.Base(f)]; ok {
			// RFC 8785 rounds such numbers; idemgen refuses them, and the output is canonical.
			assertInexact(t, string(in), p)
		} else if got := canon(t, string(in)); got != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", f, got, want)
		}
		if again := canon(t, string(want)); again != string(want) {
			t.Errorf("%s: output is not a fixed point: %s", f, again)
		}
	}
}

func TestCompare16(t *testing.T) {
	ordered := []string{"", "\r", "1", "A", "a", "aa", "\u0080", "ö", "€", "\ud7ff", "😀", "😂", "\ue000", "\ufb33", "\uffff"}
	for i := range ordered {
		for j := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := Compare(ordered[i], ordered[j]); got != want {
				t.Errorf("Compare(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func TestStrings(t *testing.T) {
	cases := map[string]string{
		`"caf\u00e9 \/ bar"`:      `"café / bar"`,
		`"café / bar"`:            `"café / bar"`,
		`"\u0000\u001f\u007f"`:    "\"\\u0000\\u001f\u007f\"",
		`"\b\f\n\r\t\"\\"`:        `"\b\f\n\r\t\"\\"`,
		`"\u0008\u000C\u000a"`:    `"\b\f\n"`,
		`"\u2028\u2029"`:          "\"\u2028\u2029\"",
		`"\uD83D\uDE00"`:          `"😀"`,
		`"<\u003e&"`:              `"<>&"`,
		`"\u0022\u005C\u002F"`:    `"\"\\/"`,
		"\"\xf0\x9f\x98\x80\"":    `"😀"`,
		`"\uffff\ufffe\ufdd0"`:    "\"\uffff\ufffe\ufdd0\"",
		`"ascii only, no escape"`: `"ascii only, no escape"`,
	}
	for in, want := range cases {
		if got := canon(t, in); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
		if got := string(AppendString(nil, mustText(t, in))); got != want {
			t.Errorf("AppendString(%s): got %s, want %s", in, got, want)
		}
	}
	if got := string(AppendString(nil, "a\xffb")); got != "\"a\uFFFDb\"" {
		t.Errorf("invalid UTF-8: got %q", got)
	}
}

func mustText(t *testing.T, in string) string {
	t.Helper()
	var d Decoder
	d.Reset([]byte(in))
	s := d.Str()
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Strict input, as the generated decoder's (docs/design.md section 4): every refusal is an *Error
// naming the value and the byte.
func TestStrictRefusals(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	cases := []struct {
		in, pointer string
		offset      int
		reason      string
	}{
		{`{"amount": 100, "currency": "EUR", "to": "acc_1", "amount": 999}`, "/amount", 50, "duplicate member name"},
		{`{"a":{"x":1,"y":2,"x":3}}`, "/a/x", 18, "duplicate member name"},
		{`{"a":{"y":1,"x":2,"y":3}}`, "/a/y", 18, "duplicate member name"},
		{`[{"k":1},{"k":1,"k":2}]`, "/1/k", 16, "duplicate member name"},
		{`{"a":1,"\u0061":2}`, "/a", 7, "duplicate member name"},
		{"{\"a\":\"\xc3\x28\"}", "/a", 6, "invalid UTF-8"},
		{"{\"\xed\xa0\x80\":1}", "", 2, "invalid UTF-8"},
		{"\"\xf4\x90\x80\x80\"", "", 1, "invalid UTF-8"},
		{`{"a":"\ud800"}`, "/a", 6, "lone high surrogate escape"},
		{`{"a":"\ud800\u0041"}`, "/a", 6, "lone high surrogate escape"},
		{`{"a":"\udc00\ud800"}`, "/a", 6, "lone low surrogate escape"},
		{`{"a":"x\udfff"}`, "/a", 7, "lone low surrogate escape"},
		{`{"n":1e309}`, "/n", 5, "number outside the float64 range"},
		{`{"n":-1.8e308}`, "/n", 5, "number outside the float64 range"},
		{`{"a":1} {}`, "", 8, "unexpected data after the document"},
		{`{"a":1}x`, "", 7, "unexpected data after the document"},
		{deep, "/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0", MaxDepth, "nesting deeper than 64"},
		{"\xef\xbb\xbf{}", "", 0, "expected a value, found byte 0xef"},
		{`{"a":01}`, "/a", 6, "expected ',' or '}', found a number"},
		{`{"a":1.}`, "/a", 5, "malformed number"},
		{`{"a":.5}`, "/a", 5, "expected a value, found character '.'"},
		{`{"a":+1}`, "/a", 5, "expected a value, found character '+'"},
		{`{"a":NaN}`, "/a", 5, "expected a value, found character 'N'"},
		{`{"a":tru}`, "/a", 5, "invalid literal"},
		{`{"a":"x` + "\t" + `"}`, "/a", 7, "control character in string"},
		{`{"a":"\x"}`, "/a", 6, "invalid escape sequence"},
		{`{"a":"\u12"}`, "/a", 6, "invalid \\u escape"},
		{`{"a":1,}`, "/a", 7, "expected a member name, found character '}'"},
		{`{'a':1}`, "", 1, "expected a member name, found character '\\''"},
		{`[1,]`, "/1", 3, "expected a value, found character ']'"},
		{`{"a" 1}`, "/a", 5, "expected ':', found a number"},
		{`{"a":1`, "/a", 6, "unexpected end of input"},
		{`"abc`, "", 4, "unterminated string"},
		{``, "", 0, "unexpected end of input"},
		{`  `, "", 2, "unexpected end of input"},
		{`{"a/b~c":[true,{"d":x}]}`, "/a~1b~0c/1/d", 20, "expected a value, found character 'x'"},
	}
	for _, c := range cases {
		_, err := AppendCanonical(nil, []byte(c.in))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: accepted or untyped error %v", c.in, err)
			continue
		}
		if e.Pointer != c.pointer || e.Offset != c.offset || e.Reason != c.reason {
			t.Errorf("%q:\n got %q @%d %q\nwant %q @%d %q", c.in, e.Pointer, e.Offset, e.Reason, c.pointer, c.offset, c.reason)
		}
	}
}

func TestNestingLimit(t *testing.T) {
	ok := strings.Repeat(`{"a":`, MaxDepth-1) + "[]" + strings.Repeat("}", MaxDepth-1)
	if _, err := AppendCanonical(nil, []byte(ok)); err != nil {
		t.Errorf("depth %d refused: %v", MaxDepth, err)
	}
	tooDeep := strings.Repeat(`{"a":`, MaxDepth) + "[]" + strings.Repeat("}", MaxDepth)
	if _, err := AppendCanonical(nil, []byte(tooDeep)); err == nil {
		t.Errorf("depth %d accepted", MaxDepth+1)
	}
}

// A number closer to zero than the smallest double would become 0: refused like any other
// number a double does not hold, while 0 in any spelling is exact.
func TestUnderflowRefused(t *testing.T) {
	assertInexact(t, "[0,1e-400]", "/1")
	assertInexact(t, "[-2.5e-999]", "/0")
	if got := canon(t, "[0.0,-0,0e-999,0E+400,-0.000e5]"); got != "[0,0,0,0,0]" {
		t.Errorf("zeros: got %s", got)
	}
}

func TestExclusion(t *testing.T) {
	ex, err := NewExclusion("/client_timestamp", "/metadata/trace_id", "/lines/*/note", "/a~1b", "/lines/0/sku")
	if err != nil {
		t.Fatal(err)
	}
	in := `{"client_timestamp":"t","metadata":{"trace_id":"x","k":"v"},"a/b":1,"lines":[{"sku":"A","note":"n"},{"note":"m","sku":"B"}],"z":[1]}`
	want := `{"lines":[{},{"sku":"B"}],"metadata":{"k":"v"},"z":[1]}`
	got, err := AppendCanonicalExcluding(nil, []byte(in), ex)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Excluded members are still checked: a duplicate of one is refused.
	if _, err := AppendCanonicalExcluding(nil, []byte(`{"client_timestamp":1,"client_timestamp":2}`), ex); err == nil {
		t.Error("duplicate excluded member accepted")
	}
	for _, bad := range []string{"", "a", "/a~2"} {
		if _, err := NewExclusion(bad); err == nil {
			t.Errorf("NewExclusion(%q) accepted", bad)
		}
	}
}

// AppendString (with its eight-byte fast path) agrees with the byte-wise writer on strings
// with special characters at every position.
func TestAppendStringPositions(t *testing.T) {
	specials := []string{`"`, `\`, "\x01", "\x1f", "\x7f", "é", "😀", "\u2028", "a"}
	for n := 0; n < 20; n++ {
		for _, sp := range specials {
			s := strings.Repeat("x", n) + sp + strings.Repeat("y", 19-n)
			want := string(appendQuotedValid(nil, []byte(s)))
			if got := string(AppendString(nil, s)); got != want {
				t.Errorf("%q: got %s, want %s", s, got, want)
			}
			if got := canon(t, want); got != want {
				t.Errorf("%q: not canonical: %s", s, want)
			}
		}
	}
}

// The string scanner (with its eight-byte fast path) finds a special byte at every position.
func TestScanStringPositions(t *testing.T) {
	for n := 0; n < 24; n++ {
		pre, post := strings.Repeat("x", n), strings.Repeat("y", 23-n)
		for bad, reason := range map[string]string{"\x01": "control character in string", "\xff": "invalid UTF-8", `\q`: "invalid escape sequence", `\ud800`: "lone high surrogate escape"} {
			_, err := AppendCanonical(nil, []byte(`"`+pre+bad+post+`"`))
			var e *Error
			if !errors.As(err, &e) || e.Offset != 1+n || e.Reason != reason {
				t.Errorf("%q at %d: got %v", bad, n, err)
			}
		}
		for in, want := range map[string]string{`\n`: `\n`, `\u00e9`: "é", `\/`: "/", `\"`: `\"`, "é": "é"} {
			got := canon(t, `"`+pre+in+post+`"`)
			if got != `"`+pre+want+post+`"` {
				t.Errorf("%q at %d: got %s", in, n, got)
			}
		}
	}
}
