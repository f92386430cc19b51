// Package cases reads request-sequence cases (the NNN-name.yaml format described in
// testdata/cases/README.md) and runs them over real HTTP against a service, reporting each case
// by name with the step and the expectation that failed and what came back instead.
//
// The package knows nothing about idemgen's runtime: it speaks HTTP to a base URL, and expects
// the service to answer `GET /_effects` with the effect counters of the tenant that the request's
// `Authorization: Bearer <tenant>` names.
package cases

import (
	"net/http"
	"time"
)

// Case is one request sequence, read from one file.
type Case struct {
	// Name is the file name without its extension ("001-first-request-executes").
	Name string
	// File is the path the case was read from.
	File string
	// About says what must hold and why a client cares.
	About string
	Steps []Step
	// Effects are the counters expected from GET /_effects for tenant t1 after the last step;
	// nil when the case states none. Only the listed counters are checked.
	Effects map[string]int64
	// EffectsByTenant are the counters expected for other tenants, keyed by the tenant as
	// written in the file ("t2").
	EffectsByTenant map[string]map[string]int64
}

// Step is one request (or, with Parallel > 1, several identical copies sent at once) and what
// its response must show.
type Step struct {
	// Line is the step's line in the file, for messages.
	Line    int
	Request Request
	// Parallel is how many identical copies are sent at once; 1 for an ordinary step.
	Parallel int
	// Wait is the pause before the step is sent.
	Wait   time.Duration
	Expect Expect
}

// Request is an HTTP request as a case file writes it. Path, header values and Body may hold
// `${N.field}` references to an earlier step's JSON response body.
type Request struct {
	Method string
	Path   string
	// Header lines in file order; a list value in the file is one line per item.
	Header []HeaderLine
	// Body is the exact bytes sent; nil sends no body.
	Body []byte
}

// HeaderLine is one request header line.
type HeaderLine struct {
	Name, Value string
}

// Expect is what one response must show. Zero fields state nothing.
type Expect struct {
	// Status is the required status code; 0 when not stated.
	Status int
	// Statuses counts the responses of a parallel step.
	Statuses []StatusCount
	// Each states what every response of a class must also show.
	Each    []EachExpect
	Headers []HeaderExpect
	// Body, when HasBody, is a JSON subset the response body must contain (decoded from the
	// file: map[string]any, []any, string, bool, nil, or Number).
	Body    any
	HasBody bool
	// SameAs, when HasSameAs, names an earlier step whose status and body bytes this response
	// must repeat exactly.
	SameAs    int
	HasSameAs bool
	// Problem, when not empty, requires an application/problem+json body whose `type` ends
	// with this name.
	Problem string
}

// Number is a number written in a case file's expected body, kept as its literal text so that
// integers above 2^53 compare exactly.
type Number string

// MarshalJSON writes the number as written, for messages.
func (n Number) MarshalJSON() ([]byte, error) { return []byte(n), nil }

// Class selects responses by outcome: any of the listed status codes (responses that are not
// replays), or, when Replayed, any response carrying `Idempotent-Replayed: true` whatever its
// status.
type Class struct {
	Codes    []int
	Replayed bool
	// Label is the class as written ("409|replayed").
	Label string
}

// StatusCount is one entry of a parallel step's `statuses`: exactly Count responses of Class,
// or, when Rest, every response that no other entry counts.
type StatusCount struct {
	Class Class
	Count int
	Rest  bool
}

// EachExpect states what every response of Class must show.
type EachExpect struct {
	Class  Class
	Expect Expect
}

// HeaderExpect is one expected response header. Names match case-insensitively.
type HeaderExpect struct {
	Name string
	// Present or Absent test existence only; otherwise Value must match exactly (for
	// Content-Type, the media type without parameters).
	Present, Absent bool
	Value           string
}

// Response is one HTTP response as the runner saw it.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Replayed reports whether the response says it is a replay (`Idempotent-Replayed: true`).
func (r *Response) Replayed() bool {
	return r.Header.Get("Idempotent-Replayed") == "true"
}

// matches reports whether resp belongs to the class.
func (c Class) matches(resp *Response) bool {
	if resp.Replayed() {
		return c.Replayed
	}
	for _, code := range c.Codes {
		if code == resp.Status {
			return true
		}
	}
	return false
}

// overlaps reports whether some response could belong to both classes.
func (c Class) overlaps(o Class) bool {
	if c.Replayed && o.Replayed {
		return true
	}
	for _, a := range c.Codes {
		for _, b := range o.Codes {
			if a == b {
				return true
			}
		}
	}
	return false
}
