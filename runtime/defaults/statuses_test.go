package defaults

import (
	"slices"
	"testing"
)

// TestFinal: the last rule that matches a status decides; a status no rule matches is not
// final; nil rules are the default.
func TestFinal(t *testing.T) {
	c2, c4, c5 := StatusRule{Class: 2}, StatusRule{Class: 4}, StatusRule{Class: 5}
	not := func(code int) StatusRule { return StatusRule{Code: code, Exclude: true} }
	code := func(code int) StatusRule { return StatusRule{Code: code} }
	for _, c := range []struct {
		name   string
		rules  []StatusRule
		status int
		want   bool
	}{
		{"default 201", nil, 201, true},
		{"default 404", nil, 404, true},
		{"default 409", nil, 409, false},
		{"default 429", nil, 429, false},
		{"default 500", nil, 500, false},
		{"default 302", nil, 302, false},
		{"exclusion after the class wins", []StatusRule{c2, c4, not(404)}, 404, false},
		{"the class after the exclusion wins", []StatusRule{c2, not(404), c4}, 404, true},
		{"the exclusion first, then the class", []StatusRule{not(404), c4}, 404, true},
		{"a success under no rule", []StatusRule{not(404), c4}, 201, false},
		{"a code alone", []StatusRule{code(402)}, 402, true},
		{"another code of the class", []StatusRule{code(402)}, 403, false},
		{"an excluded class", []StatusRule{c2, StatusRule{Class: 2, Exclude: true}}, 200, false},
		{"5xx opted in", []StatusRule{c2, c5}, 503, true},
		{"empty rules store nothing", []StatusRule{}, 200, false},
	} {
		if got := Final(c.rules, c.status); got != c.want {
			t.Errorf("%s: Final(%v, %d) = %v, want %v", c.name, c.rules, c.status, got, c.want)
		}
	}
	if got := FinalIn(nil, 4); len(got) != 96 || slices.Contains(got, 409) || !slices.Contains(got, 404) {
		t.Errorf("FinalIn(default, 4) = %v", got)
	}
}

// TestProfileAnswer: a row's answer is the problem table's, changed by the row.
func TestProfileAnswer(t *testing.T) {
	idem, _ := ProfileNamed(ProfileDefault)
	if a := idem.Answer(ProblemPayloadMismatch); a.Status != 422 || a.Type != ProblemPayloadMismatch || a.RetryAfter {
		t.Errorf("idemgen payload-mismatch: %+v", a)
	}
	if a := idem.Answer(ProblemInFlight); a.Status != 409 || !a.RetryAfter {
		t.Errorf("idemgen in-flight: %+v", a)
	}
	stripe, ok := ProfileNamed("stripe")
	if !ok {
		t.Fatal("no stripe row")
	}
	if a := stripe.Answer(ProblemPayloadMismatch); a.Status != 400 || a.Type != "idempotency_error" || a.Label() != "idempotency_error" {
		t.Errorf("stripe payload-mismatch: %+v", a)
	}
	if a := stripe.Answer(ProblemInFlight); a.Status != 409 || !a.RetryAfter || a.Type != "invalid_request_error" || a.Label() != "idempotency_key_in_use" {
		t.Errorf("stripe in-flight: %+v", a)
	}
	if a := stripe.Answer(ProblemKeyExpired); a.Status != 412 || a.Type != "invalid_request_error" {
		t.Errorf("stripe key-expired: %+v", a)
	}
	if names := ProfileNames(); names[0] != ProfileDefault {
		t.Errorf("the default row is not first: %v", names)
	}
	for _, p := range Profiles() {
		for _, a := range p.Answers {
			if _, ok := ProblemNamed(a.Problem); !ok {
				t.Errorf("row %s answers %q, which is no problem", p.Name, a.Problem)
			}
		}
	}
}

