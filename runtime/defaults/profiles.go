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
	// Scope is the row's `scope` setting (ScopeNames), "" for the default (ScopeTenant): the
	// Agentic Commerce Protocol scopes a key to the caller and the endpoint path (ScopePath).
	Scope string
	// Body is how the row reads request bodies beyond their schemas (body.nulls and
	// body.unknown); zero fields keep the defaults.
	Body BodyRule
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

// BodyRule is a row's body.nulls and body.unknown settings, in the settings' words ("" keeps
// the default): BodyNullsClear reads null in an optional member as "clear it" and BodyUnknownAccept
// accepts and fingerprints members the schema does not declare.
type BodyRule struct {
	Nulls, Unknown string
}

// The values of body.nulls and body.unknown (docs/cli.md, "Nullable values").
const (
	BodyNullsSchema   = "schema"
	BodyNullsClear    = "clear"
	BodyUnknownSchema = "schema"
	BodyUnknownAccept = "accept"
)

// The values of `scope`: what one idempotency key is unique within, besides the tenant.
const (
	// ScopeTenant (the default): one key names one request per tenant, across operations
	// (Stripe's rule), so a key reused on another operation is a mismatch.
	ScopeTenant = "tenant"
	// ScopeOperation: keys are unique per tenant and operation.
	ScopeOperation = "operation"
	// ScopePath: keys are unique per tenant, operation and the values of the request's path
	// parameters, that is, per endpoint path (the Agentic Commerce Protocol's agentic-checkout
	// RFC section 6.1: "scope keys to the authenticated identity + endpoint path"): the same key
	// on two checkout sessions' update paths names two requests.
	ScopePath = "path"
)

// ScopeNames are the values of `scope`, the default first.
func ScopeNames() []string { return []string{ScopeTenant, ScopeOperation, ScopePath} }

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
	// Echo: the answer's id is the one the request sent in Header, and an answer to a request
	// that sent none carries none (the Agentic Commerce Protocol's agentic-checkout RFC section
	// 3.1: "Request-Id — echo if provided"); no id is made or stored.
	Echo bool
	// Prefix and Length shape a new id: Prefix and Length random letters and digits.
	Prefix string
	Length int
}

