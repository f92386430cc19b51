package canonical

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Schema checks for generated decoders. Each reads or tests the value just read and records a
// violation with Invalid, so it names that value's pointer; like every Decoder method they do
// nothing once an error is recorded. The reasons are the ones runtime/gen uses for parameters and
// form fields, so a constraint reads the same wherever the value comes from.

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
	var b strings.Builder
	b.WriteString("must be one of ")
	for i, v := range values {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(v))
	}
	return b.String()
}

// Length checks the length of s in code points (minLength, maxLength): exactly min when min ==
// max, else at least min and at most max; a negative bound is absent.
func (d *Decoder) Length(s string, min, max int) {
	if d.err != nil || (min <= 0 && max < 0) {
		return
	}
	if r := LengthReason(utf8.RuneCountInString(s), min, max); r != "" {
		d.Invalid(r)
	}
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
func (d *Decoder) Items(n, min, max int) {
	if r := ItemsReason(n, min, max); r != "" {
		d.Invalid(r)
	}
}

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
func (d *Decoder) Min(v, min int64) {
	if v < min {
		d.Invalid("must be at least " + Bound(float64(min)))
	}
}

func (d *Decoder) Max(v, max int64) {
	if v > max {
		d.Invalid("must be at most " + Bound(float64(max)))
	}
}

func (d *Decoder) ExclusiveMin(v, min int64) {
	if v <= min {
		d.Invalid("must be greater than " + Bound(float64(min)))
	}
}

func (d *Decoder) ExclusiveMax(v, max int64) {
	if v >= max {
		d.Invalid("must be less than " + Bound(float64(max)))
	}
}

// MinFloat, MaxFloat, ExclusiveMinFloat and ExclusiveMaxFloat are Min, Max, ExclusiveMin and
// ExclusiveMax for numbers, and for integers against a bound that is not a whole int64.
func (d *Decoder) MinFloat(v, min float64) {
	if v < min {
		d.Invalid("must be at least " + Bound(min))
	}
}

func (d *Decoder) MaxFloat(v, max float64) {
	if v > max {
		d.Invalid("must be at most " + Bound(max))
	}
}

func (d *Decoder) ExclusiveMinFloat(v, min float64) {
	if v <= min {
		d.Invalid("must be greater than " + Bound(min))
	}
}

func (d *Decoder) ExclusiveMaxFloat(v, max float64) {
	if v >= max {
		d.Invalid("must be less than " + Bound(max))
	}
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
		d.Invalid("must match the pattern " + strconv.Quote(pattern))
	}
}

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
