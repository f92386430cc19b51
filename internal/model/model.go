// Package model is idemgen's intermediate representation: what the loader (internal/spec) builds
// from an OpenAPI document plus config and overlays, after validation, and what every emitter
// (generator, `idemgen list`, templates) reads. It holds resolved, typed settings and every
// naming decision, and nothing from kin-openapi, so emitters stay independent of the OpenAPI
// version and of the loader library.
//
// Invariants the loader guarantees (emitters rely on them and do not re-check):
//   - Document.Operations holds only marked operations, sorted by Path then Method.
//   - Every Go name (Operation.GoName, Param.GoName, Property.GoName, Schema.GoName) is a valid,
//     exported Go identifier, unique in its scope.
//   - Settings are complete: defaults from docs/design.md section 2 and document-level x-idempotency are
//     already applied; durations are positive; pointers in Exclude match the request schema.
package model

import (
	"time"

	"github.com/idemgen/idemgen/internal/diag"
)

// Document is one loaded API description.
type Document struct {
	// Source is the path of the root file as given by the user.
	Source string
	// OpenAPI is the version string of the (possibly converted) document, e.g. "3.0.3".
	OpenAPI string
	Title   string
	Version string
	// Operations are the marked (idempotent) operations, sorted by Path then Method.
	Operations []*Operation
	// Unmarked are operations not marked, sorted like Operations; `idemgen check` inspects them
	// for idempotency-looking headers and fields. Their Settings are zero.
	Unmarked []*Operation
	// Schemas are the named component schemas reachable from Operations, sorted by Name.
	Schemas []*Schema
	// DB is the config file's db: the Go type of the database handle generated handlers write
	// through, as written ("*example.com/shop/store.DB"); "" when the config names none. DBLoc is
	// where it is written. The generator parses and checks it.
	DB    string
	DBLoc diag.Loc
}

// MarkSource says where an operation's idempotency mark came from.
type MarkSource string

const (
	MarkSpec   MarkSource = "spec"   // x-idempotent in the document (possibly added by an overlay)
	MarkConfig MarkSource = "config" // an idemgen.yaml entry
	MarkInfer  MarkSource = "infer"  // --infer recognised an idempotency header or field
	// MarkUnsafe is the config's unsafe switch: every POST, PUT, PATCH and DELETE operation
	// not marked otherwise, because an SDK sends a key on each (Stainless SDKs do).
	MarkUnsafe MarkSource = "unsafe"
	// MarkStainless is the config's stainless section: Stainless's idempotency_header, which
	// its SDKs send on every unsafe operation (as MarkUnsafe, with that header).
	MarkStainless MarkSource = "stainless"
	// MarkFern is Fern's x-fern-idempotent: true, with the key header of the document's
	// x-fern-idempotency-headers.
	MarkFern MarkSource = "fern"
	// MarkXIdempotency is an x-idempotency object (or true) on the operation itself: the same
	// fields as x-idempotent, in the spelling some specs and proposals use.
	MarkXIdempotency MarkSource = "x-idempotency"
	MarkNone         MarkSource = "" // not marked
)

// Annotation is another tool's idempotency or retry extension found on an operation (or at
// the document's root, applying to it), reported by `idemgen list --format json`.
type Annotation struct {
	// Extension is the extension's name as written: x-fern-idempotent, x-speakeasy-retries.
	Extension string
	// Tool is the tool that defines it: fern, speakeasy, stainless, idemgen.
	Tool string
	// Read says what idemgen did with it: "mark" (it marked the operation), "key" (it named
	// the key header), "retries" (a client retry policy, reported only: it marks nothing).
	Read string
	Loc  diag.Loc
}

