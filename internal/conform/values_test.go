package conform

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/jsonvariant"
	"github.com/idemgen/idemgen/internal/model"
)

func ptr[T any](v T) *T { return &v }

// TestValues: every generated value satisfies its schema, examples and defaults are used when
// valid and ignored when not, and patterns (RE2 and ECMA-262) are matched by the runtime's
// own matcher.
func TestValues(t *testing.T) {
	str := func(s model.Schema) *model.Schema { s.Type = model.TypeString; return &s }
	cases := []struct {
		name string
		s    *model.Schema
		want string // the value's JSON, when it is fixed
	}{
		{"example", str(model.Schema{Example: `"EUR"`, MinLength: ptr[int64](3), MaxLength: ptr[int64](3)}), `"EUR"`},
		{"invalid example, valid default", str(model.Schema{Example: `"EURO"`, Default: `"USD"`, MaxLength: ptr[int64](3)}), `"USD"`},
		{"enum", str(model.Schema{Enum: []string{"card", "sepa"}}), `"card"`},
		{"pattern", str(model.Schema{Pattern: `^acct_[0-9A-Za-z]{16}$`}), ""},
		{"ECMA pattern with a lookahead", str(model.Schema{Pattern: `^(?=.*[0-9])[a-z0-9]{8,12}$`}), ""},
		{"uuid", str(model.Schema{Format: "uuid"}), ""},
		{"date-time", str(model.Schema{Format: "date-time"}), ""},
		{"lengths", str(model.Schema{MinLength: ptr[int64](40), MaxLength: ptr[int64](41)}), ""},
		{"integer bounds", &model.Schema{Type: model.TypeInteger, Minimum: ptr(500.0), Maximum: ptr(600.0)}, ""},
		{"exclusive bounds", &model.Schema{Type: model.TypeNumber, Minimum: ptr(0.0), Maximum: ptr(1.0), ExclusiveMin: true, ExclusiveMax: true}, ""},
		{"multipleOf cents", &model.Schema{Type: model.TypeNumber, MultipleOf: ptr(0.01), Maximum: ptr(999999.99)}, `100`},
		{"multipleOf an awkward step", &model.Schema{Type: model.TypeNumber, MultipleOf: ptr(0.07), Minimum: ptr(0.1), Maximum: ptr(0.2)}, `0.14`},
		{"multipleOf of an integer", &model.Schema{Type: model.TypeInteger, MultipleOf: ptr(7.0), Minimum: ptr(1.0)}, `98`},
		{"multipleOf of a fraction of an integer", &model.Schema{Type: model.TypeInteger, MultipleOf: ptr(2.5), Minimum: ptr(101.0), Maximum: ptr(109.0)}, `105`},
		{"multipleOf tight bounds", &model.Schema{Type: model.TypeInteger, MultipleOf: ptr(1000.0), Minimum: ptr(1001.0), Maximum: ptr(2000.0)}, `2000`},
		{"multipleOf invalid example", &model.Schema{Type: model.TypeNumber, MultipleOf: ptr(0.5), Example: `0.3`}, `100`},
		{"required members only", &model.Schema{Type: model.TypeObject, Properties: []*model.Property{
			{Name: "amount", Required: true, Schema: &model.Schema{Type: model.TypeInteger, Minimum: ptr(1.0)}},
			{Name: "note", Schema: &model.Schema{Type: model.TypeString}},
		}}, `{"amount":100}`},
		{"no required member: the scalars", &model.Schema{Type: model.TypeObject, Properties: []*model.Property{
			{Name: "petId", Schema: &model.Schema{Type: model.TypeInteger}},
			{Name: "tags", Schema: &model.Schema{Type: model.TypeArray, Items: &model.Schema{Type: model.TypeString}}},
		}}, `{"petId":100}`},
		{"array of at least two", &model.Schema{Type: model.TypeArray, MinItems: ptr[int64](2), Items: &model.Schema{Type: model.TypeBoolean}}, `[true,true]`},
		{"anyOf with an empty-string member", &model.Schema{Type: model.TypeAny, Composite: true, EmptyOr: &model.Schema{Type: model.TypeInteger}}, `100`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newValues(3)
			for range 20 {
				v, err := g.value(c.s, "")
				if err != nil {
					t.Fatal(err)
				}
				if !g.valid(c.s, v) {
					t.Fatalf("%s does not satisfy the schema", jsonText(v))
				}
				if c.want != "" && jsonText(v) != c.want {
					t.Fatalf("got %s, want %s", jsonText(v), c.want)
				}
				o, ok := g.other(c.s, v)
				if ok && (!g.valid(c.s, o) || jsonText(o) == jsonText(v)) {
					t.Fatalf("other value %s of %s is invalid or the same", jsonText(o), jsonText(v))
				}
			}
		})
	}
	if _, err := newValues(1).value(&model.Schema{Type: model.TypeString, Pattern: `^a$`, MinLength: ptr[int64](3)}, "/x"); err == nil || !strings.Contains(err.Error(), "/x") {
		t.Errorf("an impossible pattern and length: %v, want a located error", err)
	}
}

