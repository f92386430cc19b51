// Package canonical turns request bodies into their canonical form (RFC 8785 JSON, sorted form
// fields, or raw bytes) and frames them with the rest of the request into a versioned SHA-256
// fingerprint. Generated code calls it; so does the runtime for generic (schema-less) values.
//
// # Strict input
//
// The fingerprint must describe exactly what the handler sees (docs/design.md section 4), so the
// [Decoder] and the generic canonicalizer refuse, with an [*Error], every input that parsers
// disagree on: duplicate member names at any depth, invalid UTF-8, lone or reversed surrogate
// escapes, numbers outside the float64 range, bytes after the document, a byte order mark, and
// nesting deeper than [MaxDepth]. Member names are matched case-sensitively.
//
// Decisions where the RFCs leave room: Unicode noncharacters (U+FFFE, U+FDD0…) are
// accepted, since parsers agree on them although I-JSON (RFC 7493 section 2.1) discourages
// them; a schema integer may be spelled 1.0 or 1e0 (JSON Schema counts those as integers)
// but 1.5 is refused.
//
// # Canonical form
//
// Output follows RFC 8785 (JSON Canonicalization Scheme): no whitespace, members sorted by
// their names' UTF-16 code units (section 3.2.3), minimal string escaping (section 3.2.2.2) and
// ECMAScript number serialisation (section 3.2.2.3, ECMA-262 Number::toString). Schema
// integers are the exception that the typed path makes on purpose: [Decoder.Int64] keeps every
// digit (9007199254740993 stays 9007199254740993) and refuses values outside int64 instead of
// rounding them through a double, and [AppendInt] writes the exact decimal digits.
//
// # Numbers
//
// RFC 8785 section 3.2.2.3 canonicalizes every number as the IEEE 754 double it parses to, and
// I-JSON (RFC 7493 section 2.2) warns that other precision is not interoperable. A double holds
// 17 significant decimal digits, so a spelling with at most 17 (10.5, 10.50, 1.05e1, 0.1, 1e21,
// the RFC's own 333333333.33333329) is rounded to its double exactly as RFC 8785 and every
// double-based client do. A spelling with more significant digits than a double can hold would
// be rounded too, so two requests with different numbers would share a fingerprint and the
// second would replay the first: both the generic canonicalizer (additionalProperties,
// oneOf/anyOf, untyped values) and [Decoder.Float64] (schema number) refuse it, as an [*Error]
// at the number's pointer, unless its digits (trailing zeros stripped, exponent normalised) are
// exactly those of its double's shortest form. So 123456789012345678901234567890 and
// 3.14159265358979323846 are refused, as is 1e-400 (a nonzero number that would underflow to 0),
// with a reason that suggests sending the value as a string or declaring the field integer.
// Zero in any spelling is 0. Numbers outside the double range (1e400) are refused too. Schema
// integers never go through a double (see [Decoder.Int64]).
//
// # Generated shape
//
// For each marked operation the generator emits one decode function (on runtime/gen's Input,
// which frames the request line into the fingerprint), shared struct decoders and struct
// canonicalizers. Member names are matched with a switch, sorted (UTF-16 order) and escaped at
// generation time, so the canonicalizer is straight-line code. For the schema
//
//	PaymentRequest: {type: object, required: [amount, currency, to], properties: {
//	  amount: {type: integer, format: int64, minimum: 1}, currency: {type: string, minLength: 3, maxLength: 3},
//	  to: {type: string}, description: {type: string},
//	  metadata: {type: object, additionalProperties: {type: string}},
//	  client_timestamp: {type: string}}}   # fingerprint.exclude: [/client_timestamp]
//
// the generated code is:
//
//	type PaymentRequest struct {
//		Amount          int64
//		Currency        string
//		To              string
//		Description     *string           // optional: nil when absent
//		Metadata        map[string]string // nil when absent
//		ClientTimestamp *string
//		Extra           canonical.Members // undeclared members, kept for the fingerprint
//	}
//
//	func decodeCreatePayment(in *gen.Input) (r CreatePaymentRequest, _ error) {
//		decodePaymentRequest(in.JSON(), &r.Body) // errors are sticky: in.Err reports the first
//		in.JSONBody(appendCanonicalPaymentRequestForCreatePayment(in.BodyStart(), &r.Body))
//		return r, in.Err()
//	}
//
//	func decodePaymentRequest(d *canonical.Decoder, v *PaymentRequest) {
//		var seen uint64 // one bit per declared member, required members first
//		for d.BeginObject(); d.NextMember(); { // BeginObject's error stops NextMember
//			switch string(d.Name()) { // no allocation
//			case "amount":
//				v.Amount = d.Field(&seen, 0).Int64() // Field: a second "amount" is a duplicate
//				d.Min(v.Amount, 1)                   // names /amount
//			case "currency":
//				v.Currency = d.Field(&seen, 1).Str()
//				d.Length(v.Currency, 3, 3) // code points
//			case "to":
//				v.To = d.Field(&seen, 2).Str()
//			case "description":
//				v.Description = canonical.Ptr(d.Field(&seen, 3).Str())
//			case "metadata":
//				v.Metadata = map[string]string{}
//				for d.Field(&seen, 4).BeginObject(); d.NextMember(); {
//					v.Metadata[canonical.MapKey(d, v.Metadata)] = d.Str() // duplicate keys refused
//				}
//				d.EndObject()
//			case "client_timestamp":
//				v.ClientTimestamp = canonical.Ptr(d.Field(&seen, 5).Str())
//			default:
//				d.Unknown(&v.Extra) // or d.Reject() for additionalProperties: false
//			}
//		}
//		d.EndObject()
//		d.Required(seen, "amount", "currency", "to") // after EndObject: names the object
//	}
//
//	// Sorted names: amount currency description metadata to (client_timestamp excluded).
//	func appendCanonicalPaymentRequestForCreatePayment(b []byte, v *PaymentRequest) []byte {
//		o, b := canonical.WriteObject(b, v.Extra) // merges the undeclared members in order
//		b = o.Int(b, `"amount":`, v.Amount)
//		b = o.String(b, `"currency":`, v.Currency)
//		b = canonical.OptString(&o, b, `"description":`, v.Description)
//		b = canonical.OptMap(&o, b, `"metadata":`, v.Metadata, canonical.AppendString)
//		b = o.String(b, `"to":`, v.To)
//		return o.End(b)
//	}
//
// Arrays use [Decoder.BeginArray], [Decoder.NextElement] and [Decoder.EndArray] (with [Grow]
// for struct elements, decoded in place), and [AppendArray] or [AppendObjects]. Nullable values
// test [Decoder.Null] first, or use [Nullable] with [DecodeNullable] and [AppendNullable]
// ([AppendOrNull] for pointers). Schema patterns go through the [Matcher] the Decoder's owner
// sets.
// oneOf/anyOf subtrees and schema-less values use [Decoder.Raw], which stores the value's
// canonical form (so the handler sees exactly what is fingerprinted); exclusions inside them
// use [NewExclusion] with [AppendCanonicalExcluding]. Exclusions on declared members, map keys
// ([AppendMap]'s exclude list) and "*" over typed arrays and maps are resolved by the
// generator: the excluded member is simply not written. The member carrying a body key
// (key.body) is excluded the same way. Form bodies use [ParseForm] and [Framer.FormBody]
// (excluded fields, and a form-carried key, by name); fingerprint.body: raw and media types
// other than JSON and form use [Framer.RawBody].
package canonical

