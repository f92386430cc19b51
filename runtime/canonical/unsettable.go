package canonical

// Unsettable is a form field that a client may send empty to clear it: a property declared
// anyOf [X, {type: string, enum: [”]}], as Stripe declares metadata, address or
// default_tax_rates, decoded from an application/x-www-form-urlencoded body with bracketed
// fields. Generated code holds an optional one as a pointer, so a field has three states:
//
//	nil                        absent: the field was not sent
//	&Unsettable{Unset: true}   sent empty (metadata=): clear the value
//	&Unsettable{Value: v}      sent with a value (metadata[order]=42, address[city]=Paris)
//
// The empty value always means Unset, also when X is a string that could be empty. Its
// canonical form (fingerprint) is the JSON string "" when Unset and X's canonical form
// otherwise, so the three states never share a fingerprint.
//
// It has no methods on purpose: a method of a generic type is compiled once per type argument,
// and a large API (Stripe's) instantiates it for hundreds of types. encoding/json writes it as
// {"Value": …, "Unset": …}.
type Unsettable[T any] struct {
	Value T
	Unset bool
}

// AppendUnsettable appends the canonical form of u: "" when it is Unset, else its Value
// written by value.
func AppendUnsettable[T any](b []byte, u *Unsettable[T], value func([]byte, T) []byte) []byte {
	if u.Unset {
		return append(b, '"', '"')
	}
	return value(b, u.Value)
}

// OptUnsettable writes an optional Unsettable member when it is present (non-nil).
func OptUnsettable[T any](o *ObjectWriter, b []byte, name string, u *Unsettable[T], value func([]byte, T) []byte) []byte {
	if u == nil {
		return b
	}
	return AppendUnsettable(o.Key(b, name), u, value)
}
