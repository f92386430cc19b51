package history

import (
	"fmt"
	"hash/fnv"
	"io"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model of the contract, per key (porcupine partitions the history by key):
//
//	state   owner: the request (body) whose claim or execution holds the key, or none
//	        done:  the owner executed; resp: its response (unbound until an answer shows it)
//
//	ok(b, r)       the key is free or held by b's claim, and not done → owner b, done, resp r
//	replay(b, r)   done by b and resp is r (binds an unbound resp)
//	422(b)         the key is held by another request
//	409(b)         changes nothing (lease mode: it may have claimed, as a zombie whose lease was
//	               taken over did)
//	503 not processed   changes nothing (lease mode: the claim may remain)
//	unknown        (503 outcome unknown, broken connection, killed server) nothing, a claim, or
//	               an execution whose response is not known yet; pending to the end of the run
//	500(b)         the handler ran and failed: the key was free or b's, and not done; changes
//	               nothing, but a lease-mode claim of b may be released
//
// One attempt is one linearization point, so a lease-mode attempt that claims and then
// releases (a 500) cannot explain another body's 422 during its run; no scenario expects a 500.
//
// A running claim never expires (a running record seen as absent while its owner can still
// complete would let a second execution start); a completed record may expire once Retention
// has passed since its execution began. Only lease mode has visible claims: atomic claims are
// uncommitted until the execution commits.

// ModelOptions tunes the model to a scenario.
type ModelOptions struct {
	// Retention is the operations' retention; zero means records never expire within a run.
	Retention time.Duration
}

type keyState struct {
	Owner string
	Done  bool
	Resp  string
	// Since is a lower bound of when the execution completed: the latest call among the
	// attempts linearized before it (linearization respects real time).
	Since int64
	// Clock is the latest call among the attempts linearized so far.
	Clock int64
}

// modelInput is an attempt with the return time the checker uses for it (the end of the run for
// an attempt whose effect may still happen).
type modelInput struct {
	a   *Attempt
	ret int64
}

// Model returns the porcupine model of the contract.
func Model(opts ModelOptions) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range history {
				k := op.Input.(modelInput).a.Key
				if _, ok := byKey[k]; !ok {
					order = append(order, k)
				}
				byKey[k] = append(byKey[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(order))
			for _, k := range order {
				out = append(out, byKey[k])
			}
			return out
		},
		Init: func() []any { return []any{keyState{}} },
		Step: func(state, input, _ any) []any {
			return step(opts, state.(keyState), input.(modelInput))
		},
		Hash: func(state any) uint64 {
			s := state.(keyState)
			h := fnv.New64a()
			fmt.Fprintf(h, "%s\x00%t\x00%s\x00%d\x00%d", s.Owner, s.Done, s.Resp, s.Since, s.Clock)
			return h.Sum64()
		},
		DescribeOperation: func(input, _ any) string {
			a := input.(modelInput).a
			out := a.Kind.String()
			if a.Resp != "" {
				out += fmt.Sprintf(" exec=%d by %s", a.ExecID, a.ExecAttempt)
			}
			return fmt.Sprintf("%s %s %s@%s → %d %s", a.ID, a.Mode, a.Body, a.Replica, a.Status, out)
		},
		DescribeState: func(state any) string {
			s := state.(keyState)
			switch {
			case s.Owner == "":
				return "free"
			case !s.Done:
				return "claimed by " + s.Owner
			case s.Resp == "":
				return "done by " + s.Owner + " (response not seen yet)"
			}
			return "done by " + s.Owner + " → " + s.Resp
		},
	}
	return nm.ToModel()
}

func step(opts ModelOptions, s keyState, in modelInput) []any {
	s.Clock = max(s.Clock, int64(in.a.Call))
	states := []keyState{s}
	if s.Done && opts.Retention > 0 && in.ret-s.Since > int64(opts.Retention) {
		states = append(states, keyState{Clock: s.Clock}) // the completed record may have expired
	}
	var next []any
	for _, p := range states {
		next = append(next, stepOne(p, in)...)
	}
	return next
}

