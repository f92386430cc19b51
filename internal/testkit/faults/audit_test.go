package faults

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The audit, on hand-written histories: each violation of the contract is caught,
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

// TestCheckWritesVisualization: a history that is not linearizable gets porcupine's drawing in
// a file the scenario's log names.
func TestCheckWritesVisualization(t *testing.T) {
	h := []Attempt{op("a1", 0, "atomic", "x", 0, 10, KindOK, "a1"), op("a2", 1, "atomic", "x", 20, 30, KindOK, "a2")}
	v, err := Check("two executions", h, ModelOptions{}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if v.Result != porcupine.Illegal {
		t.Fatalf("%s, want Illegal", v)
	}
	if _, err := os.Stat(v.Visualization); err != nil {
		t.Fatalf("no visualization: %v", err)
	}
	os.RemoveAll(filepath.Dir(v.Visualization))
}
