package gen

import (
	"cmp"
	"math"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// Scalar is one member of a oneOf or anyOf of scalars in a parameter: its type and the
// constraints of its schema, which Params.AnyOf checks against the parameter's text.
type Scalar struct {
	// Type is "string", "integer", "number" or "boolean"; Int32 narrows an integer to int32.
	Type  string
	Int32 bool
	// Enum holds the allowed values as text (a string's own text; a number's JSON text); an
	// integer or number matches an entry of equal value ("01" matches 1).
	Enum []string
	// MinLength and MaxLength bound a string in code points; 0 is absent (the generator writes
	// a maxLength of 0 as Enum [""]).
	MinLength, MaxLength int
	// Pattern is the ECMA-262 pattern of a string (not anchored), "" for none.
	Pattern string
	// Minimum and Maximum bound an integer or number (nil: absent); the Exclusive flags make
	// them strict.
	Minimum, Maximum           *float64
	ExclusiveMin, ExclusiveMax bool
	// MultipleOf is the positive number an integer or number must be a multiple of (nil:
	// absent), checked exactly as canonical.MultipleOfReason does.
	MultipleOf *float64
}

// AnyOf checks the current value against the members of a oneOf or anyOf of scalars and returns
// it as sent: the value must satisfy at least one member (a text such as "42" is both a valid
// string and a valid integer, so "exactly one" would refuse what the spec means to allow). The
// handler gets the exact text, which is also what the fingerprint covers. When no member
// accepts the value, the reason names why each one refuses it.
//
//go:noinline
func (p *Params) AnyOf(members ...Scalar) string {
	if p.err != nil || !p.present {
		return p.cur
	}
	reasons := make([]string, 0, len(members))
	for i := range members {
		r := members[i].refuse(p.cur, p.m)
		if r == "" {
			return p.cur
		}
		reasons = append(reasons, r)
	}
	p.Invalid("matches no member of the oneOf/anyOf: " + strings.Join(reasons, "; or "))
	return p.cur
}

// refuse returns why s is not a value of the member, or "" when it is.
func (sc *Scalar) refuse(s string, m *Matcher) string {
	switch sc.Type {
	case "string":
		if len(sc.Enum) > 0 && !containsText(sc.Enum, s) {
			return canonical.OneOf(sc.Enum)
		}
		max := sc.MaxLength
		if max == 0 {
			max = -1
		}
		if r := canonical.StringLengthReason(s, sc.MinLength, max); r != "" {
			return r
		}
		if sc.Pattern != "" && !m.Match(sc.Pattern, s) {
			return canonical.PatternReason(sc.Pattern)
		}
		return ""
	case "boolean":
		if s != "true" && s != "false" {
			return notBool
		}
		if len(sc.Enum) > 0 && !containsText(sc.Enum, s) {
			if other := s == "false"; containsText(sc.Enum, strconv.FormatBool(other)) {
				return canonical.BoolEnumReason(other)
			}
			return canonical.OneOfJSON(sc.Enum)
		}
		return ""
	case "integer":
		bits, what := 64, notInt64
		if sc.Int32 {
			bits, what = 32, notInt32
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return what
		}
		if r := sc.number(func(bound float64) int {
			// Exact for every int64 against a whole bound inside the int64 range.
			if bound == math.Trunc(bound) && math.Abs(bound) < 1<<62 {
				return cmp.Compare(n, int64(bound))
			}
			return cmp.Compare(float64(n), bound)
		}); r != "" || sc.MultipleOf == nil {
			return r
		}
		if m := *sc.MultipleOf; m == math.Trunc(m) && m < 1<<62 {
			return canonical.MultipleOfReason(n, int64(m))
		}
		return canonical.MultipleOfReason(float64(n), *sc.MultipleOf)
	case "number":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return notNumber
		}
		if r := sc.number(func(bound float64) int { return cmp.Compare(f, bound) }); r != "" || sc.MultipleOf == nil {
			return r
		}
		return canonical.MultipleOfReason(f, *sc.MultipleOf)
	}
	return "is of an unsupported type " + sc.Type
}

// number checks an integer or number, compared with a bound or an enum value by cmp, against the
// enum and the bounds.
func (sc *Scalar) number(compare func(bound float64) int) string {
	if len(sc.Enum) > 0 {
		ok := false
		for _, e := range sc.Enum {
			if f, err := strconv.ParseFloat(e, 64); err == nil && compare(f) == 0 {
				ok = true
				break
			}
		}
		if !ok {
			return canonical.OneOfJSON(sc.Enum)
		}
	}
	if b := sc.Minimum; b != nil {
		if r := canonical.BoundReason(compare(*b), *b, true, sc.ExclusiveMin); r != "" {
			return r
		}
	}
	if b := sc.Maximum; b != nil {
		if r := canonical.BoundReason(compare(*b), *b, false, sc.ExclusiveMax); r != "" {
			return r
		}
	}
	return ""
}

func containsText(values []string, s string) bool {
	for _, v := range values {
		if v == s {
			return true
		}
	}
	return false
}
