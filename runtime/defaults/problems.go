package defaults

// The runtime's problem names: the stable name of every error it answers, the last path segment
// of its RFC 9457 type URI. The runtime answers with them (its Problem... constants are these),
// the loader's `errors` mapping accepts exactly them, `idemgen spec` and the client contract
// document them, and `idemgen conform` judges answers by them.
const (
	ProblemKeyMissing           = "key-missing"
	ProblemKeyInvalid           = "key-invalid"
	ProblemBodyInvalid          = "body-invalid"
	ProblemUnauthenticated      = "unauthenticated"
	ProblemInFlight             = "in-flight"
	ProblemKeyExpired           = "key-expired"
	ProblemResultExpired        = "result-expired"
	ProblemBodyTooLarge         = "body-too-large"
	ProblemMediaTypeUnsupported = "media-type-unsupported"
	ProblemPayloadMismatch      = "payload-mismatch"
	ProblemRateLimited          = "rate-limited"
	ProblemInternal             = "internal"
	ProblemStoreUnavailable     = "store-unavailable"
)

// Problem is one problem type with the HTTP status the runtime answers it with by default
// (unauthenticated's is runtime.Config.ScopeStatus, 401 unless set) and whether that answer
// carries Retry-After (RFC 9110 section 10.2.3), which tells a client to retry with the same key.
type Problem struct {
	Name       string
	Status     int
	RetryAfter bool
	// Title is the problem's short English summary (RFC 9457 section 3.1.3).
	Title string
}

// Problems returns every problem type, in the order of their statuses. The statuses are
// the decision table of docs/design.md section 1: 400 for a missing or malformed key or a request that breaks its
// schema, 409 in flight, 410 for a retry that meets its key's tombstone after the retention
// (the operation ran, its answer is gone: result-expired), 412 for a first attempt older than
// the retention (OASIS Repeatable Requests), 413, 415, 422 payload mismatch, 429 (RFC 6585), 500 when the handler failed and
// 503 when the store cannot be reached (fail closed). Each call returns a new slice.
func Problems() []Problem {
	t := problems // a copy: the table stays as written
	return t[:]
}

// problems is the table Problems returns; it is never written.
var problems = [...]Problem{
	{Name: ProblemKeyMissing, Status: 400, Title: "Idempotency key missing"},
	{Name: ProblemKeyInvalid, Status: 400, Title: "Idempotency key invalid"},
	{Name: ProblemBodyInvalid, Status: 400, Title: "Request body invalid"},
	{Name: ProblemUnauthenticated, Status: 401, Title: "Unauthenticated"},
	{Name: ProblemInFlight, Status: 409, RetryAfter: true, Title: "Request with this idempotency key is in flight"},
	// 410 Gone (RFC 9110 section 15.5.11): the answer is gone for good, and the request must not
	// be repeated with this key. Not 422: the request is the same, and a client told "mismatch"
	// would look for a changed body. ietf-wg-httpapi/idempotency #49 names 410 for a key reused
	// after its expiry; no retrying client (runtime/client, Stripe's SDKs) retries it.
	{Name: ProblemResultExpired, Status: 410, Title: "Result of this idempotency key expired"},
	{Name: ProblemKeyExpired, Status: 412, Title: "Idempotency key older than the retention"},
	{Name: ProblemBodyTooLarge, Status: 413, Title: "Request body too large"},
	{Name: ProblemMediaTypeUnsupported, Status: 415, Title: "Unsupported media type"},
	{Name: ProblemPayloadMismatch, Status: 422, Title: "Idempotency key reused with a different request"},
	{Name: ProblemRateLimited, Status: 429, RetryAfter: true, Title: "Too many new idempotency keys"},
	{Name: ProblemInternal, Status: 500, Title: "Internal server error"},
	{Name: ProblemStoreUnavailable, Status: 503, RetryAfter: true, Title: "Idempotency store unavailable"},
}

// ProblemStatus returns the status problem name is answered with by default, or 0 for a name
// that is not one of Problems.
func ProblemStatus(name string) int {
	for _, p := range problems {
		if p.Name == name {
			return p.Status
		}
	}
	return 0
}

// ProblemNamed returns the entry of problem name, and whether there is one.
func ProblemNamed(name string) (Problem, bool) {
	for _, p := range problems {
		if p.Name == name {
			return p, true
		}
	}
	return Problem{}, false
}
