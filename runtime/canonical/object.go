package canonical

import "slices"

// ObjectWriter writes the canonical form of a generated struct: the generated canonicalizer
// calls it once per declared member, in RFC 8785 order (sorted at generation time), and the
// writer merges the undeclared members (already sorted) between them, adds commas and closes the
// object:
//
//	o := canonical.WriteObject(b, v.Extra)
//	o.Int(`"amount":`, v.Amount)
//	canonical.OptString(&o, `"description":`, v.Description)
//	return o.End()
//
// A member name is passed in its canonical form with quotes and colon (`"amount":`), escaped at
// generation time, so writing it is one copy.
type ObjectWriter struct {
	// B is the output so far; Key returns it for a value appended by other code, which stores
	// the result back in B.
	B     []byte
	start int
	extra Members
}

// WriteObject starts an object after b; extra are its undeclared members (nil for none).
func WriteObject(b []byte, extra Members) ObjectWriter {
	b = append(b, '{')
	return ObjectWriter{B: b, start: len(b), extra: extra}
}

// Key writes the undeclared members that sort before name, a comma when needed and name (in
// canonical form with quotes and colon), and returns B for the value:
// o.B = appendCanonicalOwner(o.Key(`"owner":`), v.Owner).
func (o *ObjectWriter) Key(name string) []byte {
	if len(o.extra) > 0 {
		o.B, o.extra = o.extra.AppendBefore(o.B, o.start, rawName(name))
	}
	if len(o.B) > o.start {
		o.B = append(o.B, ',')
	}
	o.B = append(o.B, name...)
	return o.B
}

// rawName turns a canonical member name with quotes and colon back into the name. Canonical
// escaping only adds backslashes, so a name without one is the text between the quotes.
func rawName(name string) string {
	s := name[1 : len(name)-2]
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			return string(appendUnescaped(nil, []byte(s)))
		}
	}
	return s
}

// String, Int, Float, Bool, Raw and Null write one member with its value; Raw's value is already
// canonical JSON.
func (o *ObjectWriter) String(name, v string) { o.B = AppendString(o.Key(name), v) }

func (o *ObjectWriter) Int(name string, v int64) { o.B = AppendInt(o.Key(name), v) }

func (o *ObjectWriter) Float(name string, v float64) { o.B = AppendFloat(o.Key(name), v) }

func (o *ObjectWriter) Bool(name string, v bool) { o.B = AppendBool(o.Key(name), v) }

func (o *ObjectWriter) Raw(name string, v []byte) { o.B = append(o.Key(name), v...) }

func (o *ObjectWriter) Null(name string) { o.B = AppendNull(o.Key(name)) }

// End writes the remaining undeclared members and the closing brace, and returns the output.
func (o *ObjectWriter) End() []byte {
	o.B = o.extra.AppendAll(o.B, o.start)
	return append(o.B, '}')
}

// OptString, OptInt, OptFloat, OptBool and OptRaw write an optional member when it is present
// (non-nil): absent members are left out, so absent and null fingerprint alike, as the handler
// sees them.
func OptString[T ~string](o *ObjectWriter, name string, v *T) {
	if v != nil {
		o.String(name, string(*v))
	}
}

func OptInt[T ~int32 | ~int64](o *ObjectWriter, name string, v *T) {
	if v != nil {
		o.Int(name, int64(*v))
	}
}

func OptFloat(o *ObjectWriter, name string, v *float64) {
	if v != nil {
		o.Float(name, *v)
	}
}

func OptBool(o *ObjectWriter, name string, v *bool) {
	if v != nil {
		o.Bool(name, *v)
	}
}

func OptRaw[T ~[]byte](o *ObjectWriter, name string, v T) {
	if v != nil {
		o.Raw(name, v)
	}
}

// OptObject writes an optional struct member with its generated canonicalizer f.
func OptObject[T any](o *ObjectWriter, name string, v *T, f func([]byte, *T) []byte) {
	if v != nil {
		o.B = f(o.Key(name), v)
	}
}

// OptArray writes an optional array member, each element by f (AppendString, AppendInt, … or a
// generated function); OptObjects one whose elements are structs, by their canonicalizer.
func OptArray[V any](o *ObjectWriter, name string, s []V, f func([]byte, V) []byte) {
	if s != nil {
		o.B = AppendArray(o.Key(name), s, f)
	}
}

func OptObjects[T any](o *ObjectWriter, name string, s []T, f func([]byte, *T) []byte) {
	if s != nil {
		o.B = AppendObjects(o.Key(name), s, f)
	}
}

// OptMap writes an optional map member (additionalProperties), leaving out the keys in exclude.
func OptMap[V any](o *ObjectWriter, name string, m map[string]V, f func([]byte, V) []byte, exclude ...string) {
	if m != nil {
		o.B = AppendMap(o.Key(name), m, f, exclude...)
	}
}

// AppendObjects appends s as a canonical array of structs, each by its canonicalizer f.
func AppendObjects[T any](b []byte, s []T, f func([]byte, *T) []byte) []byte {
	b = append(b, '[')
	for i := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = f(b, &s[i])
	}
	return append(b, ']')
}

// AppendStringOf, AppendIntOf and AppendRaw are AppendString, AppendInt and a copy of canonical
// JSON for named types (enums, int32, json.RawMessage), as element functions of arrays and maps.
func AppendStringOf[T ~string](b []byte, v T) []byte { return AppendString(b, string(v)) }

func AppendIntOf[T ~int32 | ~int64](b []byte, v T) []byte { return AppendInt(b, int64(v)) }

func AppendRaw[T ~[]byte](b []byte, v T) []byte { return append(b, v...) }

// MapMembers canonicalizes the values of m (a struct's typed additionalProperties) by f into
// Members sorted by name, leaving out the keys in exclude: the extra members of WriteObject.
func MapMembers[V any](m map[string]V, f func([]byte, V) []byte, exclude ...string) Members {
	var x Members
	for k, v := range m {
		if !contains(exclude, k) {
			x = append(x, Member{Name: k, Value: f(nil, v)})
		}
	}
	sortMembersByName(x)
	return x
}

func sortMembersByName(x Members) {
	slices.SortFunc(x, func(p, q Member) int { return compare16(p.Name, q.Name) })
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
