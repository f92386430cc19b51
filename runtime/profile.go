package runtime

import (
	"crypto/rand"
	"net/http"
	"regexp"
	"time"

	"github.com/idemgen/idemgen/runtime/defaults"
)

// Profile is the contract of an API that its clients already know, as one value: how the
// runtime's errors are written, what every answer carries besides the response, and the
// idempotency settings the contract implies. The HTTP layer reads a profile's fields, never its
// name: the profiles a spec can name are rows of the contract table (runtime/defaults.Profiles,
// built by NamedProfile), and a team writes its own as a value of this type (docs/runtime.md,
// "Profiles").
//
// A profile reaches an operation in one of two ways: the Operation names it (Operation.Profile;
// idemgen writes NamedProfile("stripe") for `profile: stripe`), or the Runtime's Config.Profile serves
// every operation that names none.
//
// The settings fields (KeyMinLength, KeyMaxLength, ScopeHeaders, Wait) are what an operation
// under the profile is given: idemgen writes them into the generated operations (where an
// explicit setting in the spec still wins), and Apply writes them into an Operation built by
// hand. At run time the Operation's own fields decide; the runtime reads the others (Problems,
// EchoKey, ReplayHeaders, RequestID) from the profile.
type Profile struct {
	// Name names the profile in docs and tools ("stripe"). The runtime does not read it.
	Name string
	// Problems writes every error answer of the profile's operations: status, headers and
	// body. Nil leaves them to Config.ProblemWriter.
	Problems ProblemWriter
	// KeyMinLength and KeyMaxLength bound the idempotency key's length in characters (Stripe
	// and the Agentic Commerce Protocol: 1 to 255); zero leaves the Operation's rule as it is.
	KeyMinLength, KeyMaxLength int
	// KeyCharacters and KeyQuoted are key.characters and key.quoted (KeyOpaque for the Agentic
	// Commerce Protocol's opaque keys, KeyQuotedRequired for the IETF draft's sf-string);
	// the zero values leave the Operation's rule as it is.
	KeyCharacters KeyCharacters
	KeyQuoted     KeyQuoting
	// Scope is what a key is unique within (ScopePath for the Agentic Commerce Protocol);
	// ScopeTenant, the zero value, leaves the Operation's scope as it is.
	Scope Scope
	// ScopeHeaders are request headers folded into the scope after the tenant
	// (Operation.ScopeHeaders): the same key sent for another value names another request.
	ScopeHeaders []string
	// Wait is concurrency.wait (Operation.Wait): how long a duplicate waits for the first
	// request to finish, then replays, before it gets 409.
	Wait time.Duration
	// EchoKey: every answer carries the key header as the request sent it, also when the
	// request was refused before its key was read (a body the schema refuses); a key longer
	// than the operation's maximum key length is not repeated back. Stripe's answers echo
	// Idempotency-Key.
	EchoKey bool
	// ReplayHeaders are response headers stored and replayed for every operation of the
	// profile, in addition to the default allow-list and the Operation's ReplayHeaders.
	// Headers that are never stored (Set-Cookie, Authorization, hop-by-hop) stay unstored.
	ReplayHeaders []string
	// RequestID, when set, gives every answer an id of its own and names the execution whose
	// response it is.
	RequestID *RequestID
	// ScopeHeaderValid, when set, reports whether a scope header's value is one the vendor
	// accepts; a request with another is refused before any lookup (400, body-invalid naming
	// the header), so a value that names no account never makes a scope of its own.
	ScopeHeaderValid func(name, value string) bool
}

// RequestID is a profile's request ids, as Stripe's Request-Id and Original-Request: every
// answer carries Header with a new id, and Original with the id of the execution whose response
// it is (the answer's own id for the first execution and for errors; the stored one for a
// replay). The id is stored with a final response, so that its replays can name it. A handler
// that sets Header itself keeps its id, which Original then names.
type RequestID struct {
	// Header is the response header of the answer's id ("Request-Id"); "" sends no ids.
	Header string
	// Original is the response header naming the execution whose response it is
	// ("Original-Request"); "" leaves it out.
	Original string
	// New returns a new id; nil makes "req_" and 14 random alphanumerics (Stripe's form).
	New func() string
	// Echo: the answer's id is the one the request sent in Header, and a request that sent
	// none gets none (the Agentic Commerce Protocol's agentic-checkout RFC section 3.1:
	// "Request-Id — echo if provided"). No id is made, and none is stored with a response, so a
	// replay carries its own request's id. A value longer than 255 bytes is not repeated back.
	Echo bool
}

// WithProblems returns a copy of p whose errors are written by w; on a nil p, a profile that
// only writes errors. Generated code uses it to put a spec's own error schema (the errors
// mapping) on an operation's profile.
func (p *Profile) WithProblems(w ProblemWriter) *Profile {
	var c Profile
	if p != nil {
		c = *p
	}
	c.Problems = w
	return &c
}

// profileOf is the profile that serves op: its own, or the Runtime's (Config.Profile, an empty
// profile when none).
func (rt *Runtime) profileOf(op *Operation) *Profile {
	if op.Profile != nil {
		return op.Profile
	}
	return rt.profile
}

