package canonical

import (
	"errors"
	"strings"
	"testing"
)

// point is a struct decoder written the way the generator writes them, with the helpers of
// check.go: required members first in the seen bits.
type point struct {
	X, Y  int64
	Label *string
	Kind  string
	Tags  []string
	Attrs map[string]int64
	Extra Members
}

func decodePoint(d *Decoder, v *point) {
	var seen uint64
	for d.BeginObject(); d.NextMember(); {
		switch string(d.Name()) {
		case "x":
			v.X = d.Field(&seen, 0).Int64()
			d.Min(v.X, 0)
		case "y":
			v.Y = int64(d.Field(&seen, 1).Int32())
		case "label":
			v.Label = Ptr(d.Field(&seen, 2).Str())
			d.Length(*v.Label, 1, 3)
			d.Pattern(*v.Label, "^[a-z]+$")
		case "kind":
			v.Kind = d.Field(&seen, 3).Enum("a", "b")
		case "tags":
			v.Tags = []string{}
			for d.Field(&seen, 4).BeginArray(); d.NextElement(); {
				v.Tags = append(v.Tags, d.Str())
			}
			d.EndArray()
			d.Items(len(v.Tags), -1, 2)
		case "attrs":
			v.Attrs = map[string]int64{}
			for d.Field(&seen, 5).BeginObject(); d.NextMember(); {
				v.Attrs[MapKey(d, v.Attrs)] = d.Int64()
			}
			d.EndObject()
		default:
			d.Unknown(&v.Extra)
		}
	}
	d.EndObject()
	d.Required(seen, "x", "y")
}

type matchFunc func(pattern, s string) bool

func (f matchFunc) Match(pattern, s string) bool { return f(pattern, s) }

func TestDecoderChecks(t *testing.T) {
	lower := matchFunc(func(pattern, s string) bool {
		return pattern == "^[a-z]+$" && strings.ToLower(s) == s
	})
	decode := func(in string, m Matcher) (point, error) {
		var d Decoder
		d.SetMatcher(m)
		d.Reset([]byte(in))
		var v point
		decodePoint(&d, &v)
		return v, d.Finish()
	}
	v, err := decode(`{"y":-2,"x":1,"label":"ab","kind":"b","tags":["t"],"attrs":{"k":1},"z":null}`, lower)
	if err != nil || v.X != 1 || v.Y != -2 || *v.Label != "ab" || v.Kind != "b" || v.Tags[0] != "t" || v.Attrs["k"] != 1 || len(v.Extra) != 1 {
		t.Fatalf("%+v, %v", v, err)
	}
	for _, tt := range []struct {
		in, pointer, reason string
	}{
		{`{"x":1,"x":2,"y":0}`, "/x", "duplicate member name"},
		{`{"x":1}`, "", `missing required member "y"`},
		{`{"y":1}`, "", `missing required member "x"`},
		{`{"x":-1,"y":0}`, "/x", "must be at least 0"},
		{`{"x":1,"y":2147483648}`, "/y", "outside the int32 range"},
		{`{"x":1,"y":0,"label":""}`, "/label", "length must be at least 1"},
		{`{"x":1,"y":0,"label":"abcd"}`, "/label", "length must be at most 3"},
		{`{"x":1,"y":0,"label":"AB"}`, "/label", `must match the pattern "^[a-z]+$"`},
		{`{"x":1,"y":0,"kind":"c"}`, "/kind", `must be one of "a", "b"`},
		{`{"x":1,"y":0,"tags":["a","b","c"]}`, "/tags", "must have at most 2 items"},
		{`{"x":1,"y":0,"attrs":{"k":1,"k":2}}`, "/attrs/k", "duplicate member name"},
		{`{"x":1,"y":0,"kind":1}`, "/kind", "expected a string, found a number"},
	} {
		_, err := decode(tt.in, lower)
		var ce *Error
		if !errors.As(err, &ce) || ce.Pointer != tt.pointer || ce.Reason != tt.reason {
			t.Errorf("%s: %v, want %q at %q", tt.in, err, tt.reason, tt.pointer)
		}
	}
	// Without a Matcher a pattern check never passes: no value goes through unchecked.
	if _, err := decode(`{"x":1,"y":0,"label":"ab"}`, nil); err == nil {
		t.Error("pattern checked without a Matcher")
	}
}

