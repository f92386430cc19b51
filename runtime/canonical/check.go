package canonical

import (
	"cmp"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Schema checks for generated decoders. Each reads or tests the value just read and records a
// violation with Invalid, so it names that value's pointer; like every Decoder method they do
// nothing once an error is recorded.
//
// The rules themselves, and their wording, exist once: the Reason functions below (BoundReason
// and the ones built on it, MultipleOfReason, LengthReason, ItemsReason, PatternReason, and for
// enums OneOf, OneOfJSON and BoolEnumReason), which return why a value breaks a constraint, ""
// when it does not. The Decoder's check methods and those of
// runtime/gen's readers of parameters, form fields and multipart parts report them, and
// runtime/gen's oneOf/anyOf of scalars collects them per member, so a constraint is checked and
// worded the same wherever the value comes from.

// Matcher matches a string against a schema pattern (JSON Schema "pattern": not anchored). The
// Decoder's owner provides it (runtime/gen's Matcher compiles each pattern once), which keeps
// this package free of a regular-expression engine's choices.
type Matcher interface {
	Match(pattern, s string) bool
}

// SetMatcher sets the Matcher of Pattern; it is kept across Reset.
func (d *Decoder) SetMatcher(m Matcher) { d.matcher = m }

// Field marks bit (0..63) of *seen as read for the current member, like Once, and returns d to
// read its value: v.Amount = d.Field(&seen, 0).Int64(). A member read twice is the error
// "duplicate member name"; its value is then not read (errors are sticky).
func (d *Decoder) Field(seen *uint64, bit uint) *Decoder {
	d.Once(seen, bit)
	return d
}

// Required records, after EndObject, the first required member the object lacked: names[i] is
// the member of bit i of seen. Generated code numbers required members first, in schema order.
func (d *Decoder) Required(seen uint64, names ...string) {
	for i, name := range names {
		if seen&(1<<(uint(i)&63)) == 0 {
			d.Missing(name)
			return
		}
	}
}

// Int32 reads an integer (schema format int32) exactly; a value outside the int32 range is an
// error.
func (d *Decoder) Int32() int32 {
	n := d.Int64()
	if n < -1<<31 || n > 1<<31-1 {
		d.Invalid("outside the int32 range")
	}
	return int32(n)
}

// Enum reads a string that must be one of values (a string enum).
func (d *Decoder) Enum(values ...string) string {
	s := d.Str()
	if d.err != nil {
		return s
	}
	for _, v := range values {
		if v == s {
			return s
		}
	}
	d.Invalid(OneOf(values))
	return s
}

// OneOf is the reason that refuses a value outside a string enum: must be one of "a", "b".
func OneOf(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = strconv.Quote(v)
	}
	return OneOfJSON(quoted)
}

// OneOfJSON is the reason that refuses a value outside an enum given as JSON texts (the values
// of a number enum, or the canonical JSON of an enum of any type): must be one of 1, 2.5.
func OneOfJSON(texts []string) string { return "must be one of " + strings.Join(texts, ", ") }

// BoolEnumReason is the reason that refuses a boolean whose enum allows only the other one:
// must be true.
func BoolEnumReason(allowed bool) string { return "must be " + strconv.FormatBool(allowed) }

// Length checks the length of s in code points (minLength, maxLength): exactly min when min ==
// max, else at least min and at most max; a negative bound is absent.
func (d *Decoder) Length(s string, min, max int) {
	if d.err == nil {
		d.check(StringLengthReason(s, min, max))
	}
}

// check records reason, unless it is "" (the value keeps its constraint).
func (d *Decoder) check(reason string) {
	if reason != "" {
		d.Invalid(reason)
	}
}

// StringLengthReason is why s breaks Length's bounds, counted in code points, or "".
func StringLengthReason(s string, min, max int) string {
	if min <= 0 && max < 0 {
		return ""
	}
	return LengthReason(utf8.RuneCountInString(s), min, max)
}