import "encoding/hex"

// Version is the fingerprint algorithm version. It is stored with every idempotency record, so
// a change of the framing or canonical form is detected (and the old records handled: a
// completed record of another version replays, a running one is in flight, docs/runtime.md,
// Replay) instead of surfacing as a wave of false 422 mismatches. Generated code states the
// version it was generated for and does not build under another (regenerate it).
//
// Versions:
//   - 1: the framing and canonical forms of idemgen's first releases;
//   - 2: null is not absent. An optional nullable member sent as null is written as null
//     (version 1 left it out, as if absent), a nullable array element or map value sent as null
//     is null (version 1 wrote its type's zero value), and every optional member of a JSON merge
//     patch body may be null. Requests without such nulls frame as before; only the version
//     bytes differ.
const Version uint16 = 2

// Fingerprint is the SHA-256 digest of a request's framing, with the algorithm version that
// produced it.
type Fingerprint struct {
	Version uint16
	Sum     [32]byte
}

// String returns "v<version>:<hex digest>", for logs and tests.
func (f Fingerprint) String() string {
	b := make([]byte, 0, 8+64)
	b = append(b, 'v')
	b = appendUint(b, uint64(f.Version))
	b = append(b, ':')
	return string(hex.AppendEncode(b, f.Sum[:]))
}

// MaxDepth is the nesting limit: a document with more than MaxDepth nested arrays and objects
// is refused (RFC 8259 section 9 lets a parser limit nesting). It bounds the decoder's stack
// and its fixed-size path table.
const MaxDepth = 64

// Error is a body that is not acceptable: malformed or non-strict JSON, a schema violation
// reported by generated code, or a malformed form body. The HTTP layer answers it with 400
// problem+json of type body-invalid, naming Pointer.
type Error struct {
	// Pointer is the RFC 6901 JSON pointer of the offending value ("" for the whole document);
	// for form bodies it is "/" followed by the field name.
	Pointer string
	// Offset is the byte offset in the body at which the problem was detected, or -1 where the
	// body has no such position (a form field or a multipart part, named by Pointer instead).
	Offset int
	// Reason says what is wrong, in lower case without a final period.
	Reason string
}

func (e *Error) Error() string {
	b := make([]byte, 0, 32+len(e.Pointer)+len(e.Reason))
	b = append(b, "invalid body at "...)
	if e.Pointer == "" {
		b = append(b, "document root"...)
	} else {
		b = append(b, e.Pointer...)
	}
	if e.Offset >= 0 {
		b = append(b, " (byte "...)
		b = appendUint(b, uint64(e.Offset))
		b = append(b, ")"...)
	}
	b = append(b, ": "...)
	b = append(b, e.Reason...)
	return string(b)
}
