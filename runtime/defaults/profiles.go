package defaults

import (
	"strings"
	"time"
)

// Profile is one row of the contract table: the idempotency contract of an API its clients
// already know, as data. A spec names a row with `profile: NAME`; the loader accepts exactly
// these names and gives an operation the row's settings (where the spec sets none of its own),
// the runtime builds its runtime.Profile from the row (plus an envelope writer, for a row whose
// errors are not RFC 9457 problems), `idemgen spec` declares the row's statuses and envelope
// schema, and `idemgen conform --profile NAME` judges answers by the row. No part of idemgen
// branches on a row's name: a new profile is a new row here and, when its error envelope is
// new, a writer for it in the runtime (runtime/envelopes.go).
//
// Zero fields keep idemgen's defaults: the idemgen row is all zero but its name and envelope.
type Profile struct {
	// Name is what `profile:` and `conform --profile` name the row by ("stripe").
	Name string
	// Doc says in a sentence whose contract it is and where it is written down.
	Doc string
	// Key is the row's idempotency key rule; zero fields keep the defaults (KeyMinLength,
	// KeyMaxLength, KeyVisible, KeyQuotedAccepted).
	Key KeyRule
	// ScopeHeaders are request headers folded into the scope after the tenant: the same key
	// sent with another value names another request (Stripe-Account, a connected account).
	ScopeHeaders []ScopeHeader
	// Wait is concurrency.wait: how long a duplicate waits for the first request to finish,
	// then replays, before it gets the in-flight answer.
	Wait time.Duration
	// EchoKey: every answer repeats the key header as the request sent it.
	EchoKey bool
	// RequestID gives every answer an id of its own; zero sends none.
	RequestID RequestID
	// ReplayHeaders are response headers stored and replayed for every operation of the row,
	// in addition to ReplayHeaders().
	ReplayHeaders []string
	// Answers change what the row answers a problem with; a problem not listed is answered
	// at its status in Problems(), with Envelope.DefaultType.
	Answers []Answer
	// Envelope is the shape of the row's error documents.
	Envelope Envelope
}

// KeyRule is a row's rule for the idempotency key; a zero field keeps the default.
type KeyRule struct {
	// MinLength and MaxLength bound the key's length in characters (KeyLength).
	MinLength, MaxLength int
	// Characters is key.characters (KeyVisible, the default; KeyOpaque); Quoted is
	// key.quoted (KeyQuotedAccepted, the default).
	Characters KeyCharacters
	Quoted     KeyQuoting
}

// ScopeHeader is a request header folded into the scope.
type ScopeHeader struct {
	Name string
	// Pattern, when set, is an RE2 expression the whole value must match (it is anchored at
	// both ends); a request with another non-empty value is refused before any lookup, 400
	// body-invalid naming the header, so that a value that names no account never makes a
	// scope of its own.
	Pattern string
}

// RequestID is a row's request ids: every answer carries Header with a new id, Original names
// the execution whose response it is (the answer's own id for a first execution, the stored
// one for a replay). A zero Header sends none.
type RequestID struct {
	Header, Original string
	// Prefix and Length shape a new id: Prefix and Length random letters and digits.
	Prefix string
	Length int
}

// Answer is how a row answers one problem; zero fields keep the default.
type Answer struct {
	// Problem is the problem name (Problems).
	Problem string
	// Status replaces the problem's status in Problems().
	Status int
	// Type and Code are what the envelope's type and code members carry (Envelope.TypeAt,
	// CodeAt); a zero Type is Envelope.DefaultType.
	Type, Code string
	// Message replaces the problem's message; "{detail}" in it is the occurrence's detail.
	Message string
	// Param names the parameter at fault, where the envelope has a member for it; "" names
	// the pointer of the problem (a body-invalid's member), if any.
	Param string
	// DocURL is a page about the error, where the envelope has a member for it.
	DocURL string
	// Headers are set on the answer, in order.
	Headers []Header
	// RetryAfter: the answer carries Retry-After (from Problems(); not set in a row).
	RetryAfter bool
}

// Header is one response header.
type Header struct{ Name, Value string }

// Envelope is the shape of a row's error documents.
type Envelope struct {
	// Writer names the writer of the documents in the runtime ("problem+json", "stripe").
	Writer string
	// ContentType is their media type.
	ContentType string
	// SchemaName is the component name `idemgen spec` declares Schema under.
	SchemaName string
	// Schema is the documents' schema, an OpenAPI 3.0 Schema Object as JSON text.
	Schema string
	// TypeAt and CodeAt are the JSON pointers (RFC 6901) of the members that carry an answer's
	// Type and Code; "" when the envelope has none.
	TypeAt, CodeAt string
	// TypeIsURI: the type member is a URI whose last path segment is the answer's Type (RFC
	// 9457 problem types, under a base the service chooses).
	TypeIsURI bool
	// DefaultType is the Type of a problem the row's Answers give none; "" is the problem's
	// name.
	DefaultType string
}

// Answer returns how the row answers problem name: the problem's entry in Problems(), changed
// by the row's Answers. The name of a problem not in Problems() gets status 0.
func (p Profile) Answer(name string) Answer {
	a := Answer{Problem: name, Type: p.Envelope.DefaultType}
	if e, ok := ProblemNamed(name); ok {
		a.Status, a.RetryAfter = e.Status, e.RetryAfter
	}
	if a.Type == "" {
		a.Type = name
	}
	for _, o := range p.Answers {
		if o.Problem != name {
			continue
		}
		if o.Status != 0 {
			a.Status = o.Status
		}
		if o.Type != "" {
			a.Type = o.Type
		}
		a.Code, a.Message, a.Param, a.DocURL = o.Code, o.Message, o.Param, o.DocURL
		a.Headers = append([]Header(nil), o.Headers...)
	}
	return a
}