func TestBoundReasons(t *testing.T) {
	for _, tt := range []struct {
		check  func(d *Decoder)
		reason string
	}{
		{func(d *Decoder) { d.Max(2, 1) }, "must be at most 1"},
		{func(d *Decoder) { d.Max(2e6, 1e6) }, "must be at most 1e+06"},
		{func(d *Decoder) { d.ExclusiveMin(0, 0) }, "must be greater than 0"},
		{func(d *Decoder) { d.ExclusiveMax(5, 5) }, "must be less than 5"},
		{func(d *Decoder) { d.MinFloat(0.1, 0.5) }, "must be at least 0.5"},
		{func(d *Decoder) { d.MaxFloat(1, 0.5) }, "must be at most 0.5"},
		{func(d *Decoder) { d.ExclusiveMinFloat(0.5, 0.5) }, "must be greater than 0.5"},
		{func(d *Decoder) { d.ExclusiveMaxFloat(0.5, 0.5) }, "must be less than 0.5"},
		{func(d *Decoder) { d.Length("abc", 2, 2) }, "length must be 2"},
		{func(d *Decoder) { d.Length("a", -1, 0) }, "length must be at most 0"},
		{func(d *Decoder) { d.Items(0, 1, -1) }, "must have at least 1 items"},
	} {
		var d Decoder
		tt.check(&d)
		var ce *Error
		if err := d.Err(); !errors.As(err, &ce) || ce.Reason != tt.reason {
			t.Errorf("got %v, want %q", err, tt.reason)
		}
	}
	var d Decoder
	d.Min(1, 1)
	d.Max(1, 1)
	d.Length("é", 1, 1)
	d.Length("", 0, -1)
	d.Items(2, 2, 2)
	if err := d.Err(); err != nil {
		t.Errorf("a value on its bounds refused: %v", err)
	}
}

func TestGrowAndPtr(t *testing.T) {
	var s []point
	Grow(&s).X = 1
	Grow(&s).X = 2
	if len(s) != 2 || s[0].X != 1 || s[1].X != 2 {
		t.Errorf("Grow: %+v", s)
	}
	p := Ptr(3)
	*p = 4
	if q := Ptr(3); *q != 3 || *p != 4 {
		t.Error("Ptr shares its value")
	}
}

