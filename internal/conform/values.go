package conform

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/brianvoe/gofakeit/v7"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/gen"
)

// values builds valid values from schemas: the spec's example or default when it is valid,
// else an enum's first value, a value of the format, a string the pattern matches (generated
// by gofakeit from the pattern's syntax tree and checked with the runtime's own matcher), a
// number inside the bounds. Objects get their required members; arrays their least number of
// items (at least one). It is deterministic for a seed.
type values struct {
	rng     *rand.Rand
	fake    *gofakeit.Faker
	matcher *gen.Matcher
}

func newValues(seed uint64) *values {
	return &values{rng: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)), fake: gofakeit.New(seed), matcher: &gen.Matcher{}}
}

// maxDepth bounds the nesting of generated values (recursive schemas).
const maxDepth = 12

// genError says why no valid value could be built, at a JSON pointer.
type genError struct {
	Pointer string
	Why     string
}

func (e *genError) Error() string {
	if e.Pointer == "" {
		return e.Why
	}
	return e.Pointer + ": " + e.Why
}

// value returns a valid value of s (decoded JSON: map[string]any, []any, string, json.Number,
// bool, nil). at is the value's JSON pointer, for errors.
func (g *values) value(s *model.Schema, at string) (any, error) {
	return g.valueDepth(s, at, 0)
}

func (g *values) valueDepth(s *model.Schema, at string, depth int) (any, error) {
	if s == nil {
		return "conform", nil
	}
	if depth > maxDepth {
		return nil, &genError{at, "the schema requires members nested deeper than " + strconv.Itoa(maxDepth) + " levels (a recursive required member?)"}
	}
	for _, text := range []string{s.Example, s.Default} {
		if text == "" {
			continue
		}
		if v, ok := decodeValue(text); ok && g.valid(s, v) {
			return v, nil
		}
	}
	if len(s.Enum) > 0 {
		return s.Enum[0], nil
	}
	if len(s.EnumJSON) > 0 {
		if v, ok := decodeValue(s.EnumJSON[0]); ok {
			return v, nil
		}
	}
	switch s.Type {
	case model.TypeObject:
		// The required members; an object that requires none gets its scalar members, so the
		// request says something a handler can act on and a check can change.
		required := false
		for _, p := range s.Properties {
			required = required || p.Required
		}
		obj := map[string]any{}
		for _, p := range s.Properties {
			if !p.Required && (required || p.Schema == nil || !scalar(p.Schema)) {
				continue
			}
			v, err := g.valueDepth(p.Schema, at+"/"+escapeToken(p.Name), depth+1)
			if err != nil {
				if p.Required {
					return nil, err
				}
				continue
			}
			obj[p.Name] = v
		}
		return obj, nil
	case model.TypeArray:
		n := int64(1)
		if s.MinItems != nil {
			n = max(n, *s.MinItems)
		}
		if s.MaxItems != nil {
			n = min(n, *s.MaxItems)
		}
		arr := make([]any, 0, n)
		for i := range n {
			v, err := g.valueDepth(s.Items, at+"/"+strconv.FormatInt(i, 10), depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		return arr, nil
	case model.TypeString:
		str, err := g.str(s, "")
		if err != nil {
			return nil, &genError{at, err.Error()}
		}
		return str, nil
	case model.TypeInteger, model.TypeNumber:
		n, ok := g.number(s, 100, nil)
		if !ok {
			return nil, &genError{at, "no number satisfies the schema's bounds"}
		}
		return n, nil
	case model.TypeBoolean:
		return true, nil
	}
	// TypeAny: a oneOf/anyOf, a schema without a type, or several types.
	if s.EmptyOr != nil {
		return g.valueDepth(s.EmptyOr, at, depth+1)
	}
	for _, t := range append(append([]model.Type{}, s.Types...), s.Variants...) {
		switch t {
		case model.TypeString:
			return "conform", nil
		case model.TypeInteger, model.TypeNumber:
			return json.Number("100"), nil
		case model.TypeBoolean:
			return true, nil
		case model.TypeObject:
			return map[string]any{}, nil
		case model.TypeArray:
			return []any{}, nil
		}
	}
	return "conform", nil
}

// scalar reports whether s is a string, number, integer or boolean schema.
func scalar(s *model.Schema) bool {
	switch s.Type {
	case model.TypeString, model.TypeInteger, model.TypeNumber, model.TypeBoolean:
		return true
	}
	return false
}

// str returns a valid string of s different from not ("" for any).
func (g *values) str(s *model.Schema, not string) (string, error) {
	lo, hi := 1, 64
	if s.MinLength != nil {
		lo = int(*s.MinLength)
	}
	if s.MaxLength != nil {
		hi = int(*s.MaxLength)
	}
	if hi < lo {
		return "", fmt.Errorf("no string is %d to %d characters long", lo, hi)
	}
	for try := 0; try < 64; try++ {
		var c string
		if s.Pattern != "" {
			var err error
			if c, err = g.fromPattern(s.Pattern); err != nil {
				return "", err
			}
		} else {
			c = g.formatted(s.Format)
			if c == "" {
				c = g.word(max(lo, min(hi, 8+try%4)))
			}
		}
		if s.Pattern == "" && s.Format == "" {
			c = fitLength(c, lo, hi, g)
		}
		n := utf8.RuneCountInString(c)
		if n < lo || n > hi || c == not {
			continue
		}
		if s.Pattern != "" && !g.matcher.Match(s.Pattern, c) {
			continue
		}
		return c, nil
	}
	if s.Pattern != "" {
		return "", fmt.Errorf("could not generate a string of %d to %d characters matching the pattern %q", lo, hi, s.Pattern)
	}
	return "", fmt.Errorf("could not generate a %s string of %d to %d characters", s.Format, lo, hi)
}

// word is n random lower-case letters.
func (g *values) word(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + g.rng.IntN(26))
	}
	return string(b)
}