// Label is how a client tells the answer apart in the row's words: its code, else its type.
func (a Answer) Label() string {
	if a.Code != "" {
		return a.Code
	}
	return a.Type
}

// ProfileDefault is the name of the row of idemgen's own contract, which serves an operation
// that names none.
const ProfileDefault = "idemgen"

// Profiles returns the contract table, the default row first. Each call returns new values.
func Profiles() []Profile {
	return []Profile{
		{
			Name: ProfileDefault,
			Doc:  "idemgen's contract (README.md): RFC 9457 problem details with a type per case",
			Envelope: Envelope{
				Writer: "problem+json", ContentType: "application/problem+json", SchemaName: "IdempotencyProblem",
				TypeAt: "/type", TypeIsURI: true,
				Schema: `{"type":"object","required":["type","title","status"],` +
					`"description":"RFC 9457 problem details, as the idempotency runtime writes them (runtime.ProblemJSON): type names the case (` +
					strings.Join(describedProblemNames(), ", ") + `).",` +
					`"properties":{` +
					`"type":{"type":"string","format":"uri","description":"the problem's URI: a base followed by its name"},` +
					`"title":{"type":"string","description":"the problem's title"},` +
					`"status":{"type":"integer","description":"the HTTP status code"},` +
					`"detail":{"type":"string","description":"what went wrong with this request"},` +
					`"pointer":{"type":"string","description":"for body-invalid, the JSON pointer of the member at fault"}}}`,
			},
		},
		{
			Name: "stripe",
			Doc: "Stripe's contract (docs.stripe.com/api/idempotent_requests, /errors, /error-codes; " +
				"stripe-go's retry rules), so that Stripe's SDKs work unchanged (docs/stripe.md)",
			Key: KeyRule{MinLength: 1, MaxLength: KeyMaxLength},
			// Account ids are "acct_" and letters and digits, at most 255 bytes like every
			// Stripe id (acct_1032D82eZvKYlo2C).
			ScopeHeaders: []ScopeHeader{{Name: "Stripe-Account", Pattern: `acct_[0-9A-Za-z]{1,250}`}},
			// stripe-go does not retry a 409 in Stripe's envelope, so a duplicate waits for the
			// first request and replays.
			Wait:      5 * time.Second,
			EchoKey:   true,
			RequestID: RequestID{Header: "Request-Id", Original: "Original-Request", Prefix: "req_", Length: 14},
			Answers: []Answer{
				{Problem: ProblemPayloadMismatch, Status: 400, Type: "idempotency_error",
					Message: "Keys for idempotent requests can only be used with the same parameters they were first used with. {detail}",
					Headers: []Header{{"Stripe-Should-Retry", "false"}}},
				{Problem: ProblemInFlight, Code: "idempotency_key_in_use", DocURL: "https://stripe.com/docs/error-codes/idempotency-key-in-use",
					Message: "There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through). Please try again later.",
					Headers: []Header{{"Stripe-Should-Retry", "true"}}},
				{Problem: ProblemKeyMissing, Param: "Idempotency-Key"},
				{Problem: ProblemKeyInvalid, Param: "Idempotency-Key"},
				{Problem: ProblemRateLimited, Code: "rate_limit", Headers: []Header{{"Stripe-Should-Retry", "true"}}},
				{Problem: ProblemInternal, Type: "api_error"},
				{Problem: ProblemStoreUnavailable, Type: "api_error", Headers: []Header{{"Stripe-Should-Retry", "true"}}},
			},
			Envelope: Envelope{
				Writer: "stripe", ContentType: "application/json", SchemaName: "IdempotencyStripeError",
				TypeAt: "/error/type", CodeAt: "/error/code", DefaultType: "invalid_request_error",
				Schema: `{"type":"object","required":["error"],` +
					`"description":"Stripe's error envelope, as the runtime writes it under profile stripe (runtime.StripeErrors).",` +
					`"properties":{"error":{"type":"object","required":["type","message"],"properties":{` +
					`"type":{"type":"string","description":"invalid_request_error, idempotency_error or api_error"},` +
					`"code":{"type":"string","description":"idempotency_key_in_use for a key still in progress, rate_limit"},` +
					`"message":{"type":"string","description":"what went wrong, for people"},` +
					`"param":{"type":"string","description":"the parameter at fault, in Stripe's bracket form (metadata[order_id]), or Idempotency-Key"},` +
					`"doc_url":{"type":"string","description":"a page about the error"}}}}}`,
			},
		},
	}
}

// ProfileNamed returns the row named name, and whether there is one.
func ProfileNamed(name string) (Profile, bool) {
	for _, p := range Profiles() {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// ProfileNames returns the rows' names, in the table's order.
func ProfileNames() []string {
	var out []string
	for _, p := range Profiles() {
		out = append(out, p.Name)
	}
	return out
}

// describedProblemNames are the problems a client of an operation can meet from the
// idempotency layer itself (not the application's unauthenticated and internal), in order.
func describedProblemNames() []string {
	var out []string
	for _, p := range problems {
		if p.Name != ProblemUnauthenticated && p.Name != ProblemInternal {
			out = append(out, p.Name)
		}
	}
	return out
}