// Operation is one HTTP operation.
type Operation struct {
	// ID is the operationId; when the spec has none, the loader derives one from method and path
	// ("post /v1/payments" -> "postV1Payments") and sets IDDerived.
	ID        string
	IDDerived bool
	// GoName is the exported Go identifier used for generated names (CreatePayment...).
	GoName string
	// Method is upper case ("POST").
	Method string
	// Path is the path template as written in the spec ("/v1/payments/{payment_id}/refunds").
	Path        string
	Summary     string
	Description string
	Loc         diag.Loc // the operation object
	Mark        MarkSource
	// Annotations are the other tools' idempotency and retry extensions that apply to the
	// operation, in document order.
	Annotations []Annotation
	Settings    Settings
	// Params are the operation's path, query and header parameters (path-item level ones merged
	// in), path parameters first in template order, then query, then header, each sorted by name.
	// A header parameter that carries the idempotency key is included with IsKey set.
	Params []*Param
	// Body is nil when the operation declares no request body.
	Body *RequestBody
	// Responses lists the declared status codes ("201", "4XX", "default"), sorted; used in docs.
	Responses []string
	// ErrorResponses are the declared error responses (4xx, 5xx, 4XX, 5XX, default), by code.
	ErrorResponses []ErrorResponse
	// ResponseHeaders are the header names any declared response of the operation declares, in
	// canonical MIME form, sorted: what the service promises to send (idemgen conform checks
	// Idempotency-Key-Expires where a spec declares it).
	ResponseHeaders []string
}

// Carrier says where the idempotency key travels.
type Carrier string

const (
	CarrierHeader Carrier = "header"
	CarrierBody   Carrier = "body" // a JSON pointer into a JSON body
	CarrierForm   Carrier = "form" // a field of an application/x-www-form-urlencoded body
	// CarrierQuery: a query parameter (AIP-155's request_id on Google's REST APIs).
	CarrierQuery Carrier = "query"
)

// Scope values of docs/design.md section 2: runtime/defaults.ScopeNames, which the loader
// accepts (the model imports nothing of the runtime, so the names are written again here).
type Scope string

const (
	ScopeTenant    Scope = "tenant"
	ScopeOperation Scope = "operation"
	// ScopePath: keys are unique per tenant, operation and the request's path parameter
	// values (the Agentic Commerce Protocol's "identity + endpoint path").
	ScopePath Scope = "path"
)

// Mode values of docs/design.md section 4.
type Mode string

const (
	ModeAtomic Mode = "atomic"
	ModeLease  Mode = "lease"
)

// BodyMode is fingerprint.body.
type BodyMode string

const (
	BodyCanonical BodyMode = "canonical"
	BodyRaw       BodyMode = "raw"
)

// Settings are the resolved x-idempotent settings of one operation (docs/design.md section 2), with
// defaults and document-level x-idempotency already applied.
type Settings struct {
	Key         KeySettings
	Scope       Scope
	Retention   time.Duration
	Lease       time.Duration
	Mode        Mode
	Fingerprint FingerprintSettings
	Replay      ReplaySettings
	// Wait is concurrency.wait: how long a duplicate waits for the first to finish.
	Wait time.Duration
	// Tombstone is `tombstone`: how long after completion a key is remembered by a compact
	// tombstone once its response's retention has ended, so that a late retry is refused
	// (410 result-expired) rather than run again; 0 keeps no tombstone. Never between 0 and
	// Retention.
	Tombstone time.Duration
	// Detach is execution.detach: a handler that holds its key is not canceled when its client
	// goes away (it completes within ExecutionLimit and the retry replays its answer).
	Detach bool
	// ExecutionLimit is execution.limit: how long a handler that holds its key may run.
	ExecutionLimit time.Duration
	// BodyLimit is limits.body in bytes; ResponseLimit is limits.response in bytes.
	BodyLimit     int64
	ResponseLimit int64
	// PartLimit is limits.part: the largest part of a multipart/form-data body, in bytes.
	PartLimit int64
	// Profile is `profile`: the name of a row of the contract table (runtime/defaults.Profiles)
	// the runtime answers in; "" names none. The row's settings are already applied to the
	// fields above.
	Profile Profile
	// ScopeHeaders are request headers folded into the scope after the tenant (the profile's).
	ScopeHeaders []string
	// Errors is the errors mapping resolved for the operation: every problem's document in the
	// error schema its spec declares (errors.go); nil: the runtime's writer.
	Errors *ErrorFormat
	// Body is body.*: how a JSON request body is read beyond its schema.
	Body BodySettings
	// Loc is where the x-idempotent value (or config entry) is; its pointer names the setting.
	Loc diag.Loc
}

// BodySettings is body.*: how a JSON request body is read beyond its schema. The loader
// applies both to the body's schemas (Schema.MergePatch, and ClosedObject cleared), so that
// emitters only read the schemas.
type BodySettings struct {
	// Nulls is body.nulls: NullsSchema (null only where the schema allows it) or NullsClear
	// (every optional member may be null, meaning "clear it", as in a JSON merge patch, RFC
	// 7396, which an application/merge-patch+json body always is).
	Nulls Nulls
	// Unknown is body.unknown: UnknownSchema (undeclared members as additionalProperties says)
	// or UnknownAccept (undeclared members are accepted and fingerprinted, even where the schema
	// says additionalProperties: false).
	Unknown Unknown
}