// TestSpellings: every spelling of a body decodes to the same value, the duplicate member is
// written twice, and form variants keep the fields.
func TestSpellings(t *testing.T) {
	v, _ := decodeValue(`{"b":{"y":[1,2.5,"s"],"x":null},"a":"é/\"","n":1e3}`)
	req := &request{content: &model.Content{Kind: model.ContentJSON}, json: v}
	// By value: numbers as float64, members sorted.
	byValue := func(b []byte) string {
		var x any
		if err := json.Unmarshal(b, &x); err != nil {
			return err.Error()
		}
		out, _ := json.Marshal(x)
		return string(out)
	}
	want := byValue(req.encodeBody(spellCanonical))
	for _, sp := range []spelling{spellReversed, spellIndented} {
		if got := byValue(req.encodeBody(sp)); got != want {
			t.Errorf("spelling %d: %s", sp, req.encodeBody(sp))
		}
	}
	if string(req.encodeBody(spellReversed)) == string(req.encodeBody(spellCanonical)) {
		t.Error("the reversed spelling is the canonical one")
	}
	for seed := uint64(1); seed <= 3; seed++ {
		vb, _ := jsonvariant.Of(req.encodeBody(spellCanonical), seed)
		if got := byValue(vb); got != want {
			t.Errorf("variant %d: %s", seed, vb)
		}
	}
	dup := duplicateMember(v, []string{"b", "x"}, json.Number("1"), json.Number("2"))
	if !strings.Contains(string(dup), `"x":1,"x":2`) {
		t.Errorf("duplicate member: %s", dup)
	}
	form := []field{{name: "amount", value: "100"}, {name: "metadata[k]", value: "a b"}}
	if got := string(encodeForm(form, true)); got != "amount=%31%30%30&metadata%5Bk%5D=%61%20%62" {
		t.Errorf("percent-encoded form: %s", got)
	}
}

func TestParseEffects(t *testing.T) {
	for in, want := range map[string]int64{"42\n": 42, `{"payments": 2, "refunds": {"full": 1, "partial": 3}}`: 6, " 0 ": 0} {
		if got, err := ParseEffects([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "two", `{"a": 1.5}`, `[1,2]`} {
		if _, err := ParseEffects([]byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestHelpers(t *testing.T) {
	if got := stripLookaround(`^(?=.*\d)(?!x)[a-z(]{2}(?<=a)$`); got != `^[a-z(]{2}$` {
		t.Errorf("stripLookaround: %q", got)
	}
	if !templateMatches("/v1/payments/{id}/refunds", "/v1/payments/pay_1/refunds") || templateMatches("/v1/payments", "/v1/payments/x") {
		t.Error("templateMatches")
	}
}
