package generator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/internal/model"
)

// Fragment tests: single emit functions rendered with jennifer's %#v, compared with the Go
// they must produce.

func render1(c jen.Code) string {
	return strings.TrimSpace(fmt.Sprintf("%#v", c))
}

func renderAll(cs []jen.Code) string {
	var b []string
	for _, c := range cs {
		b = append(b, render1(c))
	}
	return strings.Join(b, "\n")
}

func ptrF(f float64) *float64 { return &f }
func ptrI(i int64) *int64     { return &i }

func TestChecksFragments(t *testing.T) {
	tests := []struct {
		name string
		t    *tinfo
		want string
	}{
		{"int64 minimum stays integer", &tinfo{kind: kInt64, s: &model.Schema{Minimum: ptrF(1)}}, "d.Min(v, 1)"},
		{"exclusive maximum", &tinfo{kind: kInt64, s: &model.Schema{Maximum: ptrF(100), ExclusiveMax: true}}, "d.ExclusiveMax(v, 100)"},
		{"int32 widens exactly", &tinfo{kind: kInt32, s: &model.Schema{Minimum: ptrF(-5)}}, "d.Min(int64(v), -5)"},
		{"fractional bound on an integer compares in float64", &tinfo{kind: kInt64, s: &model.Schema{Minimum: ptrF(0.5)}},
			"d.MinFloat(float64(v), 0.5)"},
		{"int32 bound outside int32 compares in float64", &tinfo{kind: kInt32, s: &model.Schema{Maximum: ptrF(1e10)}},
			"d.MaxFloat(float64(v), 1e+10)"},
		{"number", &tinfo{kind: kFloat, s: &model.Schema{Minimum: ptrF(0), ExclusiveMin: true}}, "d.ExclusiveMinFloat(v, 0.0)"},
		{"exact length in code points", &tinfo{kind: kString, s: &model.Schema{MinLength: ptrI(3), MaxLength: ptrI(3)}}, "d.Length(v, 3, 3)"},
		{"length range", &tinfo{kind: kString, s: &model.Schema{MinLength: ptrI(1), MaxLength: ptrI(9)}}, "d.Length(v, 1, 9)"},
		{"no minimum length", &tinfo{kind: kString, s: &model.Schema{MaxLength: ptrI(0)}}, "d.Length(v, -1, 0)"},
		{"length then pattern", &tinfo{kind: kString, s: &model.Schema{MaxLength: ptrI(9), Pattern: `^\d+$`}},
			"d.Length(v, -1, 9)\nd.Pattern(v, \"^\\\\d+$\")"},
		{"items", &tinfo{kind: kSlice, s: &model.Schema{MaxItems: ptrI(10)}}, "d.Items(len(v), -1, 10)"},
		{"boolean enum", &tinfo{kind: kBool, s: &model.Schema{EnumJSON: []string{"true"}}}, "if !v {\n\td.Invalid(\"must be true\")\n}"},
		{"a string enum is checked as it is read", &tinfo{kind: kEnum, s: &model.Schema{Enum: []string{"a"}}}, ""},
		{"no constraints", &tinfo{kind: kString, s: &model.Schema{}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderAll(checks(tt.t, jen.Id("v"), jen.Id("d")))
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestAppendValFragments(t *testing.T) {
	g := newPlanner(&model.Document{}, Options{Package: "x"})
	o := &opPlan{op: &model.Operation{ID: "op"}, name: "Op"}
	ex := &trie{}
	ex.add([]string{"trace_id"})
	strMap := &tinfo{kind: kMap, elem: &tinfo{kind: kString}}
	tests := []struct {
		name string
		t    *tinfo
		n    *trie
		want string
	}{
		{"string", &tinfo{kind: kString}, nil, "canonical.AppendString(b, v.X)"},
		{"int32 widens exactly", &tinfo{kind: kInt32}, nil, "canonical.AppendInt(b, int64(v.X))"},
		{"raw is already canonical", &tinfo{kind: kRaw}, nil, "append(b, v.X...)"},
		{"map leaves out excluded keys", strMap, ex, "canonical.AppendMap(b, v.X, canonical.AppendString, \"trace_id\")"},
		{"map of every value excluded", strMap, &trie{star: &trie{leaf: true}}, "append(b, \"{}\"...)"},
		{"array of enums", &tinfo{kind: kSlice, elem: &tinfo{kind: kEnum, name: "Color"}}, nil, "canonical.AppendArray(b, v.X, canonical.AppendStringOf[Color])"},
		{"array of int32", &tinfo{kind: kSlice, elem: &tinfo{kind: kInt32}}, nil, "canonical.AppendArray(b, v.X, canonical.AppendIntOf[int32])"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := render1(g.plan.appendExpr(g.canonValue(tt.t, tt.n, o), jen.Id("v").Dot("X"), jen.Id("b"), 0))
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	if g.diags.HasErrors() {
		t.Fatal(g.diags.Err())
	}
	// An exclusion into a oneOf value cannot be resolved statically: a located error, found
	// while planning.
	g.canonValue(&tinfo{kind: kRaw}, ex, o)
	if err := g.diags.Err(); err == nil || !strings.Contains(err.Error(), "unsupported-exclusion") {
		t.Errorf("exclusion into a raw value: err = %v", err)
	}
}

func TestExclusionTrie(t *testing.T) {
	a := &trie{}
	a.add([]string{"lines", "*", "note"})
	a.add([]string{"metadata", "trace_id"})
	if got, want := a.sig(), `"lines"(*("note"(!)))"metadata"("trace_id"(!))`; got != want {
		t.Errorf("sig = %s, want %s", got, want)
	}
	// member() merges the named child with the wildcard.
	b := &trie{}
	b.add([]string{"*", "x"})
	b.add([]string{"k", "y"})
	if got, want := b.member("k").sig(), `"x"(!)"y"(!)`; got != want {
		t.Errorf("member(k) = %s, want %s", got, want)
	}
	if got := (*trie)(nil).member("k"); got != nil {
		t.Errorf("nil trie member = %v", got)
	}
}

func TestSplitSegment(t *testing.T) {
	tests := []struct {
		seg    string
		lits   []string
		params []string
		ok     bool
	}{
		{"{Sid}.json", []string{"", ".json"}, []string{"Sid"}, true},
		{"{Sid}.{Format}", []string{"", ".", ""}, []string{"Sid", "Format"}, true},
		{"v{n}", []string{"v", ""}, []string{"n"}, true},
		{"Calls.json", []string{"Calls.json"}, nil, true},
		{"{a", nil, nil, false},
		{"a}", nil, nil, false},
	}
	for _, tt := range tests {
		lits, params, ok := splitSegment(tt.seg)
		if ok != tt.ok || fmt.Sprint(lits) != fmt.Sprint(tt.lits) || fmt.Sprint(params) != fmt.Sprint(tt.params) {
			t.Errorf("splitSegment(%q) = %q %q %v, want %q %q %v", tt.seg, lits, params, ok, tt.lits, tt.params, tt.ok)
		}
	}
}

func TestNames(t *testing.T) {
	for in, want := range map[string]string{
		"card_present": "CardPresent", "EUR": "EUR", "3ds": "X3ds", "": "Empty", "guinea-pig": "GuineaPig", "é": "É",
	} {
		if got := exportedIdent(in); got != want {
			t.Errorf("exportedIdent(%q) = %q, want %q", in, got, want)
		}
	}
	n := newNamer("Register")
	if got := []string{n.take("Register"), n.take("A"), n.take("A"), n.take("A2")}; fmt.Sprint(got) != "[Register2 A A2 A22]" {
		t.Errorf("namer: %v", got)
	}
	if got := render1(durationLit(90 * time.Minute)); got != "90 * time.Minute" {
		t.Errorf("durationLit = %s", got)
	}
}

func TestServeMuxChecks(t *testing.T) {
	if r := invalidPattern("POST /a/{x}/{x}"); r == "" {
		t.Error("duplicate wildcard accepted")
	}
	if r := invalidPattern("POST /a/{x}/b.json"); r != "" {
		t.Errorf("valid pattern refused: %s", r)
	}
	if !conflicts("POST /accounts/{id}/close", "POST /{tenant}/accounts/close") {
		t.Error("overlapping patterns not reported")
	}
	if conflicts("POST /accounts/{id}", "POST /accounts/new") {
		t.Error("a more specific literal is not a conflict")
	}
}

// TestManyMembers: a struct with more than 64 members keeps its seen bits in words, numbers the
// required members first, and checks them word by word.
func TestManyMembers(t *testing.T) {
	g := newPlanner(&model.Document{}, Options{Package: "x"})
	s := &model.Schema{Type: model.TypeObject, ClosedObject: true}
	for i := 0; i < 70; i++ {
		s.Properties = append(s.Properties, &model.Property{Name: fmt.Sprintf("m%d", i), GoName: fmt.Sprintf("M%d", i),
			Required: i == 3 || i == 69, Schema: &model.Schema{Type: model.TypeString}})
	}
	ti := g.typeOf(s, "Big")
	f := jen.NewFile("x")
	g.plan.emitStructDecoder(f, ti)
	src := fmt.Sprintf("%#v", f)
	for _, want := range []string{
		"var seen [2]uint64",
		`case "m3":` + "\n\t\t\tv.M3 = d.Field(&seen[0], 0).Str()",   // required: bit 0
		`case "m69":` + "\n\t\t\tv.M69 = d.Field(&seen[0], 1).Str()", // required: bit 1
		`case "m0":` + "\n\t\t\tv.M0 = canonical.Ptr(d.Field(&seen[0], 2).Str())",
		`case "m68":` + "\n\t\t\tv.M68 = canonical.Ptr(d.Field(&seen[1], 5).Str())",
		`d.Required(seen[0], "m3", "m69")`,
	} {
		if !strings.Contains(src, want) {
			t.Errorf("missing %q in\n%s", want, src)
		}
	}
}
