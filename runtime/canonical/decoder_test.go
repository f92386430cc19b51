package canonical

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func decodeOne[T any](t *testing.T, in string, read func(*Decoder) T) (T, error) {
	t.Helper()
	var d Decoder
	d.Reset([]byte(in))
	v := read(&d)
	return v, d.Finish()
}

// Integers stay exact (docs/design.md section 3: no float64 round trip above 2^53).
func TestInt64Exact(t *testing.T) {
	ok := map[string]int64{
		"9007199254740993":       9007199254740993,
		"9007199254740992":       9007199254740992,
		"9223372036854775807":    math.MaxInt64,
		"-9223372036854775808":   math.MinInt64,
		"1.0":                    1,
		"1e0":                    1,
		"0.1e1":                  1,
		"100e-2":                 1,
		"1.5e1":                  15,
		"12e3":                   12000,
		"-0":                     0,
		"0e99999":                0,
		"0.000":                  0,
		"922337203685477580.7e1": math.MaxInt64,
		"-42":                    -42,
	}
	for in, want := range ok {
		got, err := decodeOne(t, in, (*Decoder).Int64)
		if err != nil || got != want {
			t.Errorf("%s: got %d, %v; want %d", in, got, err, want)
		}
	}
	bad := map[string]string{
		"9223372036854775808":  "integer outside the int64 range",
		"-9223372036854775809": "integer outside the int64 range",
		"1e19":                 "integer outside the int64 range",
		"1e99999999999":        "integer outside the int64 range",
		"1.5":                  "not an integer",
		"1e-1":                 "not an integer",
		"1.00000000000000000000000000000000000000000000001": "not an integer",
		`"1"`:  "expected a number, found a string",
		"true": "expected a number, found a boolean",
	}
	for in, reason := range bad {
		_, err := decodeOne(t, in, (*Decoder).Int64)
		var e *Error
		if !errors.As(err, &e) || e.Reason != reason {
			t.Errorf("%s: got %v, want %q", in, err, reason)
		}
	}
	// The canonical digits of an integer are exact, unlike the generic (double) form.
	v, _ := decodeOne(t, "9007199254740993", (*Decoder).Int64)
	if got := string(AppendInt(nil, v)); got != "9007199254740993" {
		t.Errorf("AppendInt: %s", got)
	}
}

func TestFloat64(t *testing.T) {
	for in, want := range map[string]float64{"10.5": 10.5, "1.05e1": 10.5, "-0": 0, "5e-324": 5e-324} {
		got, err := decodeOne(t, in, (*Decoder).Float64)
		if err != nil || got != want {
			t.Errorf("%s: got %v, %v", in, got, err)
		}
	}
	if _, err := decodeOne(t, "1e400", (*Decoder).Float64); err == nil {
		t.Error("1e400 accepted")
	}
}

func TestDecoderTokens(t *testing.T) {
	in := ` { "Amount" : 1, "a\u006dount": [true, false, null, "x"], "raw": {"b": [1.0], "a": "\u00e9"}, "z": {} } `
	var d Decoder
	d.Reset([]byte(in))
	var names []string
	var seen uint64
	var raw []byte
	var extra Members
	var arr []string
	if !d.BeginObject() {
		t.Fatal(d.Err())
	}
	for d.NextMember() {
		names = append(names, string(d.Name()))
		switch string(d.Name()) {
		case "amount": // case-sensitive: "Amount" is not this member
			d.Once(&seen, 0)
			if !d.BeginArray() {
				break
			}
			for d.NextElement() {
				switch {
				case d.Null():
					arr = append(arr, "null")
				case d.Index() < 2:
					if d.Bool() {
						arr = append(arr, "true")
					} else {
						arr = append(arr, "false")
					}
				default:
					arr = append(arr, d.Str())
				}
			}
			d.EndArray()
		case "raw":
			raw = d.Raw()
		default:
			d.Unknown(&extra)
		}
	}
	d.EndObject()
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
	if got := fmtList(names); got != "Amount amount raw z" {
		t.Errorf("names %s", got)
	}
	if got := fmtList(arr); got != "true false null x" {
		t.Errorf("array %s", got)
	}
	if string(raw) != `{"a":"é","b":[1]}` {
		t.Errorf("raw %s", raw)
	}
	if len(extra) != 2 || extra[0].Name != "Amount" || string(extra[0].Value) != "1" || extra[1].Name != "z" || string(extra[1].Value) != "{}" {
		t.Errorf("extra %+v", extra)
	}
}

