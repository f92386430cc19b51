package history

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model on hand-written histories: each violation of the contract is caught, and the legal
// interleavings the runtime produces are accepted.

// op builds an attempt: logical client l, body b, [call, ret] in milliseconds, kind k, and for a
// success or replay the response r (the execution's attempt).
func op(id string, l int, mode, b string, call, ret int, k Kind, r string) Attempt {
	a := Attempt{ID: id, Logical: l, Mode: mode, Key: "t/k", Body: b, Replica: "A",
		Call: time.Duration(call) * time.Millisecond, Return: time.Duration(ret) * time.Millisecond, Kind: k}
	if r != "" {
		a.Resp, a.ExecAttempt, a.ExecID = "201 "+r, r, 1
	}
	return a
}

func TestModel(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
		opts ModelOptions
		h    []Attempt
	}{
		{"new then replay", true, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindOK, "a1"),
			op("a2", 1, "atomic", "x", 20, 30, KindReplay, "a1"),
		}},
		{"two executions", false, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindOK, "a1"),
			op("a2", 1, "atomic", "x", 20, 30, KindOK, "a2"),
		}},
		{"replay of another response", false, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindOK, "a1"),
			op("a2", 1, "atomic", "x", 20, 30, KindReplay, "a9"),
		}},
		{"replay before any execution", false, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindReplay, "a9"),
			op("a2", 1, "atomic", "x", 20, 30, KindOK, "a2"),
		}},
		{"422 for the same request", false, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindOK, "a1"),
			op("a2", 1, "atomic", "x", 20, 30, KindMismatch, ""),
		}},
		{"422 for another request", true, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindOK, "a1"),
			op("a2", 1, "atomic", "y", 20, 30, KindMismatch, ""),
		}},
		{"422 with nobody holding the key", false, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "y", 0, 10, KindMismatch, ""),
			op("a2", 1, "atomic", "x", 20, 30, KindOK, "a2"),
		}},
		{"422 during the execution it overlaps", true, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 50, KindOK, "a1"),
			op("a2", 1, "atomic", "y", 10, 20, KindMismatch, ""),
		}},
		{"409 and 503 change nothing", true, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindConflict, ""),
			op("a2", 1, "atomic", "y", 20, 30, KindUnavailable, ""),
			op("a3", 2, "atomic", "y", 40, 50, KindOK, "a3"),
			op("a4", 0, "atomic", "x", 60, 70, KindMismatch, ""),
		}},
		{"a 503 that is not processed cannot have executed", false, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindUnavailable, ""),
			op("a2", 0, "atomic", "x", 20, 30, KindReplay, "a1"),
		}},
		{"an unknown outcome resolves as a replay", true, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindUnknown, ""),
			op("a2", 0, "atomic", "x", 20, 30, KindReplay, "a1"),
			op("a3", 1, "atomic", "x", 40, 50, KindReplay, "a1"),
		}},
		{"an unknown outcome resolves as a new run", true, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindUnknown, ""),
			op("a2", 0, "atomic", "x", 20, 30, KindOK, "a2"),
		}},
		{"an unknown outcome cannot execute twice", false, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindUnknown, ""),
			op("a2", 0, "atomic", "x", 20, 30, KindReplay, "a1"),
			op("a3", 1, "atomic", "x", 40, 50, KindOK, "a3"),
		}},
		{"lease: a zombie's claim explains a 422 before the takeover", true, ModelOptions{}, []Attempt{
			op("a1", 0, "lease", "x", 0, 400, KindConflict, ""),
			op("b1", 1, "lease", "y", 150, 160, KindMismatch, ""),
			op("a2", 0, "lease", "x", 200, 300, KindOK, "a2"),
			op("b2", 1, "lease", "y", 350, 360, KindMismatch, ""),
		}},
		{"lease: the key changes hands while a claim runs", false, ModelOptions{}, []Attempt{
			op("a1", 0, "lease", "x", 0, 400, KindConflict, ""),
			op("b1", 1, "lease", "y", 150, 160, KindMismatch, ""),
			op("b2", 1, "lease", "y", 250, 260, KindOK, "b2"),
		}},
		{"lease: a handler runs for another body while a claim runs", false, ModelOptions{}, []Attempt{
			op("a1", 0, "lease", "x", 0, 400, KindConflict, ""),
			op("b1", 1, "lease", "y", 150, 160, KindMismatch, ""),
			op("b2", 1, "lease", "y", 250, 260, KindFailed, ""),
		}},
		{"atomic claims are invisible: no 422 before an execution", false, ModelOptions{}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 400, KindConflict, ""),
			op("b1", 1, "atomic", "y", 150, 160, KindMismatch, ""),
			op("b2", 1, "atomic", "y", 250, 260, KindOK, "b2"),
		}},
		{"a completed record expires after its retention", true, ModelOptions{Retention: 100 * time.Millisecond}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindOK, "a1"),
			op("b1", 1, "atomic", "y", 150, 160, KindOK, "b1"),
		}},
		{"but not before", false, ModelOptions{Retention: 200 * time.Millisecond}, []Attempt{
			op("a1", 0, "atomic", "x", 0, 10, KindOK, "a1"),
			op("b1", 1, "atomic", "y", 150, 160, KindOK, "b1"),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, info := Check(c.h, c.opts, 10*time.Second)
			if got := v.Result == porcupine.Ok; got != c.ok {
				t.Fatalf("%s, want linearizable = %t", v, c.ok)
			}
			if !c.ok {
				var b strings.Builder
				if err := Visualize(&b, c.opts, info); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(b.String(), "<html") {
					t.Fatalf("the visualization is no HTML page: %.200s", b.String())
				}
			}
		})
	}
}
