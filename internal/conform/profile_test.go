package conform

import (
	"slices"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/defaults"
)

// TestExpectationsAreTheRuntimesTable: without a profile, an answer is judged by runtime/defaults'
// problem table: the problem's name, its status, and Retry-After where the table says so.
func TestExpectationsAreTheRuntimesTable(t *testing.T) {
	e := expectationsFor("")
	for name, a := range map[string]answer{
		defaults.ProblemPayloadMismatch: e.mismatch,
		defaults.ProblemInFlight:        e.inFlight,
		defaults.ProblemKeyMissing:      e.keyMissing,
		defaults.ProblemKeyInvalid:      e.keyInvalid,
	} {
		var want defaults.Problem
		for _, p := range defaults.Problems() {
			if p.Name == name {
				want = p
			}
		}
		if a.status != want.Status || a.retryAfter != want.RetryAfter || !slices.Contains(strings.Split(a.problem, "|"), name) {
			t.Errorf("%s: judged as %+v; the table says %+v", name, a, want)
		}
	}
}
