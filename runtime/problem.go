package runtime

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// DefaultProblemBase prefixes the problem type URIs (RFC 9457 section 3.1.1) the runtime
// answers with; the last path segment is the stable problem name of shared/cases/README.md.
const DefaultProblemBase = "https://idemgen.dev/problems/"

// Problem names: the last segment of each problem type URI. Clients match on them (the retrying
// client in runtime/client retries only in-flight among the 4xx).
const (
	ProblemKeyMissing           = "key-missing"            // 400: the required key is absent
	ProblemKeyInvalid           = "key-invalid"            // 400: length, characters, pattern or two header lines
	ProblemInFlight             = "in-flight"              // 409 + Retry-After: the same key is still executing
	ProblemPayloadMismatch      = "payload-mismatch"       // 422: the key was used with another request
	ProblemBodyInvalid          = "body-invalid"           // 400: the generated decoder refused the body
	ProblemBodyTooLarge         = "body-too-large"         // 413: the body is above Operation.BodyLimit
	ProblemMediaTypeUnsupported = "media-type-unsupported" // 415: Content-Type not declared
	ProblemStoreUnavailable     = "store-unavailable"      // 503 + Retry-After: fail closed
	ProblemUnauthenticated      = "unauthenticated"        // 401 (Config.ScopeStatus): no scope
	ProblemInternal             = "internal"               // 500: the handler failed
)

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

// problems writes RFC 9457 problem documents under one type URI base.
type problems struct{ base string }

// problemDoc is the JSON body: the RFC 9457 members plus the `pointer` extension member for
// body-invalid.
type problemDoc struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Status  int    `json:"status"`
	Detail  string `json:"detail,omitempty"`
	Pointer string `json:"pointer,omitempty"`
}

// write sends the problem name with status; retryAfter > 0 adds Retry-After in whole seconds,
// rounded up and at least 1 (RFC 9110 section 10.2.3).
func (p problems) write(w http.ResponseWriter, status int, name, detail, pointer string, retryAfter time.Duration) {
	body, _ := json.Marshal(problemDoc{
		Type:    p.base + name,
		Title:   problemTitles[name],
		Status:  status,
		Detail:  detail,
		Pointer: pointer,
	})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(retryAfter)))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}