// LengthReason is why a string of n code points breaks Length's bounds, or "".
func LengthReason(n, min, max int) string {
	switch {
	case min == max && min >= 0:
		if n != min {
			return "length must be " + strconv.Itoa(min)
		}
	case min > 0 && n < min:
		return "length must be at least " + strconv.Itoa(min)
	case max >= 0 && n > max:
		return "length must be at most " + strconv.Itoa(max)
	}
	return ""
}

// Items checks the number of items n of an array (minItems, maxItems); a negative bound is
// absent.
func (d *Decoder) Items(n, min, max int) { d.check(ItemsReason(n, min, max)) }

// ItemsReason is why an array of n items breaks Items's bounds, or "".
func ItemsReason(n, min, max int) string {
	switch {
	case min > 0 && n < min:
		return "must have at least " + strconv.Itoa(min) + " items"
	case max >= 0 && n > max:
		return "must have at most " + strconv.Itoa(max) + " items"
	}
	return ""
}

// Min checks v >= min (minimum), Max v <= max (maximum), ExclusiveMin v > min and ExclusiveMax
// v < max, comparing integers exactly (no float64 round trip above 2^53).
func (d *Decoder) Min(v, min int64)          { d.check(MinReason(v, min)) }
func (d *Decoder) Max(v, max int64)          { d.check(MaxReason(v, max)) }
func (d *Decoder) ExclusiveMin(v, min int64) { d.check(ExclusiveMinReason(v, min)) }
func (d *Decoder) ExclusiveMax(v, max int64) { d.check(ExclusiveMaxReason(v, max)) }

// MinFloat, MaxFloat, ExclusiveMinFloat and ExclusiveMaxFloat are Min, Max, ExclusiveMin and
// ExclusiveMax for numbers, and for integers against a bound that is not a whole int64.
func (d *Decoder) MinFloat(v, min float64)          { d.check(MinReason(v, min)) }
func (d *Decoder) MaxFloat(v, max float64)          { d.check(MaxReason(v, max)) }
func (d *Decoder) ExclusiveMinFloat(v, min float64) { d.check(ExclusiveMinReason(v, min)) }
func (d *Decoder) ExclusiveMaxFloat(v, max float64) { d.check(ExclusiveMaxReason(v, max)) }

// Number is what a numeric bound compares: an integer, exactly, or a number.
type Number interface{ ~int64 | ~float64 }

// MinReason is why v breaks minimum min, or "".
func MinReason[T Number](v, min T) string {
	return BoundReason(cmp.Compare(v, min), float64(min), true, false)
}

// MaxReason is why v breaks maximum max, or "".
func MaxReason[T Number](v, max T) string {
	return BoundReason(cmp.Compare(v, max), float64(max), false, false)
}

// ExclusiveMinReason is why v breaks exclusiveMinimum min (v must be greater), or "".
func ExclusiveMinReason[T Number](v, min T) string {
	return BoundReason(cmp.Compare(v, min), float64(min), true, true)
}

// ExclusiveMaxReason is why v breaks exclusiveMaximum max (v must be less), or "".
func ExclusiveMaxReason[T Number](v, max T) string {
	return BoundReason(cmp.Compare(v, max), float64(max), false, true)
}

// BoundReason is why a value that compares to a schema bound as c (-1 below it, 0 equal, +1
// above, cmp.Compare's result) breaks it, or "": a minimum (minimum true) or a maximum,
// exclusive (exclusiveMinimum, exclusiveMaximum) or not.
func BoundReason(c int, bound float64, minimum, exclusive bool) string {
	switch {
	case minimum && exclusive && c <= 0:
		return "must be greater than " + Bound(bound)
	case minimum && !exclusive && c < 0:
		return "must be at least " + Bound(bound)
	case !minimum && exclusive && c >= 0:
		return "must be less than " + Bound(bound)
	case !minimum && !exclusive && c > 0:
		return "must be at most " + Bound(bound)
	}
	return ""
}

