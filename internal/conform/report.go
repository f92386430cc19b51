package conform

import (
	"time"
)

// Status is a check's verdict.
type Status string

const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Report is what a run found: one result per check and operation (and per case), in run order.
type Report struct {
	Spec    string    `json:"spec"`
	BaseURL string    `json:"baseURL"`
	Started time.Time `json:"started"`
	Took    Duration  `json:"took"`
	// Seed makes the generated requests again (--seed).
	Seed uint64 `json:"seed"`
	// Requests counts the requests sent, the fault proxy's copies included.
	Requests int64    `json:"requests"`
	Results  []Result `json:"results"`
	// Notes say what the run could not use (an effects oracle that failed, a budget spent).
	Notes []string `json:"notes,omitempty"`
	// Unchecked are the operations of which no check ran (every one skipped: no key could be
	// made, no valid request built, the first request refused unstored, the run's bounds spent)
	// and why; a run with any is incomplete and never exits 0 (docs/conform.md).
	Unchecked []Unchecked `json:"unchecked,omitempty"`
}

// Unchecked is an operation of which no check ran.
type Unchecked struct {
	Operation string `json:"operation"`
	Why       string `json:"why"`
}

// Result is one check of one operation.
type Result struct {
	Check Check `json:"check"`
	// Operation is the operationId ("" for a case); Method and Path its route.
	Operation string `json:"operation,omitempty"`
	Method    string `json:"method,omitempty"`
	Path      string `json:"path,omitempty"`
	// Name is a case's name (for CheckCase).
	Name   string `json:"name,omitempty"`
	Status Status `json:"status"`
	// Why says, for a failure, what did not hold; for a skip, what the check needs.
	Why string `json:"why,omitempty"`
	// Notes are what a passing check could not establish or chose ("no copy met the first in
	// flight").
	Notes []string `json:"notes,omitempty"`
	// Exchanges are the smallest set of requests that shows a failure.
	Exchanges []*Exchange `json:"exchanges,omitempty"`
	// History is a faulted check's key histories and their verdict.
	History *HistoryResult `json:"history,omitempty"`
	Took    Duration       `json:"took"`
}

// Counts returns how many results passed, failed and were skipped.
func (r *Report) Counts() (pass, fail, skip int) {
	for _, res := range r.Results {
		switch res.Status {
		case Pass:
			pass++
		case Fail:
			fail++
		default:
			skip++
		}
	}
	return
}

// Failed reports whether some check failed.
func (r *Report) Failed() bool {
	_, fail, _ := r.Counts()
	return fail > 0
}

// title is how a report names a result: "createPayment replay", "case 003-key-order".
func (r *Result) title() string {
	switch {
	case r.Check == CheckCase:
		return "case " + r.Name
	case r.Operation == "":
		return string(r.Check)
	}
	return r.Operation + " " + string(r.Check)
}

// findUnchecked lists the operations in rep.Results of which no check passed or failed, each
// with the reason its first-request (or first check) skipped; and, when no result at all
// passed or failed (a run of cases that all skipped), the run itself.
func (r *Report) findUnchecked(ops []string) {
	ran := map[string]bool{}
	why := map[string]string{}
	any := false
	for _, res := range r.Results {
		if res.Status != Skip {
			ran[res.Operation], any = true, true
			continue
		}
		if _, ok := why[res.Operation]; !ok || res.Check == CheckFirstRequest {
			why[res.Operation] = res.Why
		}
	}
	for _, op := range ops {
		if !ran[op] {
			w := why[op]
			if w == "" {
				w = "no check ran"
			}
			r.Unchecked = append(r.Unchecked, Unchecked{Operation: op, Why: w})
		}
	}
	if !any && len(r.Unchecked) == 0 {
		r.Unchecked = append(r.Unchecked, Unchecked{Why: "no check passed or failed: nothing was checked"})
	}
}

// Incomplete reports whether the run left an operation (or everything) unchecked.
func (r *Report) Incomplete() bool { return len(r.Unchecked) > 0 }
