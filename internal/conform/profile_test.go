package conform

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/history"
	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// TestEveryRowJudgesItsRuntime: for every row of the contract table, what the runtime answers
// under the row (runtime.NamedProfile, its envelope writer or RFC 9457 problems) is what conform
// expects under the row, named or not: a row is one definition that both read, and a new row is
// judged without a line of conform changing. Under another row's name, the row's answers that
// differ in status or words are told apart.
func TestEveryRowJudgesItsRuntime(t *testing.T) {
	for _, row := range defaults.Profiles() {
		p := runtime.NamedProfile(row.Name)
		if p == nil {
			t.Fatalf("%s: runtime.NamedProfile has no profile for the row", row.Name)
		}
		write := p.Problems
		if write == nil {
			write = runtime.ProblemJSON("https://api.example.com/errors/")
		}
		for _, named := range []bool{true, false} {
			op := &model.Operation{ID: "op"}
			if named {
				op.Settings.Profile = model.Profile(row.Name)
			}
			e := expectationsFor(op, "")
			if !named && e.row.Name != defaults.ProfileDefault {
				t.Fatalf("%s: without a profile the default row judges, got %s", row.Name, e.row.Name)
			}
			for _, c := range []struct {
				name string
				a    answer
			}{
				{defaults.ProblemPayloadMismatch, e.mismatch},
				{defaults.ProblemInFlight, e.inFlight},
				{defaults.ProblemKeyMissing, e.keyMissing},
				{defaults.ProblemKeyInvalid, e.keyInvalid},
			} {
				w := httptest.NewRecorder()
				pr := runtime.Problem{Name: c.name, Status: defaults.ProblemStatus(c.name), Detail: "d"}
				if ans := row.Answer(c.name); ans.RetryAfter {
					pr.RetryAfter = 1e9
				}
				write(w, httptest.NewRequest("POST", "/", nil), pr)
				ex := &Exchange{Status: w.Code, respHeaderRaw: w.Header(), respBodyRaw: w.Body.Bytes(), RespBody: w.Body.String()}
				why := c.a.judge(ex)
				switch {
				case named && why != "":
					t.Errorf("%s: the runtime's %s under the row is judged wrong: %s (%s)", row.Name, c.name, why, w.Body)
				case !named && row.Answer(c.name).Status == defaults.ProblemStatus(c.name) && why != "":
					t.Errorf("%s: without a profile, the runtime's %s at the default status is judged wrong: %s", row.Name, c.name, why)
				}
			}
		}
	}
}

// TestUnnamedJudgesStatusesOnly: a spec that names no profile is judged by statuses and
// Retry-After, in any words (RFC 9457 about:blank problems, plain JSON); naming the default row
// makes its problem types part of the contract.
func TestUnnamedJudgesStatusesOnly(t *testing.T) {
	op := &model.Operation{ID: "op"}
	for _, body := range []string{
		`{"type":"about:blank","title":"Unprocessable Content","status":422}`,
		`{"error":"the key was used with another request"}`,
		``,
	} {
		ex := &Exchange{Status: 422, respBodyRaw: []byte(body), RespBody: body}
		if why := expectationsFor(op, "").mismatch.judge(ex); why != "" {
			t.Errorf("%q: %s", body, why)
		}
		if why := expectationsFor(op, defaults.ProfileDefault).mismatch.judge(ex); why == "" {
			t.Errorf("%q: accepted under --profile idemgen", body)
		}
	}
	if why := expectationsFor(op, "").mismatch.judge(&Exchange{Status: 400}); why == "" {
		t.Error("a 400 mismatch is accepted without a profile that says so")
	}
	if why := expectationsFor(op, "stripe").mismatch.judge(&Exchange{Status: 400, respBodyRaw: []byte(`{"error":{"type":"idempotency_error"}}`)}); why != "" {
		t.Errorf("Stripe's mismatch under --profile stripe: %s", why)
	}
}

// TestKindFollowsTheReplayRules: in fault histories a 4xx is an execution when the operation's
// replay.statuses store it and a release of the key when they do not, read as the runtime reads
// them (the last matching rule decides): under ["2xx", "!404", "4xx"] a 404 is stored, so a
// service that replays it is correct (conform's own copy of the rule once said otherwise).
func TestKindFollowsTheReplayRules(t *testing.T) {
	rules := func(rs ...model.StatusRule) *opRun {
		op := &model.Operation{ID: "op", Settings: model.Settings{Replay: model.ReplaySettings{Statuses: rs}}}
		return &opRun{op: op, exp: expectationsFor(op, "")}
	}
	c2, c4, not404 := model.StatusRule{Class: 2}, model.StatusRule{Class: 4}, model.StatusRule{Code: 404, Exclude: true}
	if k := rules(c2, not404, c4).kind(404, nil, nil); k != history.KindOK {
		t.Errorf(`["2xx", "!404", "4xx"]: a 404 is %v, want an execution (stored)`, k)
	}
	if k := rules(c2, c4, not404).kind(404, nil, nil); k != history.KindFailed {
		t.Errorf(`["2xx", "4xx", "!404"]: a 404 is %v, want a release (not stored)`, k)
	}
	if k := rules().kind(409, nil, nil); k != history.KindConflict {
		t.Errorf("default rules: a 409 is %v", k)
	}
}

// TestKeyExpiresJudged: where the spec declares Idempotency-Key-Expires, a stored answer must
// carry an IMF-fixdate that has not passed, and a replay the same instant as the answer it
// repeats (within the rounding of two reads); where it is not declared, nothing is asked.
func TestKeyExpiresJudged(t *testing.T) {
	now := time.Now().UTC()
	at := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	ex := func(v string) *Exchange {
		e := &Exchange{Status: 201, Start: now, respHeaderRaw: http.Header{}}
		if v != "" {
			e.respHeaderRaw.Set(defaults.KeyExpiresHeader, v)
		}
		return e
	}
	x := expectations{keyExpires: true}
	first := ex(at(24 * time.Hour))
	for _, c := range []struct {
		name  string
		e     *Exchange
		first *Exchange
		bad   bool
	}{
		{"a day ahead", first, nil, false},
		{"absent", ex(""), nil, true},
		{"not an IMF-fixdate", ex(now.Add(time.Hour).Format(time.RFC3339)), nil, true},
		{"already past", ex(at(-time.Hour)), nil, true},
		{"replay, the same instant", ex(at(24*time.Hour - time.Second)), first, false},
		{"replay, another instant", ex(at(23 * time.Hour)), first, true},
	} {
		if got := x.keyExpiresProblem(c.e, c.first); (got != "") != c.bad {
			t.Errorf("%s: problem %q, want one: %v", c.name, got, c.bad)
		}
	}
	if got := (expectations{}).keyExpiresProblem(ex(""), nil); got != "" {
		t.Errorf("undeclared header judged: %q", got)
	}
}
