package runtime

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemgen/idemgen/runtime/defaults"
)

// Problem names: the stable name of every error the runtime answers, the last path segment of
// its RFC 9457 type URI under ProblemJSON. Clients match on them (the retrying client in
// runtime/client retries only in-flight among the 4xx). Names and statuses are one table,
// runtime/defaults.Problems, which the runtime answers with and the generator's errors mapping
// and `idemgen spec` read.
const (
	ProblemKeyMissing           = defaults.ProblemKeyMissing           // 400: the required key is absent
	ProblemKeyInvalid           = defaults.ProblemKeyInvalid           // 400: length, characters, pattern or two header lines
	ProblemBodyInvalid          = defaults.ProblemBodyInvalid          // 400: the operation's decoder refused the request
	ProblemUnauthenticated      = defaults.ProblemUnauthenticated      // 401 (Config.ScopeStatus): no scope for the request
	ProblemInFlight             = defaults.ProblemInFlight             // 409 + Retry-After: the same key is still executing
	ProblemResultExpired        = defaults.ProblemResultExpired        // 410: the same request completed under the key, its answer's retention ended; nothing runs again
	ProblemKeyExpired           = defaults.ProblemKeyExpired           // 412: the first attempt is older than the retention (OASIS Repeatable Requests)
	ProblemBodyTooLarge         = defaults.ProblemBodyTooLarge         // 413: the body is above Operation.BodyLimit
	ProblemMediaTypeUnsupported = defaults.ProblemMediaTypeUnsupported // 415: a Content-Type or Content-Encoding not declared
	ProblemPayloadMismatch      = defaults.ProblemPayloadMismatch      // 422: the key was used with another request
	ProblemRateLimited          = defaults.ProblemRateLimited          // 429 + Retry-After: the tenant created too many records (store's per-scope limit)
	ProblemInternal             = defaults.ProblemInternal             // 500: the handler failed; the key is free again
	ProblemStoreUnavailable     = defaults.ProblemStoreUnavailable     // 503 + Retry-After: the store failed (fail closed)
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
	// Allowed, for body-invalid of a parameter outside its schema's string enum, are the values
	// the enum allows (the Agentic Commerce Protocol's supported_versions); nil otherwise.
	Allowed []string
}

// Message is the problem's detail, or its title when it has none: the sentence for an error
// document's message member, never empty for a problem the runtime made.
func (p Problem) Message() string {
	if p.Detail != "" {
		return p.Detail
	}
	return p.Title
}

// Param is Pointer in the bracket form of form fields (Stripe's `param`): /metadata/order_id is
// metadata[order_id], /items/0/price is items[0][price]; a parameter's pointer (/query/limit,
// /header/X-Store-Id) is its name; "" without a pointer.
func (p Problem) Param() string { return bracketParam(p.Pointer) }

// Location is Pointer as a list of names, where the offending value is, in the form of
// FastAPI's and pydantic's `loc` (which Svix's validation errors use): a body member is
// ["body", "metadata", "order_id"], a parameter ["query", "limit"]; empty (not nil) without a
// pointer, so that it is written as [].
func (p Problem) Location() []string {
	if p.Pointer == "" {
		return []string{}
	}
	parts := strings.Split(strings.TrimPrefix(p.Pointer, "/"), "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	switch parts[0] {
	case "path", "query", "header", "cookie":
		if len(parts) == 2 {
			return parts
		}
	}
	return append([]string{"body"}, parts...)
}

// RetryAfterSeconds is RetryAfter as the Retry-After header sends it: whole seconds, rounded up,
// at least 1; 0 when the problem has none.
func (p Problem) RetryAfterSeconds() int {
	if p.RetryAfter <= 0 {
		return 0
	}
	return retryAfterSeconds(p.RetryAfter)
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
		WriteProblem(w, p, "application/problem+json", appendProblemJSON(nil, base, p))
	}
}

