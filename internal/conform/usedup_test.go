package conform

import (
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/internal/model"
)

// TestUsedUp is the used-up rule as a table: which answers of fresh keys make a check skip
// (opRun.usedUp) under ["2xx", "4xx", "!404"] after a first request answered 200.
func TestUsedUp(t *testing.T) {
	op := &model.Operation{ID: "releaseHold"}
	op.Settings.Replay.Statuses = []model.StatusRule{{Class: 2}, {Class: 4}, {Code: 404, Exclude: true}}
	o := &opRun{op: op, exp: expectationsFor(op, ""), firstStatus: http.StatusOK}
	ans := func(status int, header ...string) *Exchange {
		h := http.Header{}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return &Exchange{Status: status, respHeaderRaw: h}
	}
	notFound := ans(404)
	for _, c := range []struct {
		name string
		es   []*Exchange
		want *Exchange
	}{
		{"an unstored 404: used up", []*Exchange{notFound}, notFound},
		{"a 404 among the in-flight 409s: used up", []*Exchange{ans(409, "Retry-After", "1"), notFound, ans(409, "Retry-After", "1")}, notFound},
		{"a 2xx among them: judged", []*Exchange{notFound, ans(201)}, nil},
		{"a stored 410: judged", []*Exchange{ans(410)}, nil},
		{"first-request's own status: judged", []*Exchange{ans(200)}, nil},
		{"a replayed 404: judged", []*Exchange{ans(404, "Idempotent-Replayed", "true")}, nil},
		{"a 5xx: judged", []*Exchange{ans(500), ans(503)}, nil},
		{"no answer: judged", []*Exchange{{Err: "reset"}, nil}, nil},
		{"a key in flight (409 with Retry-After): judged", []*Exchange{ans(409, "Retry-After", "1")}, nil},
		{"a mismatch (422): judged", []*Exchange{ans(422)}, nil},
	} {
		if got := o.usedUp(c.es...); got != c.want {
			t.Errorf("%s: usedUp = %v, want %v", c.name, got, c.want)
		}
	}
	// Under the default rules a 409 is never stored: one without Retry-After (a closed
	// session's conflict) is used up, the in-flight refusal is not.
	def := &model.Operation{ID: "complete"}
	o = &opRun{op: def, exp: expectationsFor(def, ""), firstStatus: http.StatusOK}
	conflict := ans(409)
	if got := o.usedUp(conflict); got != conflict {
		t.Errorf("a 409 without Retry-After under the default rules: usedUp = %v, want it", got)
	}
	if got := o.usedUp(ans(409, "Retry-After", "1")); got != nil {
		t.Errorf("an in-flight 409 under the default rules: usedUp = %v, want nil", got)
	}
}