func fmtList(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

func TestDecoderErrors(t *testing.T) {
	readObj := func(d *Decoder) (v struct{ A int64 }) {
		var seen uint64
		var extra Members
		if !d.BeginObject() {
			return
		}
		for d.NextMember() {
			switch string(d.Name()) {
			case "a":
				if !d.Once(&seen, 0) {
					return
				}
				v.A = d.Int64()
				if v.A < 1 {
					d.Invalid("minimum is 1")
				}
			case "closed":
				d.Reject()
			default:
				d.Unknown(&extra)
			}
		}
		d.EndObject()
		if seen&1 == 0 {
			d.Missing("a")
		}
		return
	}
	cases := []struct{ in, pointer, reason string }{
		{`{"a":1,"a":2}`, "/a", "duplicate member name"},
		{`{"a":0}`, "/a", "minimum is 1"},
		{`{"b":1}`, "", `missing required member "a"`},
		{`{"a":1,"b":1,"b":2}`, "/b", "duplicate member name"},
		{`{"a":1,"b":{"c":1,"c":1}}`, "/b/c", "duplicate member name"},
		{`{"a":1,"closed":1}`, "/closed", "member not allowed by the schema"},
		{`[]`, "", "expected an object, found an array"},
		{`{"a":1} 2`, "", "unexpected data after the document"},
		{`{"a":"1"}`, "/a", "expected a number, found a string"},
	}
	for _, c := range cases {
		_, err := decodeOne(t, c.in, readObj)
		var e *Error
		if !errors.As(err, &e) || e.Pointer != c.pointer || e.Reason != c.reason {
			t.Errorf("%s: got %v, want %q at %q", c.in, err, c.reason, c.pointer)
		}
	}
	if v, err := decodeOne(t, `{"x":[1,{"y":null}],"a":7}`, readObj); err != nil || v.A != 7 {
		t.Errorf("valid: %v %v", v, err)
	}
}

func TestDecodeMapAndArray(t *testing.T) {
	m, err := decodeOne(t, `{"b":"2","a":"1"}`, func(d *Decoder) (m map[string]string) {
		DecodeMap(d, &m, (*Decoder).Str)
		return
	})
	if err != nil || len(m) != 2 || m["a"] != "1" || m["b"] != "2" {
		t.Errorf("map %v %v", m, err)
	}
	if got := string(AppendMap(nil, m, AppendString)); got != `{"a":"1","b":"2"}` {
		t.Errorf("AppendMap %s", got)
	}
	if got := string(AppendMap(nil, m, AppendString, "a")); got != `{"b":"2"}` {
		t.Errorf("AppendMap excluding %s", got)
	}
	_, err = decodeOne(t, `{"k":"1","k":"2"}`, func(d *Decoder) (m map[string]string) {
		DecodeMap(d, &m, (*Decoder).Str)
		return
	})
	var e *Error
	if !errors.As(err, &e) || e.Pointer != "/k" || e.Reason != "duplicate member name" {
		t.Errorf("map duplicate: %v", err)
	}
	s, err := decodeOne(t, `[3, 1.0, 2e0]`, func(d *Decoder) (s []int64) {
		DecodeArray(d, &s, (*Decoder).Int64)
		return
	})
	if err != nil || len(s) != 3 || s[1] != 1 {
		t.Errorf("array %v %v", s, err)
	}
	if got := string(AppendArray(nil, s, AppendInt)); got != "[3,1,2]" {
		t.Errorf("AppendArray %s", got)
	}
	e0, err := decodeOne(t, `[]`, func(d *Decoder) (s []int64) {
		DecodeArray(d, &s, (*Decoder).Int64)
		return
	})
	if err != nil || e0 == nil || len(e0) != 0 {
		t.Errorf("empty array %v %v", e0, err)
	}
}

func TestMembersMerge(t *testing.T) {
	x := Members{{Name: "a", Value: []byte("1")}, {Name: "c", Value: []byte("2")}, {Name: "zz", Value: []byte("3")}}
	b := []byte{'{'}
	start := len(b)
	b, x = x.AppendBefore(b, start, "b")
	b = Comma(b, start)
	b = append(b, `"b":0`...)
	b, x = x.AppendBefore(b, start, "d")
	b = x.AppendAll(b, start)
	b = append(b, '}')
	if string(b) != `{"a":1,"b":0,"c":2,"zz":3}` {
		t.Errorf("got %s", b)
	}
}

// A fixed-shape decode does not allocate beyond the strings it returns.
func TestDecoderAllocs(t *testing.T) {
	in := []byte(`{"a":[1,2,3],"b":{"c":true,"d":null},"e":1.5}`)
	n := testing.AllocsPerRun(100, func() {
		var d Decoder
		d.Reset(in)
		d.BeginObject()
		for d.NextMember() {
			switch string(d.Name()) {
			case "a":
				d.BeginArray()
				for d.NextElement() {
					d.Int64()
				}
				d.EndArray()
			case "b":
				d.BeginObject()
				for d.NextMember() {
					if !d.Null() {
						d.Bool()
					}
				}
				d.EndObject()
			default:
				d.Float64()
			}
		}
		d.EndObject()
		if d.Finish() != nil {
			panic("decode")
		}
	})
	if n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func TestNullable(t *testing.T) {
	read := func(d *Decoder) (v []Nullable[string]) {
		DecodeArray(d, &v, func(d *Decoder) Nullable[string] { return DecodeNullable(d, (*Decoder).Str) })
		return
	}
	v, err := decodeOne(t, `[null,"x",""]`, read)
	if err != nil || len(v) != 3 || !v[0].Null || v[1].Value != "x" || v[2].Null {
		t.Fatalf("%+v %v", v, err)
	}
	if got := string(AppendArray(nil, v, func(b []byte, x Nullable[string]) []byte {
		return AppendNullable(b, x, AppendString)
	})); got != `[null,"x",""]` {
		t.Errorf("got %s", got)
	}
	s := "y"
	if got := string(AppendOrNull(AppendOrNull(nil, (*string)(nil), AppendString), &s, AppendString)); got != `null"y"` {
		t.Errorf("AppendOrNull %s", got)
	}
	if _, err := decodeOne(t, `[nul]`, read); err == nil {
		t.Error("nul accepted")
	}
}

func TestSkip(t *testing.T) {
	var d Decoder
	d.Reset([]byte(`[{"b":{"d":1,"c":2},"a":[3]}, 2]`))
	d.BeginArray()
	d.NextElement()
	d.Skip()
	d.NextElement()
	if n := d.Int64(); n != 2 {
		t.Errorf("after Skip: %d", n)
	}
	d.NextElement()
	d.EndArray()
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
	d.Reset([]byte(`[{"b":1,"a":2,"b":3}]`))
	d.BeginArray()
	d.NextElement()
	d.Skip()
	if d.Finish() == nil {
		t.Error("Skip accepted a duplicate")
	}
}

// TestTextScalars: under TextScalars a number or boolean may be a string holding its JSON text,
// with JSON's rules; without it such a string stays an error, and Reset turns it off.
func TestTextScalars(t *testing.T) {
	read := func(in string, text bool, f func(*Decoder)) error {
		var d Decoder
		d.Reset([]byte(in))
		if text {
			d.TextScalars()
		}
		f(&d)
		return d.Finish()
	}
	var n int64
	var x float64
	var b bool
	for in, want := range map[string]int64{`"42"`: 42, `"-7"`: -7, `"1.0"`: 1, `"1e2"`: 100, `12`: 12} {
		if err := read(in, true, func(d *Decoder) { n = d.Int64() }); err != nil || n != want {
			t.Errorf("Int64(%s) = %d, %v; want %d", in, n, err, want)
		}
	}
	if err := read(`"2.5"`, true, func(d *Decoder) { x = d.Float64() }); err != nil || x != 2.5 {
		t.Errorf("Float64 = %v, %v", x, err)
	}
	for in, want := range map[string]bool{`"true"`: true, `"false"`: false, `true`: true} {
		if err := read(in, true, func(d *Decoder) { b = d.Bool() }); err != nil || b != want {
			t.Errorf("Bool(%s) = %v, %v", in, b, err)
		}
	}
	bad := map[string]string{
		`"1.5"`: "not an integer", `" 1"`: `expected a number, found the text " 1"`, `"1 "`: `found the text "1 "`,
		`""`: `found the text ""`, `"0x10"`: `found the text "0x10"`, `"\u0031"`: `found the text "\\u0031"`,
	}
	for in, want := range bad {
		err := read(in, true, func(d *Decoder) { d.Int64() })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Int64(%s): %v, want an error with %q", in, err, want)
		}
	}
	if err := read(`"yes"`, true, func(d *Decoder) { d.Bool() }); err == nil || !strings.Contains(err.Error(), `expected a boolean (true or false), found the text "yes"`) {
		t.Errorf("Bool(yes): %v", err)
	}
	if err := read(`"42"`, false, func(d *Decoder) { d.Int64() }); err == nil || !strings.Contains(err.Error(), "expected a number, found a string") {
		t.Errorf("without TextScalars: %v", err)
	}
	var d Decoder
	d.Reset([]byte(`"1"`))
	d.TextScalars()
	d.Reset([]byte(`"1"`))
	if d.Int64(); d.Finish() == nil {
		t.Error("Reset kept TextScalars")
	}
}
