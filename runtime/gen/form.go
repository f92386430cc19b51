package gen

import (
	"strings"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// Form reads an application/x-www-form-urlencoded body field by field (canonical.ParseForm:
// strict percent-decoding, UTF-8), in body order: Next, then a switch on Name (or on Base, the
// name before '[', for array fields and nested members), then Once, Item or Bag to mark the
// declared field as read, a conversion (Str, Int64, …) and checks. Errors are *canonical.Error
// whose pointer is "/" followed by the field's name in the schema. It is a view of the Input.
type Form Input

// Form returns the form reader of the request; the body is parsed on the first call.
func (in *Input) Form() *Form {
	if !in.parsed {
		in.parsed = true
		fields, err := canonical.ParseForm(in.Body)
		if err != nil && in.err == nil {
			in.err = err
		}
		in.fields = append(in.fields[:0], fields...)
		in.next = 0
	}
	return (*Form)(in)
}

// Next makes the next field current and reports whether there was one; it stops at the first
// refused field.
//
//go:noinline
func (f *Form) Next() bool {
	if f.err != nil || f.next >= len(f.fields) {
		return false
	}
	f.next++
	f.where, f.name, f.cur = "", f.Name(), f.fields[f.next-1].Value
	return true
}

// Name is the current field's name ("metadata[order]").
//
//go:noinline
func (f *Form) Name() string { return f.fields[f.next-1].Name }

// Base is the current field's name up to its first '[' ("metadata").
//
//go:noinline
func (f *Form) Base() string {
	base, _, _ := strings.Cut(f.Name(), "[")
	return base
}

// Once marks bit of *seen as read for the declared field named Name: a second field of that
// name is "field given more than once". It returns f for the conversion.
//
//go:noinline
func (f *Form) Once(seen *uint64, bit uint) *Form {
	m := uint64(1) << (bit & 63)
	if *seen&m != 0 {
		f.Invalid("field given more than once")
	}
	*seen |= m
	return f
}

// Item marks bit of *seen as read for the array field named Base (name, name[] or name[N]):
// each field is one item, in body order. It returns f for the conversion of the item.
//
//go:noinline
func (f *Form) Item(seen *uint64, bit uint) *Form {
	*seen |= uint64(1) << (bit & 63)
	f.name = f.Base()
	return f
}

// Bag marks bit of *seen as read for the nested member named Base and returns the current field,
// which the member keeps as it came (metadata[k]=v).
//
//go:noinline
func (f *Form) Bag(seen *uint64, bit uint) canonical.FormField {
	*seen |= uint64(1) << (bit & 63)
	return f.fields[f.next-1]
}

// Reject refuses the current field: the schema is closed and does not declare it.
//
//go:noinline
func (f *Form) Reject() { f.Invalid("field not allowed by the schema") }

// Required checks, after the last field, that the required fields have been read: names[i] is
// the field of bit i of seen.
func (f *Form) Required(seen uint64, names ...string) {
	for i, name := range names {
		if seen&(1<<(uint(i)&63)) == 0 {
			f.name = name
			f.Invalid("missing required field")
			return
		}
	}
}