// TestShadowedRules: a rule that a later rule decides over is found, with the rule that does.
func TestShadowedRules(t *testing.T) {
	c2, c4 := StatusRule{Class: 2}, StatusRule{Class: 4}
	not := func(code int) StatusRule { return StatusRule{Code: code, Exclude: true} }
	for _, c := range []struct {
		rules []StatusRule
		want  []Shadowed
	}{
		{Statuses(), nil},
		{[]StatusRule{not(404), c4}, []Shadowed{{0, 1}}},
		{[]StatusRule{c2, not(404), c4}, []Shadowed{{1, 2}}},
		{[]StatusRule{c2, c4, not(404)}, nil},
		{[]StatusRule{c2, c2}, []Shadowed{{0, -1}}},
		{[]StatusRule{{Code: 404}, c4, not(409)}, []Shadowed{{0, -1}}},
	} {
		if got := ShadowedRules(c.rules); !slices.Equal(got, c.want) {
			t.Errorf("ShadowedRules(%v) = %v, want %v", c.rules, got, c.want)
		}
	}
}

// TestAnswerAt: an answer for one parameter changes the problem's answer there only, keeping
// what it does not set; header pointers compare without letter case.
func TestAnswerAt(t *testing.T) {
	row := Profile{Name: "x", Envelope: Envelope{DefaultType: "invalid_request"}, Answers: []Answer{
		{Problem: ProblemBodyInvalid, Code: "invalid", Message: "bad: {detail}", Headers: []Header{{"X-A", "1"}}},
		{Problem: ProblemBodyInvalid, At: "/header/API-Version", Code: "unsupported_api_version", Allowed: "supported_versions"},
	}}
	if a := row.Answer(ProblemBodyInvalid); a.Code != "invalid" || a.Allowed != "" || a.At != "" {
		t.Errorf("the answer without a pointer took the pointer's: %+v", a)
	}
	if a := row.AnswerAt(ProblemBodyInvalid, "/buyer/email"); a.Code != "invalid" || a.Allowed != "" {
		t.Errorf("another pointer took the API-Version answer: %+v", a)
	}
	a := row.AnswerAt(ProblemBodyInvalid, "/header/api-version")
	if a.Code != "unsupported_api_version" || a.Allowed != "supported_versions" || a.Message != "bad: {detail}" ||
		len(a.Headers) != 1 || a.Status != 400 || a.Type != "invalid_request" {
		t.Errorf("AnswerAt(API-Version) = %+v", a)
	}
	acp, ok := ProfileNamed("acp")
	if !ok {
		t.Fatal("no acp row")
	}
	for name, code := range map[string]string{ProblemKeyMissing: "idempotency_key_required", ProblemPayloadMismatch: "idempotency_conflict", ProblemInFlight: "idempotency_in_flight"} {
		if a := acp.Answer(name); a.Code != code || a.Type != "invalid_request" {
			t.Errorf("acp %s: %+v, ACP's agentic-checkout RFC section 6.4 says invalid_request %s", name, a, code)
		}
	}
	if a := acp.Answer(ProblemInFlight); a.Status != 409 || !a.RetryAfter {
		t.Errorf("acp in-flight: %+v, want 409 with Retry-After", a)
	}
	if a := acp.Answer(ProblemPayloadMismatch); a.Status != 422 {
		t.Errorf("acp payload-mismatch: %d, want 422", a.Status)
	}
	for _, name := range ScopeNames() {
		if name == "" {
			t.Error("an empty scope name")
		}
	}
	for _, p := range Profiles() {
		if p.Scope != "" && !slices.Contains(ScopeNames(), p.Scope) {
			t.Errorf("row %s: scope %q is no scope", p.Name, p.Scope)
		}
		if n := p.Body.Nulls; n != "" && n != BodyNullsSchema && n != BodyNullsClear {
			t.Errorf("row %s: body.nulls %q", p.Name, n)
		}
		if u := p.Body.Unknown; u != "" && u != BodyUnknownSchema && u != BodyUnknownAccept {
			t.Errorf("row %s: body.unknown %q", p.Name, u)
		}
	}
}