// fitLength pads or cuts s to lo..hi characters.
func fitLength(s string, lo, hi int, g *values) string {
	for utf8.RuneCountInString(s) < lo {
		s += g.word(1)
	}
	if r := []rune(s); len(r) > hi {
		s = string(r[:hi])
	}
	return s
}

// formatted is a value of a JSON Schema / OpenAPI string format, "" for a format it does not
// know (the string is then free text).
func (g *values) formatted(format string) string {
	switch format {
	case "date-time":
		return fmt.Sprintf("2026-%02d-%02dT%02d:%02d:%02dZ", 1+g.rng.IntN(12), 1+g.rng.IntN(28), g.rng.IntN(24), g.rng.IntN(60), g.rng.IntN(60))
	case "date":
		return fmt.Sprintf("2026-%02d-%02d", 1+g.rng.IntN(12), 1+g.rng.IntN(28))
	case "time":
		return fmt.Sprintf("%02d:%02d:%02dZ", g.rng.IntN(24), g.rng.IntN(60), g.rng.IntN(60))
	case "uuid":
		return g.fake.UUID()
	case "email":
		return g.word(8) + "@example.com"
	case "uri", "url", "uri-reference", "iri":
		return "https://example.com/" + g.word(8)
	case "hostname":
		return g.word(8) + ".example.com"
	case "ipv4":
		return g.fake.IPv4Address()
	case "ipv6":
		return g.fake.IPv6Address()
	case "byte":
		return "Y29uZm9ybQ=="
	case "int32", "int64":
		return strconv.Itoa(1 + g.rng.IntN(1000))
	}
	return ""
}

