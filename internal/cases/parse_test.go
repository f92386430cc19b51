package cases

import (
	"strings"
	"testing"
	"time"
)

// The project's own cases must all load: a case the runner cannot read is a case never run.
func TestLoadDirProjectCases(t *testing.T) {
	cs, err := LoadDir("../../testdata/cases")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) < 24 {
		t.Fatalf("loaded %d cases, want at least 24", len(cs))
	}
	for i := 1; i < len(cs); i++ {
		if cs[i-1].Name >= cs[i].Name {
			t.Errorf("cases not sorted: %s before %s", cs[i-1].Name, cs[i].Name)
		}
	}
}

func TestParseReadsEveryField(t *testing.T) {
	src := `
about: all of it
steps:
  - request:
      method: POST
      path: /v1/x
      headers: {Authorization: Bearer t1, Idempotency-Key: [a, b], X-Test-Fail: 500, Empty: ""}
      body: '{"a": 1}'
    expect:
      status: 201
      headers: {Location: present, Retry-After: absent, Content-Type: application/json}
      body: {a: 1, b: [true, null, "s"], c: 10.5}
  - request: {method: POST, path: "/v1/x/${0.id}", body_base64: eyJhIjoxfQ==}
    parallel: 3
    wait: 1500ms
    expect:
      statuses: {201: 1, "409|replayed": rest}
      each: {409: {problem: in-flight, headers: {Retry-After: present}}}
  - request: {method: GET, path: /v1/x}
    expect: {same_as: 0, problem: key-missing}
effects: {payments: 1}
effects_by_tenant: {t2: {payments: 0}}
`
	c, err := Parse("x.yaml", "x", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s0 := c.Steps[0]
	wantHeader := []HeaderLine{{"Authorization", "Bearer t1"}, {"Idempotency-Key", "a"}, {"Idempotency-Key", "b"}, {"X-Test-Fail", "500"}, {"Empty", ""}}
	if len(s0.Request.Header) != len(wantHeader) {
		t.Fatalf("header lines = %v, want %v", s0.Request.Header, wantHeader)
	}
	for i := range wantHeader {
		if s0.Request.Header[i] != wantHeader[i] {
			t.Errorf("header line %d = %v, want %v", i, s0.Request.Header[i], wantHeader[i])
		}
	}
	if string(s0.Request.Body) != `{"a": 1}` || s0.Expect.Status != 201 || !s0.Expect.HasBody {
		t.Errorf("step 0 = %+v", s0)
	}
	if h := s0.Expect.Headers; len(h) != 3 || !h[0].Present || !h[1].Absent || h[2].Value != "application/json" {
		t.Errorf("expected headers = %+v", h)
	}
	body := s0.Expect.Body.(map[string]any)
	if body["a"] != Number("1") || body["c"] != Number("10.5") {
		t.Errorf("expected body = %#v", body)
	}
	s1 := c.Steps[1]
	if string(s1.Request.Body) != `{"a":1}` || s1.Parallel != 3 || s1.Wait != 1500*time.Millisecond {
		t.Errorf("step 1 = %+v", s1)
	}
	st := s1.Expect.Statuses
	if len(st) != 2 || st[0].Count != 1 || st[0].Class.Codes[0] != 201 || !st[1].Rest || !st[1].Class.Replayed || st[1].Class.Codes[0] != 409 {
		t.Errorf("statuses = %+v", st)
	}
	if e := s1.Expect.Each; len(e) != 1 || e[0].Expect.Problem != "in-flight" || !e[0].Expect.Headers[0].Present {
		t.Errorf("each = %+v", e)
	}
	if s2 := c.Steps[2]; !s2.Expect.HasSameAs || s2.Expect.SameAs != 0 || s2.Request.Body != nil {
		t.Errorf("step 2 = %+v", s2)
	}
	if c.Effects["payments"] != 1 || c.EffectsByTenant["t2"]["payments"] != 0 || len(c.EffectsByTenant["t2"]) != 1 {
		t.Errorf("effects = %v, by tenant %v", c.Effects, c.EffectsByTenant)
	}
}

func TestParseErrorsAreLocated(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"unknown field", "steps:\n  - request: {method: POST, path: /x}\n    expect: {status: 201, stauts: 1}\n", "x.yaml:3: steps[0].expect: unknown field \"stauts\""},
		{"no steps", "about: a\n", "x.yaml:1: case: no steps"},
		{"same_as forward", "steps:\n  - request: {method: POST, path: /x}\n    expect: {same_as: 1}\n  - request: {method: POST, path: /x}\n    expect: {status: 1}\n", "same_as refers to step 1, which has not run yet"},
		{"ref to parallel", "steps:\n  - request: {method: POST, path: /x}\n    parallel: 2\n    expect: {statuses: {201: 2}}\n  - request: {method: POST, path: '/x/${0.id}'}\n    expect: {status: 201}\n", "${0.id} refers to step 0, a parallel step"},
		{"statuses without parallel", "steps:\n  - request: {method: POST, path: /x}\n    expect: {statuses: {201: 1}}\n", "use status for a single request"},
		{"statuses overlap", "steps:\n  - request: {method: POST, path: /x}\n    parallel: 3\n    expect: {statuses: {201: 1, '201|409': rest}}\n", "can count the same response"},
		{"statuses short", "steps:\n  - request: {method: POST, path: /x}\n    parallel: 3\n    expect: {statuses: {201: 1, 409: 1}}\n", "counts add up to 2, not parallel: 3"},
		{"bad class", "steps:\n  - request: {method: POST, path: /x}\n    parallel: 2\n    expect: {statuses: {201: 1, replay: rest}}\n", "\"replay\" is neither a status code nor replayed"},
		{"both bodies", "steps:\n  - request: {method: POST, path: /x, body: a, body_base64: YQ==}\n    expect: {status: 201}\n", "give body or body_base64, not both"},
		{"bad wait", "steps:\n  - request: {method: POST, path: /x}\n    wait: soon\n    expect: {status: 201}\n", "x.yaml:3: steps[0].wait"},
		{"empty expect", "steps:\n  - request: {method: POST, path: /x}\n    expect: {}\n", "expect: states nothing"},
		{"bad tenant", "steps:\n  - request: {method: POST, path: /x}\n    expect: {status: 201}\neffects_by_tenant: {acme: {payments: 1}}\n", "tenant \"acme\" is not of the form t<N>"},
		{"bad method", "steps:\n  - request: {method: post, path: /x}\n    expect: {status: 201}\n", "want an HTTP method"},
		{"count not int", "steps:\n  - request: {method: POST, path: /x}\n    expect: {status: 201}\neffects: {payments: one}\n", "effects.payments: want an integer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", "x", []byte(tc.src))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\ndoes not contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadDirReportsEveryBadFile(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "001-good.yaml", "steps:\n  - request: {method: GET, path: /x}\n    expect: {status: 200}\n")
	write(t, dir, "002-bad.yaml", "steps: 3\n")
	write(t, dir, "003-bad.yml", "steps:\n  - nope: 1\n")
	write(t, dir, "notes.yaml", "not a case: true\n") // not NNN-name: ignored
	_, err := LoadDir(dir)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"002-bad.yaml:1", "003-bad.yml:2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "notes.yaml") {
		t.Errorf("error %q names a file that is not a case", err)
	}
	if _, err := LoadDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no case files") {
		t.Errorf("empty folder: error %v", err)
	}
}
