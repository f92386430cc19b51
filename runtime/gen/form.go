package gen

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// Form reads an application/x-www-form-urlencoded body field by field (canonical.ParseForm:
// strict percent-decoding, UTF-8), in body order: Next, then a switch on Name (or on Base, the
// name before '[', for array fields), then Once or Item to mark the declared field as read, a
// conversion (Str, Int64, …) and checks; after the loop, List and NextItem read each array
// field in element order. A form whose schema has nested members is read by FormTree. Errors are *canonical.Error
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

// Item marks bit of *seen as read for the array field named Base (name, name[] or name[N]); the
// items themselves are read after the loop over the fields, by List.
//
//go:noinline
func (f *Form) Item(seen *uint64, bit uint) {
	*seen |= uint64(1) << (bit & 63)
}

// listItem is one item of a flat array field: its field and its index (-1 without one).
type listItem struct {
	field, index int
}

// List selects the items of the array field name and reports whether there is one: the fields
// name and name[], in body order, or the fields name[0], name[1], … in the order of their
// indices, which must run from 0 without gaps, as decimals without leading zeros. A member
// cannot mix the two; anything else after the name (name[x], name[0][y]) is refused. NextItem
// then makes each item current.
//
//go:noinline
func (f *Form) List(name string) bool {
	f.flat, f.flatAt = f.flat[:0], 0
	if f.err != nil {
		return false
	}
	indexed, plain := -1, -1
	for i, fl := range f.fields {
		base, rest, bracket := strings.Cut(fl.Name, "[")
		if base != name {
			continue
		}
		it := listItem{field: i, index: -1}
		switch {
		case !bracket || rest == "]":
			plain = i
		default:
			k := strings.TrimSuffix(rest, "]")
			n, err := strconv.Atoi(k)
			switch {
			case len(k) == len(rest) || segmentClass(k) != 1:
				f.where, f.name = "", fl.Name
				f.Invalid("field not allowed by the schema")
				return false
			case err != nil || n > len(f.fields) || (len(k) > 1 && k[0] == '0'):
				f.where, f.name = "", fl.Name
				f.Invalid("array index " + k + " is out of range or has a leading zero")
				return false
			}
			it.index, indexed = n, i
		}
		f.flat = append(f.flat, it)
	}
	if indexed >= 0 && plain >= 0 {
		f.where, f.name = "", f.fields[max(indexed, plain)].Name
		f.Invalid("mixes unindexed (" + name + ", " + name + "[]) and indexed elements")
		return false
	}
	if indexed >= 0 {
		slices.SortStableFunc(f.flat, func(a, b listItem) int { return cmp.Compare(a.index, b.index) })
		for i, it := range f.flat {
			switch {
			case it.index < i:
				f.where, f.name = "", f.fields[it.field].Name
				f.Invalid("field given more than once")
				return false
			case it.index > i:
				f.where, f.name = "", name+"["+strconv.Itoa(i)+"]"
				f.Invalid("array index " + strconv.Itoa(i) + " is missing (the indices must run 0, 1, 2, … without gaps)")
				return false
			}
		}
	}
	f.where, f.name = "", name
	return len(f.flat) > 0
}

// NextItem makes the next item of List current and reports whether there was one; after the
// last, the array's name is the current name again (for minItems and maxItems).
//
//go:noinline
func (f *Form) NextItem() bool {
	if f.err != nil || f.flatAt >= len(f.flat) {
		if f.err == nil && len(f.flat) > 0 {
			f.name, _, _ = strings.Cut(f.fields[f.flat[0].field].Name, "[")
		}
		return false
	}
	fl := f.fields[f.flat[f.flatAt].field]
	f.flatAt++
	f.where, f.name, f.cur = "", fl.Name, fl.Value
	return true
}

// Undeclared refuses the current field, which the schema does not declare, when its name, or its
// name up to the first '[', equals one of declared up to letter case
// (canonical.Decoder.Undeclared): form binders that match field names case-insensitively
// (echo's) would take it for the declared field. It also refuses a name whose brackets do not
// parse (a[b, a]b, [a]; see FormTree): binders that split brackets read it each their own way,
// and fiber's refuses the whole body. A declared name is literal, brackets and all
// (metadata[order]), and never gets here.
//
//go:noinline
func (f *Form) Undeclared(declared ...string) {
	if f.err != nil || f.relaxed {
		return
	}
	if !bracketsParse(f.Name()) {
		f.Invalid(badBrackets)
		return
	}
	n := canonical.FoldsTo(f.Name(), declared)
	if base := f.Base(); n == "" && base != f.Name() {
		n = canonical.FoldsTo(base, declared)
	}
	if n != "" {
		f.Invalid(canonical.CaseVariantReason(n))
	}
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
