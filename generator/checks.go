package generator

import (
	"math"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/canonical"
)

// checks returns the statements that test val (a Go expression of t's type, not a pointer)
// against the schema constraints of docs/design.md section 4: minimum/maximum (exclusive too),
// multipleOf, minLength/maxLength in code points, pattern, minItems/maxItems, and the enums of other than
// strings (a string enum is checked as it is read: readExpr). r is the reader of the value (a
// canonical.Decoder, gen.Params or gen.Form), whose methods do the common checks and whose
// Invalid reports the rest.
func checks(t *tinfo, val jen.Code, r jen.Code) (out []jen.Code) {
	s := t.s
	if s == nil {
		return nil
	}
	fail := func(reason string) jen.Code { return jen.Add(r).Dot("Invalid").Call(jen.Lit(reason)) }
	call := func(method string, args ...jen.Code) jen.Code { return jen.Add(r).Dot(method).Call(args...) }
	switch t.kind {
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
			m := "Min"
			if s.ExclusiveMin {
				m = "ExclusiveMin"
			}
			out = append(out, boundCall(t, val, *s.Minimum, m, call))
		}
		if s.Maximum != nil {
			m := "Max"
			if s.ExclusiveMax {
				m = "ExclusiveMax"
			}
			out = append(out, boundCall(t, val, *s.Maximum, m, call))
		}
		if s.MultipleOf != nil {
			out = append(out, boundCall(t, val, *s.MultipleOf, "MultipleOf", call))
		}
	case kString:
		if s.MinLength != nil || s.MaxLength != nil {
			out = append(out, call("Length", val, optLit(s.MinLength), optLit(s.MaxLength)))
		}
		if s.Pattern != "" {
			// JSON Schema patterns are not anchored; the reader's Matcher compiles each once.
			out = append(out, call("Pattern", val, jen.Lit(s.Pattern)))
		}
	case kSlice:
		if (s.MinItems != nil && *s.MinItems > 0) || s.MaxItems != nil {
			out = append(out, call("Items", jen.Len(val), optLit(s.MinItems), optLit(s.MaxItems)))
		}
	}
	return out
}

// optLit is a bound for Length and Items: the value, or -1 when the schema has none.
func optLit(p *int64) jen.Code {
	if p == nil {
		return jen.Lit(-1)
	}
	return jen.Lit(int(*p))
}

// boundCall checks val against a numeric bound with the reader method m (Min, ExclusiveMin, Max,
// ExclusiveMax, MultipleOf). Integer values compare as int64 with an integer bound when the bound is a whole
// number inside the value's range, so the check stays exact (no float64 round trip above 2^53);
// otherwise (a fractional or out-of-range bound) they compare in float64 (the Float methods),
// which is exact for integers that close to such a bound.
func boundCall(t *tinfo, val jen.Code, f float64, m string, call func(string, ...jen.Code) jen.Code) jen.Code {
	lhs, rhs := bound(t, val, f)
	switch {
	case t.kind == kFloat:
		return call(m+"Float", lhs, rhs)
	case rhs == nil:
		return call(m+"Float", jen.Float64().Call(val), jen.Lit(f))
	case t.kind == kInt32:
		return call(m, jen.Int64().Call(val), rhs)
	}
	return call(m, lhs, rhs)
}

// bound returns both sides of a comparison with a numeric bound: the value and the bound as an
// integer literal when the bound is a whole number inside an integer value's range; rhs is nil
// when an integer must compare in float64.
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
		return jen.Float64().Call(val), nil
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
	reason := canonical.OneOfJSON(shown)
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
		return []jen.Code{jen.If(jen.Op("!").Add(val)).Block(fail(canonical.BoolEnumReason(true)))}
	case f:
		return []jen.Code{jen.If(val).Block(fail(canonical.BoolEnumReason(false)))}
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
				jen.Default().Add(fail(canonical.OneOfJSON(texts)))))
		}
	}
	return out
}

func fmtNum(f float64) string {
	return strconv.FormatFloat(f, 'g', -1, 64)
}
