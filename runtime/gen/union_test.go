package gen

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/canonical"
)

func ptrF(f float64) *float64 { return &f }

// TestParamsAnyOf: a oneOf/anyOf of scalars in a parameter accepts a text that satisfies at
// least one member, returns it exactly as sent, and otherwise names why every member refuses it.
func TestParamsAnyOf(t *testing.T) {
	// Mollie's profileId: a profile token or the alias "me".
	profile := []Scalar{{Type: "string", Pattern: `^pfl_.+$`}, {Type: "string", Enum: []string{"me"}}}
	amount := []Scalar{{Type: "integer", Minimum: ptrF(1), Maximum: ptrF(100)}, {Type: "string", Enum: []string{"all"}}}
	for _, tt := range []struct {
		target  string
		members []Scalar
		want    string // the value, or the error's text
		ok      bool
	}{
		{"/?v=pfl_QkEhN94Ba", profile, "pfl_QkEhN94Ba", true},
		{"/?v=me", profile, "me", true},
		{"/?v=you", profile, `query parameter "v": matches no member of the oneOf/anyOf: must match the pattern "^pfl_.+$"; or must be one of "me"`, false},
		{"/?v=007", amount, "007", true}, // the exact text, not 7
		{"/?v=all", amount, "all", true},
		{"/?v=0", amount, "must be at least 1; or must be one of", false},
		{"/?v=101", amount, "must be at most 100", false},
		{"/?v=1.5", []Scalar{{Type: "number", Maximum: ptrF(1.5), ExclusiveMax: true}, {Type: "boolean"}}, "must be less than 1.5; or must be true or false", false},
		{"/?v=true", []Scalar{{Type: "number"}, {Type: "boolean"}}, "true", true},
		{"/?v=3000000000", []Scalar{{Type: "integer", Int32: true}}, "must be an integer (int32)", false},
		{"/?v=2", []Scalar{{Type: "integer", Enum: []string{"1", "2.0"}}}, "2", true},
		{"/?v=abcdef", []Scalar{{Type: "string", MinLength: 2, MaxLength: 4}}, "length must be at most 4", false},
		{"/?v=%F0%9F%98%80%F0%9F%98%80", []Scalar{{Type: "string", MaxLength: 2}}, "😀😀", true}, // code points
		{"/?v=15", []Scalar{{Type: "integer", MultipleOf: ptrF(5)}}, "15", true},
		{"/?v=9007199254740993", []Scalar{{Type: "integer", MultipleOf: ptrF(2)}}, "must be a multiple of 2", false},
		{"/?v=19.99", []Scalar{{Type: "number", MultipleOf: ptrF(0.01)}}, "19.99", true},
		{"/?v=19.995", []Scalar{{Type: "number", MultipleOf: ptrF(0.01)}, {Type: "string", Enum: []string{"all"}}}, "must be a multiple of 0.01; or must be one of", false},
		{"/", profile, "", true}, // absent: nothing to check
	} {
		var in Input
		in.Reset(httptest.NewRequest("GET", tt.target, nil), nil, "", "", nil, &Matcher{})
		p := in.Params()
		got := p.Query("v", false).AnyOf(tt.members...)
		err := in.Err()
		switch {
		case tt.ok && (err != nil || got != tt.want):
			t.Errorf("%s: %q, %v; want %q", tt.target, got, err, tt.want)
		case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v; want an error containing %q", tt.target, err, tt.want)
		case !tt.ok:
			if be, ok := err.(*BodyError); !ok || be.At != "/query/v" {
				t.Errorf("%s: %#v, want a BodyError at /query/v", tt.target, err)
			}
		}
	}
}

// TestAnyOfWordsAsTheReaders: a member of a oneOf/anyOf of scalars refuses a value with the
// reason a parameter of the member's type gives it, so a rule reads the same wherever it is.
func TestAnyOfWordsAsTheReaders(t *testing.T) {
	for _, tt := range []struct {
		value  string
		member Scalar
		read   func(p *Params)
	}{
		{"x", Scalar{Type: "integer"}, func(p *Params) { p.Query("v", true).Int64() }},
		{"3000000000", Scalar{Type: "integer", Int32: true}, func(p *Params) { p.Query("v", true).Int32() }},
		{"x", Scalar{Type: "number"}, func(p *Params) { p.Query("v", true).Float64() }},
		{"x", Scalar{Type: "boolean"}, func(p *Params) { p.Query("v", true).Bool() }},
		{"c", Scalar{Type: "string", Enum: []string{"a", "b"}}, func(p *Params) { p.Query("v", true).Enum("a", "b") }},
	} {
		reason := func(read func(p *Params)) string {
			var in Input
			in.Reset(httptest.NewRequest("GET", "/?v="+tt.value, nil), nil, "", "", nil, &Matcher{})
			read(in.Params())
			if in.Err() == nil {
				return ""
			}
			return in.Err().Error()
		}
		want := reason(tt.read)
		got := reason(func(p *Params) { p.Query("v", true).AnyOf(tt.member) })
		if want == "" || !strings.HasSuffix(got, "oneOf/anyOf: "+strings.TrimPrefix(want, `query parameter "v": `)) {
			t.Errorf("%+v refuses %q: %q; the reader: %q", tt.member, tt.value, got, want)
		}
	}
}

// TestAnyOfEnumsWordAsTheDecoders: a number or boolean member's enum refuses a value as the
// generated decoders word it (canonical.OneOfJSON, canonical.BoolEnumReason).
func TestAnyOfEnumsWordAsTheDecoders(t *testing.T) {
	m := &Matcher{}
	for _, tt := range []struct {
		value  string
		member Scalar
		want   string
	}{
		{"3", Scalar{Type: "integer", Enum: []string{"1", "2"}}, canonical.OneOfJSON([]string{"1", "2"})},
		{"0.5", Scalar{Type: "number", Enum: []string{"1.5"}}, canonical.OneOfJSON([]string{"1.5"})},
		{"false", Scalar{Type: "boolean", Enum: []string{"true"}}, canonical.BoolEnumReason(true)},
		{"true", Scalar{Type: "boolean", Enum: []string{"false"}}, canonical.BoolEnumReason(false)},
	} {
		if got := tt.member.refuse(tt.value, m); got != tt.want {
			t.Errorf("%+v refuses %q: %q, want %q", tt.member, tt.value, got, tt.want)
		}
	}
}