// Nulls values of body.nulls.
type Nulls string

const (
	NullsSchema Nulls = "schema"
	NullsClear  Nulls = "clear"
)

// Unknown values of body.unknown.
type Unknown string

const (
	UnknownSchema Unknown = "schema"
	UnknownAccept Unknown = "accept"
)

// Profile names a row of the contract table (`profile` in the settings): the contract of a
// known API, its settings and answers (runtime/defaults.Profiles says what each row implies).
type Profile string

// KeySettings are the key rules. MinLength, MaxLength and Pattern are already resolved in the
// order of docs/design.md section 2: x-idempotent, else the key's own declaration, else the defaults.
type KeySettings struct {
	Carrier Carrier
	// Header is the header name as declared (matching is case-insensitive), for CarrierHeader.
	Header string
	// Pointer is the JSON pointer for CarrierBody (e.g. "/idempotency_key"); Field is the form
	// field name for CarrierForm.
	Pointer string
	Field   string
	// Query is the query parameter carrying the key, for CarrierQuery (matched exactly, as
	// query parameter names are).
	Query string
	// PointerTokens is Pointer split and unescaped (RFC 6901), e.g. ["data","attributes","idempotencyKey"].
	PointerTokens []string
	Required      bool
	MinLength     int
	MaxLength     int
	// Pattern is a Go regexp (already checked to compile), "" for none.
	Pattern string
	// Characters is key.characters: "visible" (the default: visible ASCII except ',') or
	// "opaque" (any text without control characters); runtime/defaults' KeyCharacters names.
	Characters string
	// Quoted is key.quoted: "accept" (the default: an RFC 8941 sf-string is its content),
	// "require" (only an sf-string) or "literal" (quotes are characters of the key);
	// runtime/defaults' KeyQuoting names.
	Quoted string
	// Echo is key.echo: every answer carries the key header as the request sent it.
	Echo bool
	// Sources says where each rule above came from.
	Sources KeySources
	// Standard is the convention the key follows; the runtime applies its rules (for OASIS
	// Repeatable Requests, the Repeatability-First-Sent window).
	Standard Standard
	// FirstSent is the Repeatability-First-Sent header as the spec declares it, for
	// StandardRepeatable; "" when the spec does not declare it (clients still send it).
	FirstSent string
}

// Standard names the convention an idempotency key follows (docs/cli.md, standards).
type Standard string

const (
	// StandardIdempotencyKey: a key in the Idempotency-Key header of the IETF draft
	// (draft-ietf-httpapi-idempotency-key-header) or a vendor's header or body field of the
	// same meaning (Stripe, Adyen, PayPal-Request-Id, Square's idempotency_key, ...).
	StandardIdempotencyKey Standard = "idempotency-key"
	// StandardRepeatable: OASIS Repeatable Requests Version 1.0: Repeatability-Request-ID,
	// with Repeatability-First-Sent giving the time of the first attempt.
	StandardRepeatable Standard = "oasis-repeatable-requests"
	// StandardAIP155: Google AIP-155 request identification, a request_id field of the request.
	StandardAIP155 Standard = "aip-155"
)

// RuleSource says where a key rule came from (docs/cli.md, key rules).
type RuleSource string

const (
	RuleSettings RuleSource = "settings" // x-idempotent, x-idempotency or the config file
	RuleSpec     RuleSource = "spec"     // the key's declaration in the spec (under --infer, also a bound it leaves out)
	RuleDefault  RuleSource = "default"  // idemgen's default
)

// KeySources are the sources of the key rules.
type KeySources struct {
	Required, MinLength, MaxLength, Pattern RuleSource
}

// FingerprintSettings is fingerprint.*.
type FingerprintSettings struct {
	// Exclude are JSON pointers (JSON bodies) or field names (form bodies), validated against
	// the schema; "*" tokens stand for every array element or map value.
	Exclude []Pointer
	// Headers are request header names folded into the fingerprint, in canonical MIME form,
	// sorted.
	Headers []string
	Body    BodyMode
}