// MultipleOf checks that v is a multiple of m (multipleOf, m > 0), exactly; MultipleOfFloat is
// MultipleOf for numbers, and for integers against an m that is not a whole int64.
func (d *Decoder) MultipleOf(v, m int64)        { d.check(MultipleOfReason(v, m)) }
func (d *Decoder) MultipleOfFloat(v, m float64) { d.check(MultipleOfReason(v, m)) }

// MultipleOfReason is why v is not a multiple of m (JSON Schema multipleOf: v / m is an
// integer), or "". It is exact: integers by their remainder (2^53+1 is not a multiple of 2),
// numbers as the rationals their decimal texts denote, each the shortest decimal that reads
// back as the float64 (strconv's 'g' format, as Bound writes them), so 19.99 is a multiple of
// 0.01 although neither is one in binary, and 0.1+0.2 computed in float64 is not one of 0.1.
//
// The limit: a number arrives as a float64, its text not kept, so that shortest decimal is
// what is checked. It is the text the client sent when that had at most 15 significant digits
// (DBL_DIG); 16 or 17 digits that are not the double's shortest form (0.30000000000000001,
// 9007199254740993 as a number) are checked as that form (0.3, 9007199254740992). Decoder.Float64
// refuses longer numbers (see "Numbers" in the package doc); runtime/gen's readers of
// parameters, form fields and parts parse them into their double.
//
// An m that is not positive (the loader refuses it) accepts every value.
func MultipleOfReason[T Number](v, m T) string {
	if m <= 0 || isMultiple(v, m) {
		return ""
	}
	return "must be a multiple of " + Bound(float64(m))
}

// isMultiple reports whether v / m is an integer, for m > 0.
func isMultiple[T Number](v, m T) bool {
	if T(1)/2 == 0 { // an integer type: T(v) % T(m) does not compile for floats
		return int64(v)%int64(m) == 0
	}
	f, g := float64(v), float64(m)
	if math.IsInf(f, 0) || math.IsNaN(f) || math.IsInf(g, 0) || math.IsNaN(g) {
		return false
	}
	if f == math.Trunc(f) && g == math.Trunc(g) && math.Abs(f) <= 1<<53 && g <= 1<<53 {
		// Whole numbers up to 2^53 are their own shortest decimals; math.Mod is exact.
		return math.Mod(f, g) == 0
	}
	var q, r big.Rat
	if _, ok := q.SetString(Bound(f)); !ok {
		return false
	}
	if _, ok := r.SetString(Bound(g)); !ok {
		return false
	}
	return q.Quo(&q, &r).IsInt()
}

// Bound formats a schema bound in a reason: the shortest decimal that reads back as f, with an
// exponent from 1e+21 (strconv's 'g' format).
func Bound(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Pattern checks that s contains a match of the schema pattern, through the Decoder's Matcher.
// Without a Matcher every pattern check fails: a value is never let through unchecked.
func (d *Decoder) Pattern(s, pattern string) {
	if d.err != nil {
		return
	}
	if d.matcher == nil || !d.matcher.Match(pattern, s) {
		d.Invalid(PatternReason(pattern))
	}
}

// PatternReason is why a string without a match of the schema pattern is refused.
func PatternReason(pattern string) string { return "must match the pattern " + strconv.Quote(pattern) }

// MapKey reads the current member's name as a key of the map m being decoded (additionalProperties),
// recording "duplicate member name" when m already holds it.
func MapKey[V any](d *Decoder, m map[string]V) string {
	k := d.Key()
	if _, dup := m[k]; dup {
		d.Duplicate()
	}
	return k
}

// Grow appends a zero element to *s and returns a pointer to it, for decoding an array element in
// place: decodeLine(d, canonical.Grow(&v.Lines)).
func Grow[T any](s *[]T) *T {
	var zero T
	*s = append(*s, zero)
	return &(*s)[len(*s)-1]
}

// Ptr returns a pointer to a copy of v: an optional member that was present.
func Ptr[T any](v T) *T { return &v }
