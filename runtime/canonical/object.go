package canonical

import "slices"

// ObjectWriter writes the canonical form of a generated struct: the generated canonicalizer
// writes each declared member in RFC 8785 order (sorted at generation time), and the writer
// merges the undeclared members (already sorted) between them, adds commas and closes the object.
// The output is threaded through b, as with append, so that it stays in registers:
//
//	o, b := canonical.WriteObject(b, v.Extra)
//	b = o.Int(b, `"amount":`, v.Amount)
//	b = canonical.OptString(&o, b, `"description":`, v.Description)
//	return o.End(b)
//
// A member name is passed in its canonical form with quotes and colon (`"amount":`), escaped at
// generation time, so writing it is one copy.
type ObjectWriter struct {
	start int
	extra Members
}

// WriteObject starts an object after b; extra are its undeclared members (nil for none).
func WriteObject(b []byte, extra Members) (ObjectWriter, []byte) {
	b = append(b, '{')
	return ObjectWriter{start: len(b), extra: extra}, b
}

// Key writes the undeclared members that sort before name, a comma when needed and name (in
// canonical form with quotes and colon); the caller appends the value:
// b = appendCanonicalOwner(o.Key(b, `"owner":`), v.Owner).
func (o *ObjectWriter) Key(b []byte, name string) []byte {
	if len(o.extra) > 0 {
		b, o.extra = o.extra.AppendBefore(b, o.start, rawName(name))
	}
	if len(b) > o.start {
		b = append(b, ',')
	}
	return append(b, name...)
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
func (o *ObjectWriter) String(b []byte, name, v string) []byte {
	return AppendString(o.Key(b, name), v)
}

func (o *ObjectWriter) Int(b []byte, name string, v int64) []byte {
	return AppendInt(o.Key(b, name), v)
}

func (o *ObjectWriter) Float(b []byte, name string, v float64) []byte {
	return AppendFloat(o.Key(b, name), v)
}

func (o *ObjectWriter) Bool(b []byte, name string, v bool) []byte {
	return AppendBool(o.Key(b, name), v)
}

func (o *ObjectWriter) Raw(b []byte, name string, v []byte) []byte {
	return append(o.Key(b, name), v...)
}

func (o *ObjectWriter) Null(b []byte, name string) []byte { return AppendNull(o.Key(b, name)) }

// End writes the remaining undeclared members and the closing brace.
func (o *ObjectWriter) End(b []byte) []byte {
	b = o.extra.AppendAll(b, o.start)
	return append(b, '}')
}

// OptString, OptInt, OptFloat, OptBool and OptRaw write an optional member when it is present
// (non-nil): absent members are left out, so absent and null fingerprint alike, as the handler
// sees them.
func OptString[T ~string](o *ObjectWriter, b []byte, name string, v *T) []byte {
	if v == nil {
		return b
	}
	return o.String(b, name, string(*v))
}

func OptInt[T ~int32 | ~int64](o *ObjectWriter, b []byte, name string, v *T) []byte {
	if v == nil {
		return b
	}
	return o.Int(b, name, int64(*v))
}

func OptFloat(o *ObjectWriter, b []byte, name string, v *float64) []byte {
	if v == nil {
		return b
	}
	return o.Float(b, name, *v)
}

func OptBool(o *ObjectWriter, b []byte, name string, v *bool) []byte {
	if v == nil {
		return b
	}
	return o.Bool(b, name, *v)
}

func OptRaw[T ~[]byte](o *ObjectWriter, b []byte, name string, v T) []byte {
	if v == nil {
		return b
	}
	return o.Raw(b, name, v)
}

// OptObject writes an optional struct member with its generated canonicalizer f.
func OptObject[T any](o *ObjectWriter, b []byte, name string, v *T, f func([]byte, *T) []byte) []byte {
	if v == nil {
		return b
	}
	return f(o.Key(b, name), v)
}

// OptArray writes an optional array member, each element by f (AppendString, AppendInt, … or a
// generated function); OptObjects one whose elements are structs, by their canonicalizer.
func OptArray[V any](o *ObjectWriter, b []byte, name string, s []V, f func([]byte, V) []byte) []byte {
	if s == nil {
		return b
	}
	return AppendArray(o.Key(b, name), s, f)
}

func OptObjects[T any](o *ObjectWriter, b []byte, name string, s []T, f func([]byte, *T) []byte) []byte {
	if s == nil {
		return b
	}
	return AppendObjects(o.Key(b, name), s, f)
}

// OptMap writes an optional map member (additionalProperties), leaving out the keys in exclude.
func OptMap[V any](o *ObjectWriter, b []byte, name string, m map[string]V, f func([]byte, V) []byte, exclude ...string) []byte {
	if m == nil {
		return b
	}
	return AppendMap(o.Key(b, name), m, f, exclude...)
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