// fromPattern returns a string generated from pattern. Patterns are ECMA-262; gofakeit reads
// RE2 syntax, so lookaround groups, which RE2 lacks, are dropped before generation and the
// result is checked against the real pattern by the caller.
func (g *values) fromPattern(pattern string) (string, error) {
	src := stripLookaround(pattern)
	if _, err := syntax.Parse(src, syntax.Perl); err != nil {
		return "", fmt.Errorf("cannot generate strings for the pattern %q (its syntax is beyond RE2: %v)", pattern, err)
	}
	out := g.fake.Regex(src)
	if strings.HasPrefix(out, "Length limit reached") {
		return "", fmt.Errorf("cannot generate strings for the pattern %q", pattern)
	}
	return out, nil
}

// stripLookaround removes (?=…), (?!…), (?<=…) and (?<!…) groups from an ECMA pattern.
func stripLookaround(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			b.WriteString(p[i : i+2])
			i++
			continue
		}
		if strings.HasPrefix(p[i:], "(?=") || strings.HasPrefix(p[i:], "(?!") || strings.HasPrefix(p[i:], "(?<=") || strings.HasPrefix(p[i:], "(?<!") {
			depth := 0
			for ; i < len(p); i++ {
				switch p[i] {
				case '\\':
					i++
				case '(':
					depth++
				case ')':
					depth--
				}
				if depth == 0 {
					break
				}
			}
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// number returns a number of s near want, different from not (nil for any), inside its bounds
// and a multiple of its multipleOf, as JSON text.
func (g *values) number(s *model.Schema, want float64, not *json.Number) (json.Number, bool) {
	lo, hi := math.Inf(-1), math.Inf(1)
	if s.Minimum != nil {
		lo = *s.Minimum
	}
	if s.Maximum != nil {
		hi = *s.Maximum
	}
	integer := s.Type == model.TypeInteger
	ok := func(v float64) bool {
		if v < lo || v > hi || (s.ExclusiveMin && v == lo) || (s.ExclusiveMax && v == hi) {
			return false
		}
		if integer && (v != math.Trunc(v) || math.Abs(v) >= 1<<63) {
			return false
		}
		text := formatNumber(v, integer)
		if s.MultipleOf != nil && !multipleOf(text, *s.MultipleOf) {
			return false
		}
		return not == nil || string(*not) != text
	}
	cands := []float64{want, want + 1, want - 1, want * 2}
	if !math.IsInf(lo, 0) {
		cands = append(cands, lo, lo+1, math.Ceil(lo)+1, lo+(hi-lo)/2)
	}
	if !math.IsInf(hi, 0) {
		cands = append(cands, hi, hi-1, math.Floor(hi)-1)
	}
	if m := s.MultipleOf; m != nil {
		step := *m
		if integer {
			step = integerStep(step)
		}
		// Each candidate's nearest multiples, below and above: a bound's own is inside it.
		for _, c := range slices.Clone(cands) {
			cands = append(cands, snap(c, step, math.Round), snap(c, step, math.Ceil), snap(c, step, math.Floor))
		}
		cands = append(cands, 0)
	}
	for _, c := range cands {
		if integer {
			c = math.Round(c)
		}
		if ok(c) {
			return json.Number(formatNumber(c, integer)), true
		}
	}
	return "", false
}

// multipleOf reports whether the JSON number text n is a multiple of m (multipleOf: n / m is an
// integer), exactly: as the rationals n and m's shortest decimal denote, which is how the
// generated decoder checks it (canonical.MultipleOfReason), so 19.99 is a multiple of 0.01.
func multipleOf(n string, m float64) bool {
	var v, d big.Rat
	if _, ok := v.SetString(n); !ok {
		return false
	}
	if _, ok := d.SetString(strconv.FormatFloat(m, 'g', -1, 64)); !ok || d.Sign() <= 0 {
		return false
	}
	return v.Quo(&v, &d).IsInt()
}

// integerStep is the least integer that is a multiple of m: p for m = p/q in lowest terms (an
// integer is a multiple of 2.5 when it is one of 5).
func integerStep(m float64) float64 {
	var d big.Rat
	if _, ok := d.SetString(strconv.FormatFloat(m, 'g', -1, 64)); !ok {
		return m
	}
	f, _ := new(big.Float).SetInt(d.Num()).Float64()
	return f
}

// snap returns the multiple k × m nearest to c, with k = round(c / m) (math.Round, Ceil or
// Floor), computed on m's decimal so that 3 × 0.1 is 0.3, not 0.30000000000000004.
func snap(c, m float64, round func(float64) float64) float64 {
	var k, d big.Rat
	if k.SetFloat64(round(c/m)) == nil {
		return c // c / m is not finite: no multiple near c
	}
	if _, ok := d.SetString(strconv.FormatFloat(m, 'g', -1, 64)); !ok {
		return c
	}
	f, _ := k.Mul(&k, &d).Float64()
	return f
}

func formatNumber(v float64, integer bool) string {
	if integer {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// other returns another valid value of s than v, for a changed request; false when s allows
// no other (a one-value enum, a constant).
func (g *values) other(s *model.Schema, v any) (any, bool) {
	if s == nil {
		if str, ok := v.(string); ok {
			return str + "x", true
		}
		return nil, false
	}
	if len(s.Enum) > 0 {
		for _, e := range s.Enum {
			if e != v {
				return e, true
			}
		}
		return nil, false
	}
	if len(s.EnumJSON) > 0 {
		cur, _ := json.Marshal(v)
		for _, e := range s.EnumJSON {
			if e != string(cur) {
				if d, ok := decodeValue(e); ok {
					return d, true
				}
			}
		}
		return nil, false
	}
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, false
		}
		n, ok := g.number(s, f+1, &x)
		return n, ok
	case string:
		str, err := g.str(s, x)
		if err != nil {
			return nil, false
		}
		return str, true
	case bool:
		return !x, true
	}
	return nil, false
}

// valid reports whether v satisfies what s states that idemgen models: type, enum, lengths,
// pattern, bounds, required members and items.
func (g *values) valid(s *model.Schema, v any) bool {
	if s == nil {
		return true
	}
	if v == nil {
		return s.Nullable
	}
	if len(s.Enum) > 0 {
		str, ok := v.(string)
		if !ok {
			return false
		}
		found := false
		for _, e := range s.Enum {
			found = found || e == str
		}
		return found
	}
	switch s.Type {
	case model.TypeObject:
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for _, p := range s.Properties {
			pv, has := obj[p.Name]
			if (p.Required && !has) || (has && !g.valid(p.Schema, pv)) {
				return false
			}
		}
		return true
	case model.TypeArray:
		arr, ok := v.([]any)
		if !ok || (s.MinItems != nil && int64(len(arr)) < *s.MinItems) || (s.MaxItems != nil && int64(len(arr)) > *s.MaxItems) {
			return false
		}
		for _, e := range arr {
			if !g.valid(s.Items, e) {
				return false
			}
		}
		return true
	case model.TypeString:
		str, ok := v.(string)
		if !ok {
			return false
		}
		n := int64(utf8.RuneCountInString(str))
		if (s.MinLength != nil && n < *s.MinLength) || (s.MaxLength != nil && n > *s.MaxLength) {
			return false
		}
		return s.Pattern == "" || g.matcher.Match(s.Pattern, str)
	case model.TypeInteger, model.TypeNumber:
		num, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := num.Float64()
		if err != nil || (s.Type == model.TypeInteger && f != math.Trunc(f)) {
			return false
		}
		if s.Minimum != nil && (f < *s.Minimum || (s.ExclusiveMin && f == *s.Minimum)) {
			return false
		}
		if s.MultipleOf != nil && !multipleOf(num.String(), *s.MultipleOf) {
			return false
		}
		return s.Maximum == nil || (f <= *s.Maximum && !(s.ExclusiveMax && f == *s.Maximum))
	case model.TypeBoolean:
		_, ok := v.(bool)
		return ok
	}
	return true
}

// decodeValue decodes JSON text with numbers kept as json.Number.
func decodeValue(text string) (any, bool) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// escapeToken escapes a JSON pointer reference token (RFC 6901).
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
