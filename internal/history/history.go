// Package history records the client-visible history of requests made under idempotency keys
// (each attempt: key, request identity, call and return times, what the answer means) and checks
// it for linearizability against a nondeterministic model of the contract with porcupine
// (Model, Check). The fault-injection suite (internal/testkit/faults) and `idemgen conform` both judge
// their runs with it; it knows nothing of how the attempts were made.
package history

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Kind is what an answer means for the contract.
type Kind uint8

const (
	// KindOK is a success (2xx) that is not a replay: the request executed.
	KindOK Kind = iota + 1
	// KindReplay is a 2xx with Idempotent-Replayed: true.
	KindReplay
	// KindConflict is 409 in-flight.
	KindConflict
	// KindMismatch is 422 payload-mismatch.
	KindMismatch
	// KindUnavailable is 503 whose detail says the request was not processed.
	KindUnavailable
	// KindUnknown is an answer that leaves the outcome open: 503 "outcome unknown", a broken
	// connection, a killed server, a client timeout.
	KindUnknown
	// KindFailed is 500: the handler failed and the key was released.
	KindFailed
	// KindOther is any other answer; the contract has no place for it in these scenarios.
	KindOther
)

func (k Kind) String() string {
	switch k {
	case KindOK:
		return "ok"
	case KindReplay:
		return "replay"
	case KindConflict:
		return "409"
	case KindMismatch:
		return "422"
	case KindUnavailable:
		return "503-not-processed"
	case KindUnknown:
		return "unknown"
	case KindFailed:
		return "500"
	case KindOther:
		return "other"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Definitive reports whether an answer ends a logical request: the client has its result
// (a success, a replay or a mismatch).
func (k Kind) Definitive() bool { return k == KindOK || k == KindReplay || k == KindMismatch }

// Attempt is one HTTP attempt as its client saw it.
type Attempt struct {
	// ID names the attempt. The fault suite's service writes it into the rows and provider
	// calls it makes, which is how its audit knows which attempt executed.
	ID string
	// Logical names the logical request (one client operation, retried under one key).
	Logical int
	// Mode is "atomic" or "lease".
	Mode string
	// Key is the record key as the store sees it: tenant and idempotency key.
	Key string
	// Body names the request's content (the fingerprint's identity), e.g. "amount=100".
	Body string
	// Replica is the replica (or the path, such as a fault proxy) the attempt was sent through.
	Replica string
	// Call and Return are offsets from the history's start. An attempt whose outcome is
	// unknown keeps its observed Return here; the model treats it as pending to the end.
	Call, Return time.Duration
	Status       int
	Kind         Kind
	// Resp identifies the response of a success or replay: status and the body's bytes.
	Resp string
	// ExecID and ExecAttempt are the execution the response names (the business row id and the
	// attempt that wrote it), decoded from the body of a success or replay when the service
	// says; zero otherwise.
	ExecID      int64
	ExecAttempt string
	// RetryAfter is the Retry-After header; Detail is a problem's detail or the transport error.
	RetryAfter string
	Detail     string
}

// History is the client-visible history of one run. It is safe for concurrent use.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []Attempt
}

// NewHistory starts a history now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the offset of the present from the history's start (monotonic).
func (h *History) Now() time.Duration { return time.Since(h.start) }

// Add records a finished attempt.
func (h *History) Add(a Attempt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, a)
}

// Attempts returns the attempts recorded so far, in call order.
func (h *History) Attempts() []Attempt {
	h.mu.Lock()
	out := append([]Attempt(nil), h.ops...)
	h.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// Count returns how many recorded attempts satisfy f.
func (h *History) Count(f func(*Attempt) bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for i := range h.ops {
		if f(&h.ops[i]) {
			n++
		}
	}
	return n
}