// Pointer is one fingerprint exclusion.
type Pointer struct {
	// Raw is the pointer as written ("/metadata/trace_id", "/lines/*/note", or a form field name).
	Raw string
	// Tokens are the unescaped reference tokens; "*" is a wildcard.
	Tokens []string
}

// ReplaySettings is replay.*.
type ReplaySettings struct {
	// Headers are extra response headers stored and replayed, canonical MIME form, sorted.
	Headers []string
	// Statuses decide which outcomes are final (stored). Evaluated by the runtime with
	// defaults.Final: the last rule that matches a status decides ("!404" after "4xx" keeps a
	// 404 unstored; before it, "4xx" stores it).
	Statuses []StatusRule
}

// StatusRule is one entry of replay.statuses: a code (402) or a class (4 for "4xx"), possibly
// negated ("!409").
type StatusRule struct {
	Code    int  // 100..599, or 0 when Class is set
	Class   int  // 1..5, or 0 when Code is set
	Exclude bool // written with a leading "!"
}

// ParamIn is where a parameter lives.
type ParamIn string

const (
	InPath   ParamIn = "path"
	InQuery  ParamIn = "query"
	InHeader ParamIn = "header"
)

// Param is one declared parameter.
type Param struct {
	Name     string
	In       ParamIn
	GoName   string // field name in the generated params struct
	Required bool
	// IsKey marks the header parameter that carries the idempotency key; the generated params
	// struct leaves it out (the runtime reads and validates the key).
	IsKey bool
	// Explode and Style as declared (defaults applied: form/true for query, simple/false else).
	Style   string
	Explode bool
	Schema  *Schema
	// Example is the parameter's own example (example, else the first of examples) as JSON
	// text, "" when absent; `idemgen conform` prefers it to the schema's.
	Example string
	Loc     diag.Loc
}

// ContentKind says how a request body of one media type is decoded and fingerprinted.
type ContentKind string

const (
	ContentJSON ContentKind = "json" // application/json and +json: strict decode, canonical JSON
	ContentForm ContentKind = "form" // application/x-www-form-urlencoded: sorted fields
	ContentRaw  ContentKind = "raw"  // anything else, or fingerprint.body: raw: exact bytes
	// ContentMultipart is multipart/form-data: parts decoded by the schema's properties, the
	// fingerprint by part (values canonical, files by content hash).
	ContentMultipart ContentKind = "multipart"
)

// RequestBody is the operation's request body.
type RequestBody struct {
	Required bool
	// Contents has one entry per media type, sorted by MediaType.
	Contents []*Content
}

// Content is one media type of a request body.
type Content struct {
	// MediaType is lower case, without parameters ("application/json").
	MediaType string
	Kind      ContentKind
	// Schema is nil when the media type declares none (the body is then raw bytes).
	Schema *Schema
	// Encoding is the media type's encoding object by property name (form bodies only): how a
	// property is serialized, such as {style: deepObject, explode: true} for Stripe's nested
	// fields (metadata[key]=value).
	Encoding map[string]Encoding
	// Example is the media type's example (example, else the first of examples) as JSON text,
	// "" when absent; `idemgen conform` sends it when it is valid.
	Example string
	Loc     diag.Loc
}

// Encoding is one entry of a form media type's encoding object.
type Encoding struct {
	// Style and ContentType as declared ("" when absent); Explode as declared, else true (the
	// default of style form, the default style).
	Style       string
	Explode     bool
	ContentType string
	Loc         diag.Loc
}

// Type is a schema's JSON type as idemgen models it.
type Type string

const (
	TypeObject  Type = "object"
	TypeArray   Type = "array"
	TypeString  Type = "string"
	TypeInteger Type = "integer"
	TypeNumber  Type = "number"
	TypeBoolean Type = "boolean"
	// TypeAny is a value of any JSON type: a schema with no type, or a oneOf/anyOf (Composite),
	// or several non-null types. It decodes to raw JSON and is canonicalized generically.
	TypeAny Type = "any"
)

