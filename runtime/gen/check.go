package gen

import (
	"math"
	"strconv"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// The reasons that refuse a text value of the wrong type, for the checker's conversions and
// the members of a oneOf/anyOf of scalars (Scalar) alike.
const (
	notInt64  = "must be an integer (int64)"
	notInt32  = "must be an integer (int32)"
	notNumber = "must be a number"
	notBool   = "must be true or false"
)

// checker converts and checks the text value of a parameter or form field. Params and Form read
// a value, which becomes the current one; conversions read it, and checks test a converted value
// against the schema, reporting a failure at the current value's pointer. Reasons are worded as
// canonical.Decoder's, so a constraint reads the same in a JSON body, a form body and a parameter.
type checker struct {
	m   *Matcher
	err error
	// cur is the current text value; where is "path", "query" or "header" for a parameter and ""
	// for a form field; name is the parameter's name or the form field's name in the pointer;
	// present is whether the selected parameter has a value.
	cur     string
	where   string
	name    string
	present bool
}

// Invalid records that the current value is refused for reason (a schema constraint the
// generated code checks itself).
func (c *checker) Invalid(reason string) {
	if c.err != nil {
		return
	}
	if c.where == "" {
		c.err = &canonical.Error{Pointer: "/" + c.name, Offset: -1, Reason: reason}
		return
	}
	c.err = &BodyError{
		At:     "/" + c.where + "/" + c.name,
		Reason: c.where + " parameter " + strconv.Quote(c.name) + ": " + reason,
	}
}

// Str returns the current value.
//
//go:noinline
func (c *checker) Str() string { return c.cur }

// Int64 returns the current value as a decimal int64.
//
//go:noinline
func (c *checker) Int64() int64 {
	n, err := strconv.ParseInt(c.cur, 10, 64)
	if err != nil {
		c.Invalid(notInt64)
	}
	return n
}

// Int32 returns the current value as a decimal int32.
//
//go:noinline
func (c *checker) Int32() int32 {
	n, err := strconv.ParseInt(c.cur, 10, 32)
	if err != nil {
		c.Invalid(notInt32)
	}
	return int32(n)
}

// Float64 returns the current value as a finite number.
//
//go:noinline
func (c *checker) Float64() float64 {
	n, err := strconv.ParseFloat(c.cur, 64)
	if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
		c.Invalid(notNumber)
	}
	return n
}

// Bool returns the current value as true or false.
//
//go:noinline
func (c *checker) Bool() bool {
	switch c.cur {
	case "true":
		return true
	case "false":
		return false
	}
	c.Invalid(notBool)
	return false
}

// Enum returns the current value, which must be one of values.
//
//go:noinline
func (c *checker) Enum(values ...string) string {
	for _, v := range values {
		if v == c.cur {
			return c.cur
		}
	}
	c.Invalid(canonical.OneOf(values))
	if be, ok := c.err.(*BodyError); ok && be.Allowed == nil {
		be.Allowed = append([]string(nil), values...)
	}
	return c.cur
}

// check records reason, unless it is "" (the value keeps its constraint).
func (c *checker) check(reason string) {
	if reason != "" {
		c.Invalid(reason)
	}
}

// The schema checks, as canonical.Decoder has them (and with its rules and reasons: canonical's
// Reason functions). Each is //go:noinline: a large API's generated decoders call them tens of
// thousands of times, and inlining them there costs build time for no run-time gain.

// Length checks the length of s in code points: exactly min when min == max, else at least min
// and at most max; a negative bound is absent.
//
//go:noinline
func (c *checker) Length(s string, min, max int) {
	if c.err == nil {
		c.check(canonical.StringLengthReason(s, min, max))
	}
}

// Items checks the number of items of an array: at least min and at most max; a negative bound
// is absent.
//
//go:noinline
func (c *checker) Items(n, min, max int) { c.check(canonical.ItemsReason(n, min, max)) }

// Min checks v >= min (minimum), Max v <= max (maximum), ExclusiveMin v > min and ExclusiveMax
// v < max, comparing integers exactly.
//
//go:noinline
func (c *checker) Min(v, min int64) { c.check(canonical.MinReason(v, min)) }

//go:noinline
func (c *checker) Max(v, max int64) { c.check(canonical.MaxReason(v, max)) }

//go:noinline
func (c *checker) ExclusiveMin(v, min int64) { c.check(canonical.ExclusiveMinReason(v, min)) }

//go:noinline
func (c *checker) ExclusiveMax(v, max int64) { c.check(canonical.ExclusiveMaxReason(v, max)) }

// MinFloat, MaxFloat, ExclusiveMinFloat and ExclusiveMaxFloat are Min, Max, ExclusiveMin and
// ExclusiveMax for numbers, and for integers against a bound that is not a whole int64.
//
//go:noinline
func (c *checker) MinFloat(v, min float64) { c.check(canonical.MinReason(v, min)) }

//go:noinline
func (c *checker) MaxFloat(v, max float64) { c.check(canonical.MaxReason(v, max)) }

//go:noinline
func (c *checker) ExclusiveMinFloat(v, min float64) { c.check(canonical.ExclusiveMinReason(v, min)) }

//go:noinline
func (c *checker) ExclusiveMaxFloat(v, max float64) { c.check(canonical.ExclusiveMaxReason(v, max)) }

// MultipleOf checks that v is a multiple of m (multipleOf), exactly; MultipleOfFloat is
// MultipleOf for numbers, and for integers against an m that is not a whole int64.
//
//go:noinline
func (c *checker) MultipleOf(v, m int64) { c.check(canonical.MultipleOfReason(v, m)) }

//go:noinline
func (c *checker) MultipleOfFloat(v, m float64) { c.check(canonical.MultipleOfReason(v, m)) }

// Pattern checks that s contains a match of the schema pattern.
//
//go:noinline
func (c *checker) Pattern(s, pattern string) {
	if c.err == nil && !c.m.Match(pattern, s) {
		c.Invalid(canonical.PatternReason(pattern))
	}
}
