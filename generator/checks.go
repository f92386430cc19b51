package generator

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// checks returns the statements that test val (a Go expression of t's type, not a pointer)
// against the schema constraints of docs/design.md section 4: enum, minimum/maximum (exclusive too),
// minLength/maxLength in code points, minItems/maxItems. fail turns a reason into the statement
// that reports it.
func checks(t *tinfo, val jen.Code, fail func(reason string) jen.Code) []jen.Code {
	s := t.s
	if s == nil {
		return nil
	}
	var out []jen.Code
	switch t.kind {
	case kEnum:
		var cases []jen.Code
		for _, c := range t.consts {
			cases = append(cases, jen.Id(c))
		}
		out = append(out, jen.Switch(val).Block(
			jen.Case(cases...),
			jen.Default().Add(fail("must be one of "+quoteList(s.Enum))),
		))
		return out
	case kInt32, kInt64, kFloat:
		if s.Minimum != nil {
			op, word := "<", "at least"
			if s.ExclusiveMin {
				op, word = "<=", "greater than"
			}
			lhs, rhs := bound(t, val, *s.Minimum)
			out = append(out, jen.If(lhs.Op(op).Add(rhs)).Block(
				fail(fmt.Sprintf("must be %s %s", word, fmtNum(*s.Minimum)))))
		}
		if s.Maximum != nil {
			op, word := ">", "at most"
			if s.ExclusiveMax {
				op, word = ">=", "less than"
			}
			lhs, rhs := bound(t, val, *s.Maximum)
			out = append(out, jen.If(lhs.Op(op).Add(rhs)).Block(
				fail(fmt.Sprintf("must be %s %s", word, fmtNum(*s.Maximum)))))
		}
	case kString:
		if s.MinLength == nil && s.MaxLength == nil {
			return nil
		}
		n := jen.Qual("unicode/utf8", "RuneCountInString").Call(val)
		switch {
		case s.MinLength != nil && s.MaxLength != nil && *s.MinLength == *s.MaxLength:
			out = append(out, jen.If(n.Clone().Op("!=").Lit(int(*s.MinLength))).Block(
				fail(fmt.Sprintf("length must be %d", *s.MinLength))))
		default:
			if s.MinLength != nil && *s.MinLength > 0 {
				out = append(out, jen.If(n.Clone().Op("<").Lit(int(*s.MinLength))).Block(
					fail(fmt.Sprintf("length must be at least %d", *s.MinLength))))
			}
			if s.MaxLength != nil {
				out = append(out, jen.If(n.Clone().Op(">").Lit(int(*s.MaxLength))).Block(
					fail(fmt.Sprintf("length must be at most %d", *s.MaxLength))))
			}
		}
	case kSlice:
		if s.MinItems != nil && *s.MinItems > 0 {
			out = append(out, jen.If(jen.Len(val).Op("<").Lit(int(*s.MinItems))).Block(
				fail(fmt.Sprintf("must have at least %d items", *s.MinItems))))
		}
		if s.MaxItems != nil {
			out = append(out, jen.If(jen.Len(val).Op(">").Lit(int(*s.MaxItems))).Block(
				fail(fmt.Sprintf("must have at most %d items", *s.MaxItems))))
		}
	}
	return out
}

// bound returns both sides of a comparison with a numeric bound. Integer values compare with
// an integer literal when the bound is a whole number inside the value's range, so the check
// stays exact (no float64 round trip above 2^53); otherwise (a fractional or out-of-range bound)
// they compare in float64, which is exact for integers that close to such a bound.
func bound(t *tinfo, val jen.Code, f float64) (*jen.Statement, jen.Code) {
	lim := float64(1 << 62)
	if t.kind == kInt32 {
		lim = 1 << 31
	}
	switch {
	case t.kind == kFloat:
		return jen.Add(val), jen.Lit(f)
	case f == math.Trunc(f) && math.Abs(f) < lim:
		return jen.Add(val), jen.Lit(int(f))
	default:
		return jen.Float64().Call(val), jen.Lit(f)
	}
}

func fmtNum(f float64) string {
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}
