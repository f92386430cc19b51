package runtime

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Problem names: the stable name of every error the runtime answers, the last path segment of
// its RFC 9457 type URI under ProblemJSON. Clients match on them (the retrying client in
// runtime/client retries only in-flight among the 4xx).
const (
	ProblemKeyMissing           = "key-missing"            // 400: the required key is absent
	ProblemKeyInvalid           = "key-invalid"            // 400: length, characters, pattern or two header lines
	ProblemBodyInvalid          = "body-invalid"           // 400: the operation's decoder refused the request
	ProblemUnauthenticated      = "unauthenticated"        // 401 (Config.ScopeStatus): no scope for the request
	ProblemInFlight             = "in-flight"              // 409 + Retry-After: the same key is still executing
	ProblemBodyTooLarge         = "body-too-large"         // 413: the body is above Operation.BodyLimit
	ProblemMediaTypeUnsupported = "media-type-unsupported" // 415: a Content-Type or Content-Encoding not declared
	ProblemPayloadMismatch      = "payload-mismatch"       // 422: the key was used with another request
	ProblemInternal             = "internal"               // 500: the handler failed; the key is free again
	ProblemStoreUnavailable     = "store-unavailable"      // 503 + Retry-After: the store failed (fail closed)
)

// Problem is one error answer of the runtime, before it is written in a format.
type Problem struct {
	// Status is the HTTP status code.
	Status int
	// Name is the stable problem name (the Problem... constants).
	Name string
	// Title is a short English summary of the problem name; Detail explains this occurrence.
	Title  string
	Detail string
	// Pointer, for body-invalid, is the JSON pointer (RFC 6901) of the offending value
	// (/amount, /query/limit, /header/X-Store-Id).
	Pointer string
	// RetryAfter, when positive, is sent as Retry-After in whole seconds, rounded up.
	RetryAfter time.Duration
}

// ProblemWriter writes a Problem as the HTTP response: status, headers and body. It is the one
// place where the runtime's error format is chosen (Config.ProblemWriter); r is the request
// being answered.
type ProblemWriter func(w http.ResponseWriter, r *http.Request, p Problem)

// DefaultProblemBase is the type URI prefix of ProblemJSON's default.
const DefaultProblemBase = "https://idemgen.dev/problems/"

// ProblemJSON returns the default ProblemWriter: an RFC 9457 application/problem+json document
// whose `type` is base + the problem name, with `title`, `status`, `detail` and, for
// body-invalid, the extension member `pointer`; `Cache-Control: no-store`; and Retry-After
// (RFC 9110 section 10.2.3) when the problem has one. An empty base is DefaultProblemBase.
func ProblemJSON(base string) ProblemWriter {
	if base == "" {
		base = DefaultProblemBase
	}
	return func(w http.ResponseWriter, _ *http.Request, p Problem) {
		body, _ := json.Marshal(struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Status  int    `json:"status"`
			Detail  string `json:"detail,omitempty"`
			Pointer string `json:"pointer,omitempty"`
		}{base + p.Name, p.Title, p.Status, p.Detail, p.Pointer})
		writeProblemBody(w, p, "application/problem+json", body)
	}
}

// writeProblemBody sends body as the answer to p with the headers every format shares.
func writeProblemBody(w http.ResponseWriter, p Problem, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(p.RetryAfter)))
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

var problemTitles = map[string]string{
	ProblemKeyMissing:           "Idempotency key missing",
	ProblemKeyInvalid:           "Idempotency key invalid",
	ProblemInFlight:             "Request with this idempotency key is in flight",
	ProblemPayloadMismatch:      "Idempotency key reused with a different request",
	ProblemBodyInvalid:          "Request body invalid",
	ProblemBodyTooLarge:         "Request body too large",
	ProblemMediaTypeUnsupported: "Unsupported media type",
	ProblemStoreUnavailable:     "Idempotency store unavailable",
	ProblemUnauthenticated:      "Unauthenticated",
	ProblemInternal:             "Internal server error",
}

// newProblem fills in the title of name.
func newProblem(status int, name, detail string) Problem {
	return Problem{Status: status, Name: name, Title: problemTitles[name], Detail: detail}
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(int(math.Ceil(d.Seconds())), 1)
}
