package canonical

// Unsettable is a form field that a client may send empty to clear it: a property declared
// anyOf [X, {type: string, enum: [""]}], as Stripe declares metadata, address or
// default_tax_rates, decoded from an application/x-www-form-urlencoded body with bracketed
// fields. Generated code holds an optional one as a pointer, so a field has three states:
//
//	nil                        absent: the field was not sent
//	&Unsettable{Unset: true}   sent empty (metadata=): clear the value
//	&Unsettable{Value: v}      sent with a value (metadata[order]=42, address[city]=Paris)
//
// The empty value always means Unset, also when X is a string that could be empty. The three
// states never share a fingerprint: a form body is fingerprinted as its sorted fields, where
// they are no field, the field with an empty value, and the value's own fields.
//
// It has no methods on purpose: a method of a generic type is compiled once per type argument,
// and a large API (Stripe's) instantiates it for hundreds of types. encoding/json writes it as
// {"Value": …, "Unset": …}.
type Unsettable[T any] struct {
	Value T
	Unset bool
}
