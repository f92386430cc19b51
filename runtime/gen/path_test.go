package gen

import (
	"slices"
	"testing"
)

func TestParseSegment(t *testing.T) {
	for _, tt := range []struct {
		seg            string
		pieces, params []string
		ok             bool
	}{
		{"payments", []string{"payments"}, nil, true},
		{"{id}", []string{"", ""}, []string{"id"}, true},
		{"{Sid}.json", []string{"", ".json"}, []string{"Sid"}, true},
		{"{Sid}.{Format}", []string{"", ".", ""}, []string{"Sid", "Format"}, true},
		{"v{major}-{minor}x", []string{"v", "-", "x"}, []string{"major", "minor"}, true},
		{"{a", []string{"{a"}, nil, false},
		{"a}b", []string{"a}b"}, nil, false},
		{"{a{b}}", []string{"{a{b}}"}, nil, false},
		{"}{a}", []string{"}{a}"}, nil, false},
	} {
		s, ok := ParseSegment(tt.seg)
		if ok != tt.ok || !slices.Equal(s.Pieces, tt.pieces) || !slices.Equal(s.Params, tt.params) {
			t.Errorf("ParseSegment(%q) = %q %q %v, want %q %q %v", tt.seg, s.Pieces, s.Params, ok, tt.pieces, tt.params, tt.ok)
		}
	}
}

func TestMatchSegment(t *testing.T) {
	for _, tt := range []struct {
		seg    string
		pieces []string
		want   []string // nil: no match
	}{
		{"CA1.json", []string{"", ".json"}, []string{"CA1"}},
		{".json", []string{"", ".json"}, nil},   // empty value
		{"CA1.xml", []string{"", ".json"}, nil}, // wrong literal
		{"RE1.mp3", []string{"", ".", ""}, []string{"RE1", "mp3"}},
		{"a.b.c", []string{"", ".", ""}, []string{"a", "b.c"}}, // each value ends at the next piece
		{"RE1.", []string{"", ".", ""}, nil},
		{".mp3", []string{"", ".", ""}, nil},
		{"v1-2x", []string{"v", "-", "x"}, []string{"1", "2"}},
		{"v-2x", []string{"v", "-", "x"}, nil},
		{"vx", []string{"v", "x"}, nil},
		{"literal", []string{"literal"}, []string{}},
		{"other", []string{"literal"}, nil},
	} {
		got, ok := MatchSegment(tt.seg, tt.pieces...)
		if ok != (tt.want != nil) || ok && len(tt.want) > 0 && !slices.Equal(got, tt.want) {
			t.Errorf("MatchSegment(%q, %q) = %q %v, want %q", tt.seg, tt.pieces, got, ok, tt.want)
		}
		if SegmentMatches(tt.seg, tt.pieces...) != ok {
			t.Errorf("SegmentMatches(%q) disagrees with MatchSegment", tt.seg)
		}
	}
}

// Match takes the segments a router compares: percent-decoded for http.ServeMux, as sent for
// chi, where a parameter may also be empty.
func TestTemplateMatch(t *testing.T) {
	refunds := ParseTemplate("/v1/payments/{payment_id}/refunds")
	twilio := ParseTemplate("/Accounts/{AccountSid}/Recordings/{Sid}.{Format}")
	trail := ParseTemplate("/v1/items/")
	for _, tt := range []struct {
		tmpl  Template
		path  string
		empty bool
		want  bool
	}{
		{refunds, "/v1/payments/pay_1/refunds", false, true},
		{refunds, "/v1/%70ayments/pay_1/refunds", false, true}, // decoded: "payments"
		{refunds, "/v1/payments/a%2Fb/refunds", false, true},   // one segment, value "a/b"
		{refunds, "/v1/payments//refunds", false, false},
		{refunds, "/v1/payments//refunds", true, true},
		{refunds, "/v1/payments/pay_1/refunds/", false, false},
		{refunds, "/V1/payments/pay_1/refunds", false, false},
		{refunds, "/v1/payments/pay_1/refunds;x", false, false},
		{twilio, "/Accounts/AC1/Recordings/RE1.mp3", false, true},
		{twilio, "/Accounts/AC1/Recordings/RE1", false, false},
		{twilio, "/Accounts/AC1/Recordings/RE1%2Emp3", false, true},
		{trail, "/v1/items/", false, true},
		{trail, "/v1/items", false, false},
		{ParseTemplate("/"), "/", false, true},
		{ParseTemplate("/"), "/x", false, false},
	} {
		segs := DecodeSegments(SplitPath(tt.path))
		if got := tt.tmpl.Match(segs, tt.empty); got != tt.want {
			t.Errorf("%v Match(%q, empty=%v) = %v, want %v", tt.tmpl.Segments(), tt.path, tt.empty, got, tt.want)
		}
	}
}

func TestTemplateValue(t *testing.T) {
	tmpl := ParseTemplate("/Accounts/{AccountSid}/Recordings/{Sid}.{Format}")
	segs := DecodeSegments(SplitPath("/api/2010/Accounts/AC%2F1/Recordings/RE1.mp3"))
	for name, want := range map[string]string{"AccountSid": "AC/1", "Sid": "RE1", "Format": "mp3"} {
		if v, ok := tmpl.Value(segs, name); !ok || v != want {
			t.Errorf("Value(%s) = %q %v, want %q", name, v, ok, want)
		}
	}
	if _, ok := tmpl.Value(segs, "Other"); ok {
		t.Error("a name the template does not have has a value")
	}
	if _, ok := tmpl.Value(SplitPath("/Accounts/AC1/Recordings/RE1"), "Sid"); ok {
		t.Error("a mixed segment without its literal has a value")
	}
	if _, ok := tmpl.Value(SplitPath("/Recordings/RE1.mp3"), "Sid"); ok {
		t.Error("a path shorter than the template has a value")
	}
}

func TestTemplateShape(t *testing.T) {
	spec := ParseTemplate("/v1/payments/{payment_id}/refunds")
	for _, tt := range []struct {
		pattern        string
		same, endsWith bool
	}{
		{"/v1/payments/{id}/refunds", true, true},
		{"/v1/payments/{payment_id}/refunds", true, true},
		{"/api/v1/payments/{id}/refunds", false, true},
		{"/v1/payments/{id}/captures", false, false},
		{"/v1/payments/pay_1/refunds", false, false},
		{"/payments/{id}/refunds", false, false},
	} {
		p := ParseTemplate(tt.pattern)
		if p.SameShape(spec) != tt.same || p.EndsWith(spec) != tt.endsWith {
			t.Errorf("%s: SameShape %v EndsWith %v, want %v %v", tt.pattern, p.SameShape(spec), p.EndsWith(spec), tt.same, tt.endsWith)
		}
	}
	lit, param := ParseTemplate("/v1/payments/search"), ParseTemplate("/v1/payments/{id}")
	if !lit.MoreSpecific(param) || param.MoreSpecific(lit) {
		t.Error("a literal segment does not sort before a parameter")
	}
}