// appendProblemJSON appends ProblemJSON's document for p, the bytes encoding/json.Marshal writes
// for it (HTML-safe escaping included), written by hand: one buffer, no reflection, for every
// 409, 422 and 4xx the runtime answers.
func appendProblemJSON(b []byte, base string, p Problem) []byte {
	if b == nil {
		b = make([]byte, 0, 64+len(base)+len(p.Name)+len(p.Title)+len(p.Detail)+len(p.Pointer))
	}
	b = append(b, `{"type":"`...)
	b = appendJSONText(b, base)
	b = appendJSONText(b, p.Name)
	b = append(b, `","title":"`...)
	b = appendJSONText(b, p.Title)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	if p.Detail != "" {
		b = append(b, `,"detail":"`...)
		b = append(appendJSONText(b, p.Detail), '"')
	}
	if p.Pointer != "" {
		b = append(b, `,"pointer":"`...)
		b = append(appendJSONText(b, p.Pointer), '"')
	}
	return append(b, '}')
}

// appendJSONText appends s as the inside of a JSON string the way encoding/json escapes it:
// quote, backslash and control characters escaped (\b, \f, \n, \r, \t by name), <, > and &
// as \u003c, \u003e and \u0026, U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONText(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0 // s[start:i] is safe as it is, appended in one go
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default: // other controls, <, > and &
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}

// WriteProblem sends body as the answer to p, with the headers every error format shares:
// Content-Type contentType, `Cache-Control: no-store` (an error is about this request; no cache
// may answer another with it), and, when p.RetryAfter is positive, Retry-After in whole seconds,
// rounded up and at least 1 (RFC 9110 section 10.2.3). The status is p.Status. A ProblemWriter
// written by hand builds its body and calls it:
//
//	func(w http.ResponseWriter, r *http.Request, p runtime.Problem) {
//		body, _ := json.Marshal(myError{Code: p.Name, Message: p.Detail})
//		runtime.WriteProblem(w, p, "application/json", body)
//	}
func WriteProblem(w http.ResponseWriter, p Problem, contentType string, body []byte) {
	h := w.Header()
	// The headers' values share one array (Header.Set would allocate one for each).
	vals := [3]string{contentType, "no-store"}
	all := vals[:2]
	if p.RetryAfter > 0 {
		all = append(all, strconv.Itoa(retryAfterSeconds(p.RetryAfter)))
	}
	all = append([]string(nil), all...)
	h["Content-Type"], h["Cache-Control"] = all[0:1:1], all[1:2:2]
	if len(all) == 3 {
		h["Retry-After"] = all[2:3:3]
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// newProblem fills in the title of name (defaults.Problems).
func newProblem(status int, name, detail string) Problem {
	e, _ := defaults.ProblemNamed(name)
	return Problem{Status: status, Name: name, Title: e.Title, Detail: detail}
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(int(math.Ceil(d.Seconds())), 1)
}

// StripeErrors is a ProblemWriter for APIs that answer in Stripe's error envelope, so that
// Stripe's SDKs read the runtime's errors as typed errors (stripe-go's *stripe.Error, with
// IdempotencyError for a reused key): `{"error":{"type":…,"code":…,"message":…,"param":…}}`
// with Content-Type application/json, as the contract table's stripe row says
// (runtime/defaults.Profiles: docs.stripe.com/api/idempotent_requests and /error-codes):
//   - a key reused with other parameters is 400 with type idempotency_error (not 422);
//   - a key still in progress is 409 with code idempotency_key_in_use and
//     Stripe-Should-Retry: true (stripe-node and stripe-python retry it; stripe-go does not,
//     which is why the Stripe profile waits for the first request: concurrency.wait);
//   - a body the decoder refused is 400 invalid_request_error naming the parameter in
//     Stripe's bracket form (metadata[order_id]);
//   - the runtime's own failures are api_error.
//
// Retry-After and Cache-Control are sent as with ProblemJSON.
func StripeErrors(w http.ResponseWriter, r *http.Request, p Problem) {
	stripeErrors(w, r, p)
}

// bracketParam turns a JSON pointer into the bracket spelling of form fields: /metadata/order_id
// is metadata[order_id], /items/0/price is items[0][price]; a parameter pointer (/query/limit,
// /header/X) is its name.
func bracketParam(pointer string) string {
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	if pointer == "" || len(parts) == 0 {
		return ""
	}
	switch parts[0] {
	case "path", "query", "header":
		if len(parts) == 2 {
			return parts[1]
		}
	}
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	out := parts[0]
	for _, s := range parts[1:] {
		out += "[" + s + "]"
	}
	return out
}