func stepOne(p keyState, in modelInput) []any {
	a := in.a
	lease := a.Mode == "lease"
	free := p.Owner == "" || p.Owner == a.Body
	claimed := keyState{Owner: a.Body, Clock: p.Clock}
	canClaim := lease && p.Owner == "" && !p.Done
	switch a.Kind {
	case KindOK:
		if !p.Done && free {
			return []any{keyState{Owner: a.Body, Done: true, Resp: a.Resp, Since: p.Clock, Clock: p.Clock}}
		}
	case KindReplay:
		if p.Done && p.Owner == a.Body && (p.Resp == "" || p.Resp == a.Resp) {
			p.Resp = a.Resp
			return []any{p}
		}
	case KindMismatch:
		if p.Owner != "" && p.Owner != a.Body {
			return []any{p}
		}
	case KindConflict:
		// Always possible: an atomic claim is invisible, so a 409 may meet a claim of another
		// body, and an attempt whose interval covers the execution may be answered either way.
		if canClaim {
			return []any{p, claimed}
		}
		return []any{p}
	case KindUnavailable:
		if canClaim {
			return []any{p, claimed}
		}
		return []any{p}
	case KindUnknown:
		out := []any{p}
		if canClaim {
			out = append(out, claimed)
		}
		if !p.Done && free {
			out = append(out, keyState{Owner: a.Body, Done: true, Since: p.Clock, Clock: p.Clock})
		}
		return out
	case KindFailed:
		// The handler ran and failed: the key was free or this request's, and not done. The
		// failure released its claim (lease mode) or rolled it back (atomic mode).
		if !p.Done && free {
			if lease && p.Owner == a.Body {
				return []any{p, keyState{Clock: p.Clock}}
			}
			return []any{p}
		}
	}
	return nil
}

// Verdict is the linearizability check's result for one run.
type Verdict struct {
	Result porcupine.CheckResult
	// Partitions is how many keys were checked; Ops how many attempts.
	Partitions, Ops int
	// Visualization is the HTML file of porcupine's drawing of an illegal or undecided history,
	// when the caller wrote one.
	Visualization string
	Took          time.Duration
}

func (v Verdict) String() string {
	s := fmt.Sprintf("linearizability: %s (%d attempts on %d keys, checked in %v)", v.Result, v.Ops, v.Partitions, v.Took.Round(time.Millisecond))
	if v.Visualization != "" {
		s += "; visualization: " + v.Visualization
	}
	return s
}

// Check checks the attempts for linearizability against Model(opts) within timeout. The
// returned information feeds Visualize; it is only meaningful when the history is not
// linearizable or the check timed out (it is then porcupine's partial linearizations).
func Check(attempts []Attempt, opts ModelOptions, timeout time.Duration) (Verdict, porcupine.LinearizationInfo) {
	var end time.Duration
	for _, a := range attempts {
		end = max(end, a.Return, a.Call)
	}
	ops := make([]porcupine.Operation, 0, len(attempts))
	keys := map[string]bool{}
	for i := range attempts {
		a := &attempts[i]
		keys[a.Key] = true
		ret := int64(a.Return)
		if a.Kind == KindUnknown || (a.Kind == KindUnavailable && a.Mode == "lease") {
			// Its effect (an execution, or a claim) may land after the client gave up, e.g.
			// when a frozen server wakes up: pending until the end of the run.
			ret = int64(end) + 1
		}
		ops = append(ops, porcupine.Operation{ClientId: a.Logical, Input: modelInput{a: a, ret: ret},
			Call: int64(a.Call), Output: a.Kind, Return: ret})
	}
	began := time.Now()
	res, info := porcupine.CheckOperationsVerbose(Model(opts), ops, timeout)
	return Verdict{Result: res, Partitions: len(keys), Ops: len(ops), Took: time.Since(began)}, info
}

// Visualize writes porcupine's interactive HTML page of a checked history (Check's info) to w:
// one timeline per key, each attempt a bar from call to return, with the longest partial
// linearization the checker found for a history that is not linearizable.
func Visualize(w io.Writer, opts ModelOptions, info porcupine.LinearizationInfo) error {
	if err := porcupine.Visualize(Model(opts), info, w); err != nil {
		return fmt.Errorf("porcupine visualization: %w", err)
	}
	return nil
}
