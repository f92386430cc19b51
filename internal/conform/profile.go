package conform

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// expectations are the answers an operation's contract gives, by profile: the same contract
// spoken in another API's words is data here, not a branch in the checks.
type expectations struct {
	mismatch, inFlight, keyMissing, keyInvalid answer
	// replayExempt are stored headers a replay carries anew by design; replayLinks pair a
	// replay's header with the first answer's header whose value it must repeat.
	replayExempt []string
	replayLinks  [][2]string
}

// answer is an expected refusal: its status, and what its body must name.
type answer struct {
	status int
	// problem is the RFC 9457 problem name the type URI ends with, checked when the answer is
	// application/problem+json (a service with another error format is judged by its status);
	// "a|b" accepts either.
	problem string
	// stripeType is the error.type a Stripe-envelope answer must carry ("" for any).
	stripeType string
	// retryAfter requires a Retry-After header.
	retryAfter bool
}

func expectationsFor(p model.Profile) expectations {
	if p == model.ProfileStripe {
		return expectations{
			// Stripe answers a key reused with other parameters with 400 idempotency_error.
			mismatch:     answer{status: http.StatusBadRequest, stripeType: "idempotency_error"},
			inFlight:     answer{status: http.StatusConflict, retryAfter: true},
			keyMissing:   answer{status: http.StatusBadRequest, stripeType: "invalid_request_error"},
			keyInvalid:   answer{status: http.StatusBadRequest, stripeType: "invalid_request_error"},
			replayExempt: []string{"Request-Id", "Original-Request"},
			replayLinks:  [][2]string{{"Original-Request", "Request-Id"}},
		}
	}
	return expectations{
		mismatch:   defaultAnswer(defaults.ProblemPayloadMismatch),
		inFlight:   defaultAnswer(defaults.ProblemInFlight),
		keyMissing: defaultAnswer(defaults.ProblemKeyMissing),
		// A body-carried key of the wrong type is refused by the body's decoder first.
		keyInvalid: defaultAnswer(defaults.ProblemKeyInvalid, defaults.ProblemBodyInvalid),
	}
}

// defaultAnswer is the answer runtime/defaults' table gives the problem name: its status, with
// Retry-After where the table says so; an answer naming any of also (of the same status) is
// accepted too.
func defaultAnswer(name string, also ...string) answer {
	a := answer{problem: strings.Join(append([]string{name}, also...), "|")}
	for _, p := range defaults.Problems() {
		if p.Name == name {
			a.status, a.retryAfter = p.Status, p.RetryAfter
		}
	}
	return a
}

// judge returns "" when e is the answer, else what is wrong with it.
func (a answer) judge(e *Exchange) string {
	if !e.ok() {
		return fmt.Sprintf("want %d, got no answer: %s", a.status, e.Err)
	}
	if e.Status != a.status {
		return fmt.Sprintf("want %d%s, got %d", a.status, a.named(), e.Status)
	}
	if a.retryAfter && e.header("Retry-After") == "" {
		return fmt.Sprintf("the %d has no Retry-After: a client cannot know when to retry", e.Status)
	}
	if a.stripeType != "" {
		var doc struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(e.respBodyRaw, &doc); err != nil || doc.Error.Type != a.stripeType {
			return fmt.Sprintf("want Stripe's error envelope with error.type %q, got %s", a.stripeType, oneLine(e.RespBody))
		}
	}
	if a.problem != "" && mediaType(e.header("Content-Type")) == "application/problem+json" {
		var doc struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(e.respBodyRaw, &doc) == nil && doc.Type != "" && !endsWithAny(doc.Type, strings.Split(a.problem, "|")) {
			return fmt.Sprintf("want the problem %s, got type %q", strings.ReplaceAll(a.problem, "|", " or "), doc.Type)
		}
	}
	return ""
}

func endsWithAny(s string, suffixes []string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

func (a answer) named() string {
	switch {
	case a.problem != "":
		return " " + strings.ReplaceAll(a.problem, "|", " or ")
	case a.stripeType != "":
		return " " + a.stripeType
	}
	return ""
}

// mediaType is a Content-Type's media type, lower case, without parameters.
func mediaType(v string) string {
	if mt, _, err := mime.ParseMediaType(v); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "an empty body"
	}
	return s
}

// defaultReplayHeaders are the response headers every replay repeats (DESIGN section 5).
var defaultReplayHeaders = []string{"Content-Type", "Content-Encoding", "Content-Language", "Content-Disposition", "Location", "ETag", "Link"}

// stored reports whether the operation's replay.statuses make status a final (stored) answer.
func stored(s model.Settings, status int) bool {
	final := false
	for _, r := range s.Replay.Statuses {
		match := r.Code == status || (r.Class != 0 && status/100 == r.Class)
		if !match {
			continue
		}
		if r.Exclude {
			return false
		}
		final = true
	}
	return final
}
