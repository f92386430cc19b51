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