// Answer is how a row answers one problem; zero fields keep the default.
type Answer struct {
	// Problem is the problem name (Problems).
	Problem string
	// At, when set, limits the answer to the problem at this JSON pointer (RFC 6901) of the
	// request, a parameter's ("/header/API-Version"); such an answer changes the problem's
	// answer without At (Profile.AnswerAt).
	At string
	// Allowed, when set, is the member of the error document that lists the values the
	// refused parameter may take (its schema's enum, runtime.Problem.Allowed): the Agentic
	// Commerce Protocol's supported_versions.
	Allowed string
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
// by the row's Answers (those without At). The name of a problem not in Problems() gets status
// 0.
func (p Profile) Answer(name string) Answer { return p.AnswerAt(name, "") }

// AnswerAt returns how the row answers problem name at the JSON pointer at of the request
// (runtime.Problem.Pointer, "" for none): Answer, changed by the row's answer for that pointer
// when it has one.
func (p Profile) AnswerAt(name, at string) Answer {
	a := Answer{Problem: name, Type: p.Envelope.DefaultType}
	if e, ok := ProblemNamed(name); ok {
		a.Status, a.RetryAfter = e.Status, e.RetryAfter
	}
	if a.Type == "" {
		a.Type = name
	}
	// The answer for the problem, then the one for the problem at this pointer, which keeps
	// what it does not set.
	for _, o := range p.Answers {
		if o.Problem == name && o.At == "" {
			a.change(o, true)
		}
	}
	for _, o := range p.Answers {
		if o.Problem == name && at != "" && samePointer(o.At, at) {
			a.change(o, false)
		}
	}
	return a
}

// samePointer reports whether two request pointers name the same value: equal, or naming one
// header parameter (header names are case-insensitive, RFC 9110 section 5.1).
func samePointer(a, b string) bool {
	const h = "/header/"
	if strings.HasPrefix(a, h) && strings.HasPrefix(b, h) {
		return strings.EqualFold(a, b)
	}
	return a == b
}

// change applies the row's answer o; whole replaces every member o can set, else only those
// o sets.
func (a *Answer) change(o Answer, whole bool) {
	if o.Status != 0 {
		a.Status = o.Status
	}
	if o.Type != "" {
		a.Type = o.Type
	}
	set := func(dst *string, v string) {
		if whole || v != "" {
			*dst = v
		}
	}
	set(&a.Code, o.Code)
	set(&a.Message, o.Message)
	set(&a.Param, o.Param)
	set(&a.DocURL, o.DocURL)
	set(&a.At, o.At)
	set(&a.Allowed, o.Allowed)
	if whole || len(o.Headers) > 0 {
		a.Headers = append([]Header(nil), o.Headers...)
	}
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
				// Stripe has no such answer (its keys are forgotten after 24 hours): idemgen's
				// code, in an invalid_request_error that its SDKs do not retry.
				{Problem: ProblemResultExpired, Code: "idempotency_key_expired", Param: "Idempotency-Key",
					Headers: []Header{{"Stripe-Should-Retry", "false"}}},
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
					`"code":{"type":"string","description":"idempotency_key_in_use for a key still in progress, idempotency_key_expired for a key whose answer is no longer kept, rate_limit"},` +
					`"message":{"type":"string","description":"what went wrong, for people"},` +
					`"param":{"type":"string","description":"the parameter at fault, in Stripe's bracket form (metadata[order_id]), or Idempotency-Key"},` +
					`"doc_url":{"type":"string","description":"a page about the error"}}}}}`,
			},
		},
		{
			Name: "acp",
			Doc: "the Agentic Commerce Protocol's contract (github.com/agentic-commerce-protocol, agentic-checkout RFC " +
				"sections 2.1, 3.1 and 6, delegate-payment RFC section 5): opaque keys of at most 255 characters scoped to " +
				"the caller and the endpoint path, null distinct from absent, extension members compared, ACP's flat error object",
			// 6.1: "an opaque string, max 255 characters". An sf-string is read as its content
			// (key.quoted accept), so that a browser's "<uint64>" meets its bare form.
			Key: KeyRule{MinLength: 1, MaxLength: KeyMaxLength, Characters: KeyOpaque},
			// 6.1: "scope keys to the authenticated identity + endpoint path".
			Scope: ScopePath,
			// 6.2: null means "clear this field", absent "do not modify"; 6.7 and the
			// capability-negotiation RFC: extension members are accepted and compared.
			Body: BodyRule{Nulls: BodyNullsClear, Unknown: BodyUnknownAccept},
			// 3.1, response headers: "Idempotency-Key — echo on all POST responses",
			// "Request-Id — echo if provided".
			EchoKey:   true,
			RequestID: RequestID{Header: "Request-Id", Echo: true},
			// 6.4: every idempotency error is type invalid_request with one of three codes;
			// 3.1: the flat object {type, code, message, param}, param an RFC 9535 JSONPath.
			Answers: []Answer{
				{Problem: ProblemKeyMissing, Code: "idempotency_key_required", Message: "Idempotency-Key header is required on all POST requests"},
				// ACP names no code for a key it cannot take; an invalid key leaves the request
				// without a usable key, and the client's fix is the one for a missing key (send
				// one that is valid): the delegate-payment document's Error.code enum has no
				// other code for it.
				{Problem: ProblemKeyInvalid, Code: "idempotency_key_required", Message: "Idempotency-Key must be an opaque string of 1 to 255 characters: {detail}"},
				{Problem: ProblemPayloadMismatch, Code: "idempotency_conflict", Message: "Idempotency-Key has already been used with a different request body"},
				{Problem: ProblemInFlight, Code: "idempotency_in_flight", Message: "A request with this Idempotency-Key is currently being processed"},
				{Problem: ProblemBodyInvalid, Code: "invalid"},
				// 2.1: a version the server does not support is 400 with the versions it
				// does (a request with another API-Version is refused by the operation's
				// parameter schema, whose enum lists them, before any key lookup).
				{Problem: ProblemBodyInvalid, At: "/header/API-Version", Code: "unsupported_api_version", Allowed: "supported_versions"},
				{Problem: ProblemRateLimited, Code: "too_many_requests"},
				{Problem: ProblemInternal, Type: "processing_error", Code: "processing_error"},
				{Problem: ProblemStoreUnavailable, Type: "service_unavailable", Code: "service_unavailable"},
			},
			Envelope: Envelope{
				Writer: "acp", ContentType: "application/json", SchemaName: "IdempotencyACPError",
				TypeAt: "/type", CodeAt: "/code", DefaultType: "invalid_request",
				Schema: `{"type":"object","required":["type","code","message"],` +
					`"description":"The Agentic Commerce Protocol's flat error object (agentic-checkout RFC section 3.1), as the runtime writes it under profile acp.",` +
					`"properties":{` +
					`"type":{"type":"string","description":"invalid_request, processing_error or service_unavailable"},` +
					`"code":{"type":"string","description":"idempotency_key_required, idempotency_conflict, idempotency_in_flight (RFC section 6.4), unsupported_api_version, invalid, or the problem's name"},` +
					`"message":{"type":"string","description":"what went wrong, for people"},` +
					`"param":{"type":"string","description":"the member at fault, as an RFC 9535 JSONPath ($.buyer.email)"},` +
					`"supported_versions":{"type":"array","items":{"type":"string"},"description":"for unsupported_api_version, the API versions the server accepts (RFC section 2.1)"}}}`,
			},
		},
		{
			Name: "ietf",
			Doc: "the IETF HTTPAPI draft draft-ietf-httpapi-idempotency-key-header (revision -06's text, section 2): the key " +
				"is an RFC 8941 sf-string on one field line, 400 missing, 422 reused with another payload, 409 in flight, RFC 9457 problems",
			// 2.1: "Idempotency-Key is an Item Structured Header [RFC8941]. Its value MUST be a
			// String." The draft sets no length; 255 is idemgen's limit.
			Key: KeyRule{MinLength: 1, MaxLength: KeyMaxLength, Characters: KeyOpaque, Quoted: KeyQuotedRequired},
			// 2.7's examples are RFC 7807/9457 problems whose type the server chooses: the
			// row names no types of its own (TypeAt ""), so a service is judged by its statuses
			// and media type, not by idemgen's problem names.
			Envelope: Envelope{
				Writer: "problem+json", ContentType: "application/problem+json", SchemaName: "IdempotencyProblem",
				TypeIsURI: true,
				Schema: `{"type":"object","required":["type","title"],` +
					`"description":"RFC 9457 problem details (draft-ietf-httpapi-idempotency-key-header section 2.7).",` +
					`"properties":{` +
					`"type":{"type":"string","format":"uri","description":"the problem's URI"},` +
					`"title":{"type":"string","description":"the problem's title"},` +
					`"status":{"type":"integer","description":"the HTTP status code"},` +
					`"detail":{"type":"string","description":"what went wrong with this request"}}}`,
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
