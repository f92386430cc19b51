package canonical

// DecodeMap reads an object (additionalProperties) into *m, allocating the map when it is nil,
// with each value read by value: (*Decoder).Str, (*Decoder).Int64, (*Decoder).Float64,
// (*Decoder).Bool, (*Decoder).Raw or a generated function. A name that occurs twice is the
// error "duplicate member name". Map keys are compared exactly (case-sensitive).
//
// Calling through the func value makes the Decoder escape to the heap (one allocation per
// document); generated code therefore writes the same loop inline (see the package doc):
//
//	if !d.BeginObject() {
//		return
//	}
//	if v.Metadata == nil {
//		v.Metadata = map[string]string{}
//	}
//	for d.NextMember() {
//		k := d.Key()
//		if _, dup := v.Metadata[k]; dup {
//			d.Duplicate()
//			return
//		}
//		v.Metadata[k] = d.Str()
//	}
//	d.EndObject()
func DecodeMap[V any](d *Decoder, m *map[string]V, value func(*Decoder) V) {
	if !d.BeginObject() {
		return
	}
	if *m == nil {
		*m = make(map[string]V)
	}
	for d.NextMember() {
		if _, dup := (*m)[string(d.Name())]; dup {
			d.duplicate()
			return
		}
		k := d.Key()
		v := value(d)
		if d.err != nil {
			return
		}
		(*m)[k] = v
	}
	d.EndObject()
}

// DecodeArray reads an array into *s (non-nil after a successful read, even when empty), each
// element read by value. Like DecodeMap it makes the Decoder escape; generated code writes
// the loop inline:
//
//	if !d.BeginArray() {
//		return
//	}
//	v.Lines = []Line{}
//	for d.NextElement() {
//		var e Line
//		decodeLine(d, &e)
//		v.Lines = append(v.Lines, e)
//	}
//	d.EndArray()
func DecodeArray[V any](d *Decoder, s *[]V, value func(*Decoder) V) {
	if !d.BeginArray() {
		return
	}
	if *s == nil {
		*s = []V{}
	}
	for d.NextElement() {
		v := value(d)
		if d.err != nil {
			return
		}
		*s = append(*s, v)
	}
	d.EndArray()
}

// Nullable is a value that JSON may give as null (OpenAPI 3.0 nullable: true, or a 3.1 type
// list with "null"). Generated code uses it in two places:
//
//   - an optional nullable member is a *Nullable[T], with three states that a client means
//     differently (RFC 7396 merge patch: null removes a member; the Agentic Commerce Protocol's
//     request equivalence: null means "clear this field", absent "do not modify"):
//
//     nil                      absent: the member was not sent
//     &Nullable[T]{Null: true} sent as null
//     &Nullable[T]{Value: v}   sent with a value
//
//     Every optional member of a JSON merge patch body (application/merge-patch+json) is one;
//
//   - an array element or map value whose schema allows null is a Nullable[T], so that [null]
//     is not [0].
//
// The states never share a fingerprint: absent writes nothing, null writes null. A required
// nullable member, which cannot be absent, is a plain pointer (nil is null).
//
// Like Unsettable it has no methods on purpose (a method of a generic type is compiled once per
// type argument); encoding/json writes it as {"Value": …, "Null": …}.
type Nullable[T any] struct {
	Value T
	Null  bool
}

// DecodeNullable reads null or a value read by value.
func DecodeNullable[T any](d *Decoder, value func(*Decoder) T) Nullable[T] {
	if d.Null() {
		return Nullable[T]{Null: true}
	}
	return Nullable[T]{Value: value(d)}
}

// AppendNullable appends null or the value written by value.
func AppendNullable[T any](b []byte, v Nullable[T], value func([]byte, T) []byte) []byte {
	if v.Null {
		return append(b, "null"...)
	}
	return value(b, v.Value)
}

// AppendOrNull appends *p written by value, or null when p is nil: the canonical form of a
// nullable property that generated code holds as a pointer.
func AppendOrNull[T any](b []byte, p *T, value func([]byte, T) []byte) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return value(b, *p)
}
