package generator

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/canonical"
)

// checks returns the statements that test val (a Go expression of t's type, not a pointer)
// against the schema constraints of docs/design.md section 4: enum, minimum/maximum (exclusive too),
// minLength/maxLength in code points, minItems/maxItems. fail turns a reason into the statement
// that reports it.
func checks(t *tinfo, val jen.Code, fail func(reason string) jen.Code) (out []jen.Code) {
	s := t.s
	if s == nil {
		return nil
	}
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
	case kBool:
		return boolEnum(s.EnumJSON, val, fail)
	case kRaw:
		if s.Type != model.TypeAny {
			return nil // the element of an array without items or a free-form map: any value
		}
		return rawChecks(s, val, fail)
	case kInt32, kInt64, kFloat:
		if c := numberEnum(t, val, fail); c != nil {
			out = append(out, c)
		}
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
		if t.pattern != "" {
			defer func() {
				out = append(out, jen.If(jen.Op("!").Id(t.pattern).Dot("MatchString").Call(val)).Block(
					fail("must match the pattern "+strconv.Quote(s.Pattern))))
			}()
		}
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

// numberEnum is the switch that checks an integer or number value against an enum (nil when
// the schema has none). Values of the wrong type in the enum can never match and are dropped;
// duplicates (1 and 1.0) are merged so that the switch compiles.
func numberEnum(t *tinfo, val jen.Code, fail func(string) jen.Code) jen.Code {
	if len(t.s.EnumJSON) == 0 {
		return nil
	}
	var cases []jen.Code
	var shown []string
	seen := map[float64]bool{}
	for _, j := range t.s.EnumJSON {
		f, err := strconv.ParseFloat(j, 64)
		if err != nil || seen[f] || (t.kind != kFloat && (f != math.Trunc(f) || math.Abs(f) >= 1<<63)) {
			continue
		}
		seen[f] = true
		shown = append(shown, fmtNum(f))
		if t.kind == kFloat {
			cases = append(cases, jen.Lit(f))
		} else {
			cases = append(cases, jen.Lit(int(f)))
		}
	}
	reason := "must be one of " + strings.Join(shown, ", ")
	if len(cases) == 0 {
		reason = "matches no value of the enum " + strings.Join(t.s.EnumJSON, ", ")
		return jen.Add(fail(reason))
	}
	return jen.Switch(val).Block(jen.Case(cases...), jen.Default().Add(fail(reason)))
}

// boolEnum checks a boolean against an enum of true and/or false.
func boolEnum(enum []string, val jen.Code, fail func(string) jen.Code) []jen.Code {
	t, f := false, false
	for _, j := range enum {
		t = t || j == "true"
		f = f || j == "false"
	}
	switch {
	case len(enum) == 0 || (t && f):
		return nil
	case t:
		return []jen.Code{jen.If(jen.Op("!").Add(val)).Block(fail("must be true"))}
	case f:
		return []jen.Code{jen.If(val).Block(fail("must be false"))}
	default:
		return []jen.Code{fail("matches no value of the enum " + strings.Join(enum, ", "))}
	}
}

// rawChecks checks a value kept as canonical JSON (RFC 8785): the JSON types a multi-type
// schema allows (3.1 type: [string, integer]), by the first byte of the canonical text, and
// an enum of any types, by comparing canonical texts. oneOf/anyOf members are not checked.
func rawChecks(s *model.Schema, val jen.Code, fail func(string) jen.Code) []jen.Code {
	if s.Composite {
		return nil
	}
	var out []jen.Code
	if len(s.Types) > 0 {
		var conds []jen.Code
		var names []string
		first := jen.Add(val).Index(jen.Lit(0))
		for _, ty := range s.Types {
			names = append(names, string(ty))
			switch ty {
			case model.TypeString:
				conds = append(conds, first.Clone().Op("==").LitRune('"'))
			case model.TypeObject:
				conds = append(conds, first.Clone().Op("==").LitRune('{'))
			case model.TypeArray:
				conds = append(conds, first.Clone().Op("==").LitRune('['))
			case model.TypeBoolean:
				conds = append(conds, first.Clone().Op("==").LitRune('t').Op("||").Add(first.Clone()).Op("==").LitRune('f'))
			case model.TypeNumber:
				conds = append(conds, first.Clone().Op("==").LitRune('-').Op("||").Parens(first.Clone().Op(">=").LitRune('0').Op("&&").Add(first.Clone()).Op("<=").LitRune('9')))
			case model.TypeInteger:
				// Canonical numbers write integers without a fraction or a negative exponent.
				conds = append(conds, jen.Parens(first.Clone().Op("==").LitRune('-').Op("||").Parens(first.Clone().Op(">=").LitRune('0').Op("&&").Add(first.Clone()).Op("<=").LitRune('9'))).
					Op("&&").Op("!").Qual("bytes", "ContainsAny").Call(val, jen.Lit(".")).
					Op("&&").Op("!").Qual("bytes", "Contains").Call(val, jen.Index().Byte().Call(jen.Lit("e-"))))
			}
		}
		if s.Nullable {
			conds = append(conds, first.Clone().Op("==").LitRune('n'))
			names = append(names, "null")
		}
		var any *jen.Statement
		for i, c := range conds {
			if i == 0 {
				any = jen.Parens(c)
			} else {
				any = any.Op("||").Parens(c)
			}
		}
		if any != nil {
			out = append(out, jen.If(jen.Len(val).Op(">").Lit(0).Op("&&").Op("!").Parens(any)).Block(
				fail("must be of type "+strings.Join(names, " or "))))
		}
	}
	if len(s.EnumJSON) > 0 {
		var cases []jen.Code
		var texts []string
		seen := map[string]bool{}
		for _, j := range s.EnumJSON {
			c, err := canonical.AppendCanonical(nil, []byte(j))
			if err != nil || seen[string(c)] {
				continue
			}
			seen[string(c)] = true
			texts = append(texts, string(c))
			cases = append(cases, jen.Lit(string(c)))
		}
		if len(cases) > 0 {
			out = append(out, jen.Switch(jen.String().Call(val)).Block(jen.Case(cases...),
				jen.Default().Add(fail("must be one of "+strings.Join(texts, ", ")))))
		}
	}
	return out
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