// Schema is a resolved schema node. Named component schemas are shared: the same *Schema is
// reachable from every place that references it, and the graph may be cyclic (follow Name to
// stop recursion).
type Schema struct {
	// Name is the component name ("PaymentRequest") for schemas under components/schemas, "" for
	// inline ones. GoName is the Go type name the loader chose for named schemas (unique).
	Name   string
	GoName string
	Type   Type
	Format string
	// Nullable is 3.0 nullable: true or a 3.1 type array containing "null".
	Nullable bool
	// Composite is true for oneOf/anyOf (Type is then TypeAny).
	Composite bool
	// CompositeOf is "oneOf" or "anyOf" when Composite is set (oneOf when a schema has both).
	CompositeOf string
	// Variants are the JSON types the oneOf/anyOf members declare, in spec order: a member
	// with no single type is TypeAny. It names the construct in messages ("a oneOf of two
	// string schemas") and tells whether every member is a scalar.
	Variants []Type
	// Members are the oneOf/anyOf member schemas, parallel to Variants, for the schemas of
	// parameters only (the generated decoder checks a parameter's text against them); nil
	// elsewhere, where a oneOf/anyOf is kept as raw canonical JSON.
	Members []*Schema
	// EmptyOr is set on a oneOf/anyOf one of whose members is {type: string, enum: ['']}: the
	// schema of the other members (that member when there is one, else a oneOf/anyOf of them).
	// It is how Stripe declares a form field that a client may send empty to unset it
	// (metadata=, address=); the generator types such form fields by it (canonical.Unsettable),
	// while JSON bodies keep the oneOf/anyOf as raw JSON.
	EmptyOr *Schema
	// Enum holds the allowed values of a string enum, in spec order (other enums are left as
	// plain values and checked generically).
	Enum []string
	// EnumJSON holds the allowed values of any other enum (integer, number, boolean, or values of
	// mixed types), each as JSON text, in spec order; the generated decoder checks them.
	EnumJSON []string
	// Types lists the JSON types a TypeAny schema with several non-null types allows (3.1
	// type: [string, integer]), in spec order; empty means any type. Nullable says whether
	// null is allowed too.
	Types []Type
	// Object.
	Properties []*Property // in spec order
	// AdditionalProperties is the value schema of a map (additionalProperties: {schema} or true,
	// the latter as a TypeAny schema); nil when absent.
	AdditionalProperties *Schema
	// ClosedObject is true when additionalProperties: false; undeclared members are then a
	// body-invalid error instead of being kept and fingerprinted generically. It is false on a
	// copy read under body.unknown: accept (Opened).
	ClosedObject bool
	// MergePatch marks a copy of a declared object schema read as a JSON merge patch (RFC
	// 7396: an application/merge-patch+json body, or body.nulls: clear): every optional member
	// may be null, meaning "remove it" (Property.Nullable), and so may the values of its
	// additionalProperties; nested objects are merge patches too, array elements are not (an
	// array replaces the target's).
	// Its Name is the declared schema's; the loader gives it a Go name of its own (with a Patch
	// suffix when the declared schema is used as itself too).
	MergePatch bool
	// Opened marks a copy of a declared schema read under body.unknown: accept, whose closed
	// objects accept undeclared members (and fingerprint them).
	Opened bool
	// Array.
	Items *Schema
	// Constraints checked by the generated decoder (docs/design.md section 4). nil/0 means unset.
	Minimum, Maximum           *float64
	ExclusiveMin, ExclusiveMax bool
	MultipleOf                 *float64 // positive (the loader refuses others)
	MinLength, MaxLength       *int64   // in Unicode code points
	MinItems, MaxItems         *int64
	Pattern                    string
	// Ignore is x-idempotency-ignore: true (left out of the fingerprint).
	Ignore bool
	// Example and Default are the schema's example (3.0 example, else the first of 3.1
	// examples) and default as JSON text, "" when absent. Only `idemgen conform` reads them, to
	// build valid requests; the generated decoder never fills in defaults.
	Example, Default string
	Description      string
	Loc              diag.Loc
}

// Property is one declared member of an object schema.
type Property struct {
	Name     string // JSON member name, case-sensitive
	GoName   string // Go field name, unique in the struct
	Required bool
	Schema   *Schema
	// Nullable says the member may be null although Schema does not say so: the property is
	// written as a $ref with a sibling nullable: true (which OpenAPI 3.0 says to ignore, but
	// real specs mean), or as a oneOf/anyOf of one $ref and {type: 'null'} (OpenAPI 3.1, as
	// Pydantic and Zod write optional members). Schema is then the referenced schema, shared
	// with its other uses. Null and absent are both the Go zero value.
	Nullable bool
	// Ignore is x-idempotency-ignore on the property's schema or the property itself.
	Ignore bool
}
