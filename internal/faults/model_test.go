package faults

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model and the audit, on hand-written histories: each violation of the contract is caught,
// and the legal interleavings the runtime produces are accepted. No database.

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
			v, err := Check(c.name, c.h, c.opts, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Result == porcupine.Ok; got != c.ok {
				t.Fatalf("%s, want linearizable = %t", v, c.ok)
			}
			if !c.ok {
				if _, err := os.Stat(v.Visualization); err != nil {
					t.Fatalf("no visualization: %v", err)
				}
				os.RemoveAll(strings.TrimSuffix(v.Visualization, "/"+sanitize(c.name)+".html"))
			}
		})
	}
}

func TestAudit(t *testing.T) {
	ok := op("a1", 0, "atomic", "x", 0, 10, KindOK, "a1")
	replay := op("a2", 1, "atomic", "x", 20, 30, KindReplay, "a1")
	row := Row{Key: "t/k", ID: 1, Attempt: "a1", Amount: 100}
	cases := []struct {
		name string
		h    []Attempt
		eff  Effects
		opts AuditOptions
		want string // a problem containing this, or "" for none
	}{
		{"clean", []Attempt{ok, replay}, Effects{Rows: []Row{row}}, AuditOptions{Settled: true}, ""},
		{"two rows", []Attempt{ok, replay}, Effects{Rows: []Row{row, {Key: "t/k", ID: 2, Attempt: "a2"}}}, AuditOptions{}, "executed 2 times"},
		{"success without a row", []Attempt{ok}, Effects{}, AuditOptions{}, "lost execution"},
		{"row no client saw", []Attempt{op("a1", 0, "atomic", "x", 0, 10, KindUnknown, ""), op("a2", 0, "atomic", "x", 20, 30, KindMismatch, "")},
			Effects{Rows: []Row{row}}, AuditOptions{Settled: true}, "lost response"},
		{"replay of another execution", []Attempt{ok, op("a2", 1, "atomic", "x", 20, 30, KindReplay, "a7")}, Effects{Rows: []Row{row}}, AuditOptions{}, "the key's execution is 1 by a1"},
		{"503 not processed that committed", []Attempt{op("a1", 0, "atomic", "x", 0, 10, KindUnavailable, ""), replay},
			Effects{Rows: []Row{row}}, AuditOptions{Allowed: []Kind{KindUnavailable, KindReplay}}, "issue 16 item 2"},
		{"a 500 where none is allowed", []Attempt{op("a1", 0, "atomic", "x", 0, 10, KindFailed, "")}, Effects{}, AuditOptions{}, "never allows"},
		{"provider key reused", []Attempt{ok}, Effects{Rows: []Row{row}, Calls: []Call{{Key: "t/k", Attempt: "a1", Outcome: "charged"}, {Key: "t/k", Attempt: "b1", Outcome: "refused"}}},
			AuditOptions{}, "reused with other parameters"},
		{"unsettled logical request", []Attempt{op("a1", 0, "atomic", "x", 0, 10, KindConflict, "")}, Effects{}, AuditOptions{Settled: true}, "never got a definitive answer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			problems := Audit(c.h, c.eff, c.opts)
			if c.want == "" {
				if len(problems) > 0 {
					t.Fatalf("problems: %q", problems)
				}
				return
			}
			for _, p := range problems {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Fatalf("problems %q, want one containing %q", problems, c.want)
		})
	}
}