// TestReasonFunctions: each bound keeps its edge (a minimum admits the bound, an exclusive one does
// not), integers compare exactly above 2^53, where float64 would round both sides to the same
// value, and the reason names the bound.
func TestReasonFunctions(t *testing.T) {
	const big = int64(1)<<53 + 1
	for _, tt := range []struct {
		name, got, want string
	}{
		{"min at bound", MinReason(int64(1), 1), ""},
		{"min below", MinReason(int64(0), 1), "must be at least 1"},
		{"max at bound", MaxReason(2.5, 2.5), ""},
		{"max above", MaxReason(2.6, 2.5), "must be at most 2.5"},
		{"exclusive min at bound", ExclusiveMinReason(int64(1), 1), "must be greater than 1"},
		{"exclusive min above", ExclusiveMinReason(1.5, 1), ""},
		{"exclusive max at bound", ExclusiveMaxReason(0.0, 0), "must be less than 0"},
		{"exclusive max below", ExclusiveMaxReason(-0.5, 0), ""},
		{"min exact above 2^53", MinReason(big-1, big), "must be at least " + Bound(float64(big))},
		{"max exact above 2^53", MaxReason(big, big-1), "must be at most " + Bound(float64(big-1))},
		{"exclusive max exact above 2^53", ExclusiveMaxReason(big-1, big), ""},
		{"length absent", StringLengthReason("", -1, -1), ""},
		{"length in code points", StringLengthReason("ééé", 1, 3), ""},
		{"length over", StringLengthReason("éééé", 1, 3), LengthReason(4, 1, 3)},
		{"string enum", OneOf([]string{"a", `b"`}), `must be one of "a", "b\""`},
		{"enum of JSON texts", OneOfJSON([]string{"1", "2.5", "null"}), "must be one of 1, 2.5, null"},
		{"boolean enum", BoolEnumReason(false), "must be false"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// TestMultipleOfReason: multipleOf is exact arithmetic, not float64 division: integers by their
// remainder (2^53+1 is odd, though float64 rounds it to the even 2^53), numbers as the decimals
// they are written as (19.99 is a multiple of 0.01, 0.1+0.2 is not one of 0.1 although its
// float64 quotient rounds to 3).
func TestMultipleOfReason(t *testing.T) {
	const big = int64(1)<<53 + 1
	tenth := 0.1 // a variable: Go's constant arithmetic would make 0.1+0.2 exactly 0.3
	for _, tt := range []struct {
		name, got, want string
	}{
		{"integer multiple", MultipleOfReason(int64(15), 5), ""},
		{"integer not", MultipleOfReason(int64(16), 5), "must be a multiple of 5"},
		{"zero value", MultipleOfReason(int64(0), 7), ""},
		{"zero number", MultipleOfReason(0.0, 0.01), ""},
		{"negative multiple", MultipleOfReason(int64(-15), 5), ""},
		{"negative not", MultipleOfReason(int64(-16), 5), "must be a multiple of 5"},
		{"2^53+1 not of 2", MultipleOfReason(big, 2), "must be a multiple of 2"},
		{"2^53+1 of 3", MultipleOfReason(big, 3), ""}, // 9007199254740993 = 3 × 3002399751580331
		{"max int64 of 7", MultipleOfReason(int64(1<<63-1), 7), ""},
		{"min int64 of 2", MultipleOfReason(int64(-1<<63), 2), ""},
		{"cents", MultipleOfReason(19.99, 0.01), ""},
		{"cents negative", MultipleOfReason(-19.99, 0.01), ""},
		{"not cents", MultipleOfReason(19.999, 0.01), "must be a multiple of 0.01"},
		{"float trap", MultipleOfReason(tenth+0.2, 0.1), "must be a multiple of 0.1"},
		{"float trap written", MultipleOfReason(0.3, 0.1), ""},
		{"quotient rounds to an integer", MultipleOfReason(1+1e-15, 1), "must be a multiple of 1"},
		{"exponent form", MultipleOfReason(1e2, 25), ""},
		{"exponent divisor", MultipleOfReason(3e-7, 1e-7), ""},
		{"exponent not", MultipleOfReason(3.5e-7, 1e-7), "must be a multiple of 1e-07"},
		{"large exponent", MultipleOfReason(1e21, 1e20), ""},
		{"large number of 3", MultipleOfReason(3e30, 3), ""},
		{"whole of fraction", MultipleOfReason(3.0, 0.5), ""},
		{"fraction of whole", MultipleOfReason(2.5, 1), "must be a multiple of 1"},
		{"divisor above 2^53", MultipleOfReason(1e17, 1e16), ""},
		{"absent divisor", MultipleOfReason(int64(3), 0), ""},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	var d Decoder
	d.MultipleOfFloat(0.07, 0.01)
	d.MultipleOf(10, 5)
	if err := d.Err(); err != nil {
		t.Errorf("a multiple refused: %v", err)
	}
	d.MultipleOf(11, 5)
	var ce *Error
	if err := d.Err(); !errors.As(err, &ce) || ce.Reason != "must be a multiple of 5" {
		t.Errorf("MultipleOf(11, 5): %v", err)
	}
}

// TestMultipleOfOfDecodedNumbers pins the limit MultipleOfReason documents: a number is checked
// as its double's shortest decimal, which is the text sent up to 15 significant digits, not
// for 16 or 17 digits that round (those pass as their double), and longer ones never reach the
// check in a JSON body (Float64 refuses them).
func TestMultipleOfOfDecodedNumbers(t *testing.T) {
	for _, tt := range []struct {
		text string
		m    float64
		want string // the reason, or "refused" when Float64 refuses the text
	}{
		{"19.99", 0.01, ""},
		{"19.990000000000", 0.01, ""},
		{"123456789012.345", 0.001, ""},
		{"0.30000000000000004", 0.1, "must be a multiple of 0.1"},
		{"0.30000000000000001", 0.1, ""},            // 17 digits: the double 0.3
		{"9007199254740993", 2, ""},                 // the double 2^53
		{"0.300000000000000000001", 0.1, "refused"}, // more digits than a double holds
	} {
		v, err := decodeOne(t, tt.text, (*Decoder).Float64)
		got := MultipleOfReason(v, tt.m)
		if err != nil {
			got = "refused"
		}
		if got != tt.want {
			t.Errorf("%s multipleOf %v: %q, want %q", tt.text, tt.m, got, tt.want)
		}
	}
}