// problemWriter is the writer of p's errors: its own, or Config.ProblemWriter.
func (rt *Runtime) problemWriter(p *Profile) ProblemWriter {
	if p.Problems != nil {
		return p.Problems
	}
	return rt.problems
}

// forRequest is the id of the answers to a request with headers h: the one it sent in Header
// under Echo (one line of at most 255 bytes, else none), else a new one.
func (r *RequestID) forRequest(h http.Header) string {
	if !r.Echo {
		return r.newID()
	}
	if vals := h.Values(r.Header); len(vals) == 1 && len(vals[0]) <= 255 {
		return vals[0]
	}
	return ""
}

// newID returns a new id for one request.
func (r *RequestID) newID() string {
	if r.New != nil {
		return r.New()
	}
	return randomRequestID("req_", 14)
}

// Apply puts op under p: it sets op.Profile and gives op the profile's settings where op has
// none of its own (a zero key length bound, the default key characters, quoting and scope, nil
// ScopeHeaders, a zero Wait). The body settings of a row (body.nulls, body.unknown) are the
// generated decoder's and cannot be applied to an Operation. It is for an
// Operation built by hand, or taken from a package generated without the profile before it is
// passed to Middleware; generated operations under a profile have its settings already. Call it
// before the operation is served: the runtime never changes an Operation.
func (p *Profile) Apply(op *Operation) {
	op.Profile = p
	if op.Key.MinLength == 0 {
		op.Key.MinLength = p.KeyMinLength
	}
	if op.Key.MaxLength == 0 {
		op.Key.MaxLength = p.KeyMaxLength
	}
	if op.Key.Characters == KeyVisible {
		op.Key.Characters = p.KeyCharacters
	}
	if op.Key.Quoted == KeyQuotedAccepted {
		op.Key.Quoted = p.KeyQuoted
	}
	if op.Scope == ScopeTenant {
		op.Scope = p.Scope
	}
	if op.ScopeHeaders == nil && len(p.ScopeHeaders) > 0 {
		op.ScopeHeaders = append([]string(nil), p.ScopeHeaders...)
	}
	if op.Wait == 0 {
		op.Wait = p.Wait
	}
}

// NamedProfile returns the runtime Profile of the contract table's row name
// (runtime/defaults.Profiles: "idemgen", "stripe"), or nil when no row has that name. Generated
// code names an operation's profile this way (`profile: stripe` in the spec): the row's
// settings (key lengths, scope headers, wait) are in the generated operation already, and the
// value carries what the runtime does with every answer (errors, echoed key, request ids,
// replayed headers). Each call returns a new value; changing it changes only the operations
// given that value.
func NamedProfile(name string) *Profile {
	row, ok := defaults.ProfileNamed(name)
	if !ok {
		return nil
	}
	return profileFromRow(row)
}

// profileFromRow builds the runtime's Profile of a contract table row: its settings as they
// are, its error envelope's writer (envelopeWriters; none for RFC 9457 problems, which
// Config.ProblemWriter writes), its scope headers' patterns compiled into ScopeHeaderValid.
func profileFromRow(row defaults.Profile) *Profile {
	p := &Profile{
		Name:          row.Name,
		KeyMinLength:  row.Key.MinLength,
		KeyMaxLength:  row.Key.MaxLength,
		KeyCharacters: row.Key.Characters,
		KeyQuoted:     row.Key.Quoted,
		Scope:         scopeNamed(row.Scope),
		Wait:          row.Wait,
		EchoKey:       row.EchoKey,
		ReplayHeaders: append([]string(nil), row.ReplayHeaders...),
	}
	if w, ok := envelopeWriters[row.Envelope.Writer]; ok {
		p.Problems = w(row)
	}
	if id := row.RequestID; id.Header != "" {
		prefix, n := id.Prefix, id.Length
		p.RequestID = &RequestID{Header: id.Header, Original: id.Original, Echo: id.Echo, New: func() string { return randomRequestID(prefix, n) }}
	}
	patterns := map[string]*regexp.Regexp{}
	for _, h := range row.ScopeHeaders {
		p.ScopeHeaders = append(p.ScopeHeaders, h.Name)
		if h.Pattern != "" {
			patterns[http.CanonicalHeaderKey(h.Name)] = regexp.MustCompile(`^(?:` + h.Pattern + `)$`)
		}
	}
	if len(patterns) > 0 {
		p.ScopeHeaderValid = func(name, v string) bool {
			re := patterns[http.CanonicalHeaderKey(name)]
			return re == nil || re.MatchString(v)
		}
	}
	return p
}

// scopeNamed is the Scope of a `scope` setting's value (defaults.ScopeNames); "" and unknown
// names are ScopeTenant.
func scopeNamed(name string) Scope {
	switch name {
	case defaults.ScopeOperation:
		return ScopeOperation
	case defaults.ScopePath:
		return ScopePath
	}
	return ScopeTenant
}

// randomRequestID returns prefix and n random letters and digits (Stripe's form: "req_" and
// 14; n 0 is 14).
func randomRequestID(prefix string, n int) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	if n <= 0 {
		n = 14
	}
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b)
}
