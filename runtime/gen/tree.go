package gen

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// FormTree reads an application/x-www-form-urlencoded body whose fields carry bracketed names,
// as OpenAPI's deepObject style and Stripe's, Twilio's and PHP's clients write them: nested
// objects (address[city]=Paris), maps (metadata[order]=42), arrays with indices
// (items[0][price]=p) and without (expand[]=a, or the name repeated), to any depth. It is a
// view of the Input, like Form, and reads the body as a tree in the manner of
// canonical.Decoder, so that generated code decodes a form body with the same loops as a JSON
// one:
//
//	for f.BeginObject(); f.NextMember(); {
//		switch f.Key() {
//		case "amount":
//			v.Amount = f.Scalar(&seen, 0).Int64()
//		case "metadata":
//			v.Metadata = map[string]string{}
//			for f.Field(&seen, 1).BeginObject(); f.NextMember(); {
//				v.Metadata[f.Key()] = f.Text().Str()
//			}
//			f.EndObject()
//		default:
//			f.Reject()
//		}
//	}
//	f.EndObject()
//	f.Required(seen, "amount")
//
// A name is split into its base and its bracketed segments after percent-decoding, so
// metadata%5Bk%5D is metadata[k]; a name with a bracket that is not base[seg]... with a
// non-empty base and no bracket inside a segment (a[b, a[b]c, a]b, [a], metadata[[]) is
// refused. The fields are grouped by their segments, whatever their order in the
// body: the fields sharing a segment at one depth are one member (one map entry, one array
// element). Strictness, each an *canonical.Error whose pointer is "/" and the form field's
// name: a value given twice (metadata[k]=1&metadata[k]=2), a value where the schema has an
// object or the reverse (amount[x]=1, shipping=Paris), array indices that are not 0, 1, 2, …
// without gaps (items[0]&items[2]) or not canonical decimals (items[01], items[x]), a mix of
// indexed and unindexed elements, and a field the schema does not have (Reject).
//
// Errors are sticky: after the first, NextMember and NextElement are false and reads are
// empty; Input.Err reports it. Input.FormTreeBody fingerprints the body.
type FormTree Input

// formTree is the state of a FormTree: the body's fields split into segments and sorted, and
// the stack of the objects and arrays being read.
type formTree struct {
	built   bool
	entries []formEntry
	segs    []string
	stack   []treeLevel
	cur     group
	members []group // scratch of Raw
}

// formEntry is one field: its segments segs[seg:seg+n] and its index in Input.fields.
type formEntry struct {
	seg, n, field int32
}

// group is a set of fields that agree on their segments up to depth: entries [lo, hi), of
// which the first leaves end at depth (name=value) and the others go deeper. The root group
// holds every field, at depth -1.
type group struct {
	lo, hi, leaves, depth int32
}

// treeLevel is an object or array being read: its group, the entries left, and for arrays the
// next index.
type treeLevel struct {
	parent group
	pos    int32
	depth  int32 // of the keys of the members (objects, indexed arrays), or of the values
	kind   uint8
	index  int32
}

const (
	levelObject  = iota
	levelLeaves  // array: the name repeated (tags=a&tags=b), one element per field
	levelAppend  // array: name[]=a&name[]=b, one element per field
	levelIndexed // array: name[0]…, one element per index
)

// FormTree returns the bracketed reader of the request's form body, positioned on the root
// object (BeginObject starts reading it); the body is parsed on the first call.
func (in *Input) FormTree() *FormTree {
	in.Form()
	t := &in.tree
	if !t.built {
		t.built = true
		t.entries, t.segs = t.entries[:0], t.segs[:0]
		for i, f := range in.fields {
			start := len(t.segs)
			t.segs = splitFormName(t.segs, f.Name)
			if !bracketsParse(f.Name) {
				// Every form binder reads such a name its own way, so no reading of it would be
				// the one the fingerprint covers. No declared name of a bracketed form has
				// brackets (the generator refuses one), so this refuses no field the schema has.
				(*FormTree)(in).fail(f.Name, badBrackets)
			}
			t.entries = append(t.entries, formEntry{seg: int32(start), n: int32(len(t.segs) - start), field: int32(i)})
		}
		// Stable: fields with the same segments (expand[]=a&expand[]=b) keep their body order.
		slices.SortStableFunc(t.entries, t.compare)
		t.stack = t.stack[:0]
		t.cur = group{lo: 0, hi: int32(len(t.entries)), depth: -1}
	}
	return (*FormTree)(in)
}

// FormTreeBody adds the canonical form of a form body read by FormTree to the fingerprint: its
// fields sorted by name, exactly as FormBody writes it (so a body without bracketed fields frames
// as a flat form does, and field order and percent-encoding do not count while array indices
// and the order of unindexed elements do), leaving out every field at or below one of the
// bracketed paths in exclude: fingerprint.exclude and a form-carried key ("client_ip",
// "metadata[trace_id]", "items[*][note]", where * is any index or key).
func (in *Input) FormTreeBody(exclude ...string) {
	t := &in.FormTree().tree
	var pats [][]string
	for _, x := range exclude {
		pats = append(pats, splitFormName(nil, x))
	}
	kept := in.kept[:0]
	for _, e := range t.entries { // fields of one name keep their body order
		if !t.excluded(e, pats) {
			kept = append(kept, in.fields[e.field])
		}
	}
	in.framer.FormFields(kept)
	in.kept = kept
}

// excluded reports whether a field is at or below one of the paths.
func (t *formTree) excluded(e formEntry, pats [][]string) bool {
next:
	for _, p := range pats {
		if int32(len(p)) > e.n {
			continue
		}
		for i, s := range p {
			if s != "*" && s != t.segs[e.seg+int32(i)] {
				continue next
			}
		}
		return true
	}
	return false
}

// reset forgets the parsed tree, keeping its buffers.
func (t *formTree) reset() {
	if !t.built {
		return
	}
	clear(t.segs)
	t.built = false
	t.entries, t.segs, t.stack, t.members = t.entries[:0], t.segs[:0], t.stack[:0], t.members[:0]
	t.cur = group{}
}

// badBrackets is why a form field whose name has brackets that do not parse is refused.
const badBrackets = "brackets that do not parse: a bracketed field name is name[key][…], and form binders read any other each their own way"

// bracketsParse reports whether a field name is free of brackets or is base[seg]... with a
// non-empty base and no bracket inside the base or a segment: the names every form binder
// splits alike. fiber's binder refuses a whole body with unbalanced brackets (a[b, a]b[c]),
// gin's PostFormMap reads metadata[[] as metadata's key "[", PHP turns a[b into a_b.
func bracketsParse(name string) bool {
	i := strings.IndexAny(name, "[]")
	if i < 0 {
		return true
	}
	if i == 0 || name[i] != '[' {
		return false
	}
	for i < len(name) {
		if name[i] != '[' {
			return false
		}
		j := strings.IndexAny(name[i+1:], "[]")
		if j < 0 || name[i+1+j] != ']' {
			return false
		}
		i += j + 2
	}
	return true
}

// splitFormName appends the segments of a field name to segs: "items[0][price]" is items, 0,
// price; "expand[]" is expand and ""; a name without brackets, or one whose brackets do not
// parse (bracketsParse), is itself.
func splitFormName(segs []string, name string) []string {
	i := strings.IndexByte(name, '[')
	if i < 0 || !bracketsParse(name) {
		return append(segs, name)
	}
	segs = append(segs, name[:i])
	for i < len(name) {
		j := strings.IndexByte(name[i+1:], ']')
		segs = append(segs, name[i+1:i+1+j])
		i += j + 2
	}
	return segs
}

// compare orders entries segment by segment (a shorter path first), so that the fields of one
// member are adjacent and the values of a name come before its bracketed fields.
func (t *formTree) compare(a, b formEntry) int {
	for k := int32(0); k < min(a.n, b.n); k++ {
		if c := compareSegment(t.segs[a.seg+k], t.segs[b.seg+k]); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.n, b.n)
}

// compareSegment is a total order of segments: "" ([]) first, then decimal numbers by value (so
// that indices sort numerically), then the rest bytewise.
func compareSegment(x, y string) int {
	cx, cy := segmentClass(x), segmentClass(y)
	if cx != cy {
		return cmp.Compare(cx, cy)
	}
	if cx == 1 {
		xs, ys := strings.TrimLeft(x, "0"), strings.TrimLeft(y, "0")
		if c := cmp.Compare(len(xs), len(ys)); c != 0 {
			return c
		}
		if c := strings.Compare(xs, ys); c != 0 {
			return c
		}
		return cmp.Compare(len(x), len(y))
	}
	return strings.Compare(x, y)
}

func segmentClass(s string) int {
	if s == "" {
		return 0
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 2
		}
	}
	return 1
}

func (t *formTree) key(i, depth int32) string {
	e := t.entries[i]
	return t.segs[e.seg+depth]
}

// group returns the group of the entries from lo on that share lo's segment at depth, below hi.
func (t *formTree) group(lo, hi, depth int32) group {
	k := t.key(lo, depth)
	end := lo + 1
	for end < hi && t.key(end, depth) == k {
		end++
	}
	leaves := int32(0)
	for lo+leaves < end && t.entries[lo+leaves].n == depth+1 {
		leaves++
	}
	return group{lo: lo, hi: end, leaves: leaves, depth: depth}
}

// fieldName is the name of the field of entry i as the body gave it (percent-decoded).
func (f *FormTree) fieldName(i int32) string { return f.fields[f.tree.entries[i].field].Name }

// groupName is the name of g as a form field: the first field's name up to g's segment
// ("items[0]" for the element 0 of items), "" for the root.
func (f *FormTree) groupName(g group) string {
	if g.depth < 0 || g.lo >= g.hi {
		return ""
	}
	name := f.fieldName(g.lo)
	if f.tree.entries[g.lo].n == 1 {
		return name // a literal name, or a name without brackets
	}
	k := strings.IndexByte(name, '[')
	for d := int32(0); d < g.depth; d++ {
		k += strings.IndexByte(name[k:], ']') + 1
	}
	return name[:k]
}

// fail records reason at the form field name.
func (f *FormTree) fail(name, reason string) {
	if f.err == nil {
		f.where, f.name = "", name
		f.Invalid(reason)
	}
}

// notObject is why a group with values (name=value) cannot be an object or array.
func (f *FormTree) notNested(g group) {
	name := f.fieldName(g.lo)
	if g.leaves < g.hi-g.lo {
		f.fail(name, "given both as a value and as bracketed fields ("+f.fieldName(g.lo+g.leaves)+")")
		return
	}
	f.fail(name, "must be sent as bracketed fields ("+name+"[…]=…)")
}

// push starts reading the current group as an object or array; a refused one reads as empty.
func (f *FormTree) push(lv treeLevel, ok bool) bool {
	t := &f.tree
	lv.parent = t.cur
	lv.pos = t.cur.lo
	if ok && len(t.stack) >= canonical.MaxDepth && f.err == nil {
		// A recursive schema could follow the brackets of a name as deep as the body is long.
		f.fail(f.fieldName(t.cur.lo), "nested too deeply")
	}
	if !ok || f.err != nil {
		lv.pos, ok = t.cur.hi, false
	}
	t.stack = append(t.stack, lv)
	return ok
}

// pop ends the object or array being read: its group is current again, and names the checks
// that follow (Items, Required).
func (f *FormTree) pop() {
	t := &f.tree
	if n := len(t.stack); n > 0 {
		t.cur = t.stack[n-1].parent
		t.stack = t.stack[:n-1]
	}
	if f.err == nil {
		f.where, f.name = "", f.groupName(t.cur)
	}
}

// BeginObject starts reading the current member (the root at first) as an object: its
// bracketed fields name[key]… are its members. A member given as a value (shipping=Paris) is
// refused. Always pair it with EndObject.
//
//go:noinline
func (f *FormTree) BeginObject() bool {
	g := f.tree.cur
	ok := g.leaves == 0
	if !ok && f.err == nil {
		f.notNested(g)
	}
	return f.push(treeLevel{depth: g.depth + 1, kind: levelObject}, ok)
}

// NextMember makes the next member of the object current and reports whether there was one;
// members come in the order of their keys, whatever the body's order.
//
//go:noinline
func (f *FormTree) NextMember() bool {
	t := &f.tree
	if f.err != nil || len(t.stack) == 0 {
		return false
	}
	lv := &t.stack[len(t.stack)-1]
	if lv.pos >= lv.parent.hi {
		return false
	}
	t.cur = t.group(lv.pos, lv.parent.hi, lv.depth)
	lv.pos = t.cur.hi
	if lv.depth > 0 && t.key(t.cur.lo, t.cur.depth) == "" {
		// "metadata[]" inside an object: a map key "" to this reader, no key at all to binders
		// that skip empty brackets (gin's PostFormMap), so the two would read other maps.
		f.fail(f.fieldName(t.cur.lo), "empty brackets name no member of an object (\"[]\" appends to an array): name the key")
		return false
	}
	return true
}

// Key is the current member's key: the declared name, or the map key.
//
//go:noinline
func (f *FormTree) Key() string { return f.tree.key(f.tree.cur.lo, f.tree.cur.depth) }

// EndObject ends the object BeginObject started.
//
//go:noinline
func (f *FormTree) EndObject() { f.pop() }

// Field marks bit of *seen for the declared member that is current (each member is current
// once, so it needs no duplicate check) and returns f to read its value.
//
//go:noinline
func (f *FormTree) Field(seen *uint64, bit uint) *FormTree {
	*seen |= uint64(1) << (bit & 63)
	return f
}

// Scalar is Field then Text: a declared member with one value.
//
//go:noinline
func (f *FormTree) Scalar(seen *uint64, bit uint) *FormTree {
	*seen |= uint64(1) << (bit & 63)
	return f.Text()
}

// Text makes the current member's value the one the conversions (Str, Int64, …) and checks
// read: the member must be one field name=value. Given twice, or with bracketed fields where
// the schema has a value (amount[x]=1), it is refused.
//
//go:noinline
func (f *FormTree) Text() *FormTree {
	f.cur = ""
	if f.err != nil {
		return f
	}
	g := f.tree.cur
	switch {
	case g.leaves == 1 && g.hi-g.lo == 1:
		f.where, f.name = "", f.fieldName(g.lo)
		f.cur = f.fields[f.tree.entries[g.lo].field].Value
	case g.leaves > 1:
		f.fail(f.fieldName(g.lo), "field given more than once")
	default:
		f.fail(f.fieldName(g.lo+g.leaves), "field not allowed by the schema")
	}
	return f
}

// Unset reports whether the current member is one field with an empty value (metadata=):
// "unset" for a member declared anyOf [X, enum [""]] (canonical.Unsettable).
//
//go:noinline
func (f *FormTree) Unset() bool {
	g := f.tree.cur
	return f.err == nil && g.leaves == 1 && g.hi-g.lo == 1 && f.fields[f.tree.entries[g.lo].field].Value == ""
}

// BeginArray starts reading the current member as an array. Its elements are, in one of three
// forms that a member cannot mix: the name repeated (tags=a&tags=b) or with empty brackets
// (expand[]=a&expand[]=b), one value each, in body order; or indexed (items[0][price]=…,
// items[1]=…), in the order of the indices, which must be 0, 1, 2, … without gaps, written as
// decimals without leading zeros. Always pair it with EndArray.
//
//go:noinline
func (f *FormTree) BeginArray() bool {
	t := &f.tree
	g := t.cur
	if f.err != nil {
		return f.push(treeLevel{}, false)
	}
	switch {
	case g.leaves == g.hi-g.lo:
		return f.push(treeLevel{depth: g.depth, kind: levelLeaves}, true)
	case g.leaves > 0:
		f.notNested(g)
		return f.push(treeLevel{}, false)
	case t.key(g.lo, g.depth+1) != "":
		return f.push(treeLevel{depth: g.depth + 1, kind: levelIndexed}, true)
	}
	for i := g.lo; i < g.hi; i++ {
		switch {
		case t.key(i, g.depth+1) != "":
			f.fail(f.fieldName(i), "mixes unindexed ("+f.groupName(g)+"[]) and indexed elements")
		case t.entries[i].n != g.depth+2:
			f.fail(f.fieldName(i), "an element without an index cannot have bracketed fields: number the elements ("+f.groupName(g)+"[0][…])")
		}
	}
	return f.push(treeLevel{depth: g.depth + 1, kind: levelAppend}, f.err == nil)
}

// NextElement makes the next element of the array current and reports whether there was one;
// an index out of sequence is refused here.
//
//go:noinline
func (f *FormTree) NextElement() bool {
	t := &f.tree
	if f.err != nil || len(t.stack) == 0 {
		return false
	}
	lv := &t.stack[len(t.stack)-1]
	if lv.pos >= lv.parent.hi {
		return false
	}
	if lv.kind != levelIndexed {
		t.cur = group{lo: lv.pos, hi: lv.pos + 1, leaves: 1, depth: lv.depth}
		lv.pos++
		return true
	}
	g := t.group(lv.pos, lv.parent.hi, lv.depth)
	if k := t.key(g.lo, g.depth); !isIndex(k, lv.index) {
		switch {
		case segmentClass(k) != 1:
			f.fail(f.fieldName(g.lo), "["+k+"] is not an array index (0, 1, 2, …)")
		case len(k) > 1 && k[0] == '0':
			f.fail(f.fieldName(g.lo), "array index "+k+" has a leading zero")
		default:
			f.fail(f.groupName(lv.parent)+"["+strconv.Itoa(int(lv.index))+"]", "array index "+strconv.Itoa(int(lv.index))+" is missing (the indices of "+f.fieldName(g.lo)+" must run 0, 1, 2, … without gaps)")
		}
		return false
	}
	t.cur = g
	lv.pos = g.hi
	lv.index++
	return true
}

// isIndex reports whether k is the canonical decimal of i.
func isIndex(k string, i int32) bool {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return false
	}
	n := int64(0)
	for j := 0; j < len(k); j++ {
		c := k[j]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int64(c-'0')
	}
	return n == int64(i)
}

// EndArray ends the array BeginArray started.
//
//go:noinline
func (f *FormTree) EndArray() { f.pop() }

// Raw returns the canonical JSON (RFC 8785) of the current member, for a member the schema
// does not type (oneOf/anyOf without an unset sentinel, a free-form object, no schema): one
// value is a string, several values of the name (or name[]=…) an array of strings, bracketed
// fields an object whose members are read the same way. Keys stay strings: without a schema,
// items[0] is the member "0".
//
//go:noinline
func (f *FormTree) Raw() []byte {
	if f.err != nil {
		return nil
	}
	b := f.appendRaw(nil, f.tree.cur, 0)
	if f.err != nil {
		return nil
	}
	return b
}

func (f *FormTree) appendRaw(b []byte, g group, level int) []byte {
	t := &f.tree
	value := func(i int32) string { return f.fields[t.entries[i].field].Value }
	n := g.hi - g.lo
	switch {
	case level > canonical.MaxDepth:
		f.fail(f.fieldName(g.lo), "nested too deeply")
		return b
	case g.leaves == 1 && n == 1:
		return canonical.AppendString(b, value(g.lo))
	case g.leaves == n:
		b = append(b, '[')
		for i := g.lo; i < g.hi; i++ {
			if i > g.lo {
				b = append(b, ',')
			}
			b = canonical.AppendString(b, value(i))
		}
		return append(b, ']')
	case g.leaves > 0:
		f.notNested(g)
		return b
	}
	d := g.depth + 1
	if t.key(g.lo, d) == "" {
		b = append(b, '[')
		for i := g.lo; i < g.hi; i++ {
			switch {
			case t.key(i, d) != "":
				f.fail(f.fieldName(i), "mixes unindexed ("+f.groupName(g)+"[]) and bracketed fields")
				return b
			case t.entries[i].n != d+1:
				f.fail(f.fieldName(i), "an element without an index cannot have bracketed fields")
				return b
			}
			if i > g.lo {
				b = append(b, ',')
			}
			b = canonical.AppendString(b, value(i))
		}
		return append(b, ']')
	}
	// An object: its members in RFC 8785 order (UTF-16 code units), not the order of the tree.
	mark := len(t.members)
	for i := g.lo; i < g.hi; {
		m := t.group(i, g.hi, d)
		t.members = append(t.members, m)
		i = m.hi
	}
	ms := t.members[mark:]
	slices.SortFunc(ms, func(x, y group) int { return canonical.Compare(t.key(x.lo, d), t.key(y.lo, d)) })
	b = append(b, '{')
	for i := mark; i < len(t.members); i++ {
		m := t.members[i]
		if i > mark {
			b = append(b, ',')
		}
		b = canonical.AppendString(b, t.key(m.lo, d))
		b = append(b, ':')
		b = f.appendRaw(b, m, level+1)
	}
	t.members = t.members[:mark]
	return append(b, '}')
}

// Unknown keeps the current member, which the open object does not declare, in *m (sorted by
// name, as canonical.Decoder.Unknown keeps JSON members), its value read by Raw; a key that
// equals one of declared up to letter case is refused (Undeclared).
//
//go:noinline
func (f *FormTree) Unknown(m *canonical.Members, declared ...string) {
	f.Undeclared(declared...)
	k := f.Key()
	v := f.Raw()
	if f.err != nil {
		return
	}
	i, _ := slices.BinarySearchFunc(*m, k, func(x canonical.Member, n string) int { return canonical.Compare(x.Name, n) })
	*m = slices.Insert(*m, i, canonical.Member{Name: k, Value: v})
}

// Undeclared refuses the current member, which the object does not declare, when its key equals
// one of declared up to letter case (canonical.Decoder.Undeclared): form binders that match
// field names case-insensitively (echo's) would take it for the declared field. (A name whose
// brackets do not parse never gets here: FormTree refuses it.)
//
//go:noinline
func (f *FormTree) Undeclared(declared ...string) {
	if f.err != nil || len(declared) == 0 {
		return
	}
	if n := canonical.FoldsTo(f.Key(), declared); n != "" && !f.relaxed {
		f.fail(f.fieldName(f.tree.cur.lo), canonical.CaseVariantReason(n))
	}
}

// Reject refuses the current member: the object is closed (additionalProperties: false) and does
// not declare it.
//
//go:noinline
func (f *FormTree) Reject() {
	f.fail(f.fieldName(f.tree.cur.lo), "field not allowed by the schema")
}

// Required checks, after EndObject, that the object's required members have been read: names[i]
// is the member of bit i of seen. The error names the missing field (items[1][price]).
func (f *FormTree) Required(seen uint64, names ...string) {
	for i, name := range names {
		if seen&(1<<(uint(i)&63)) == 0 {
			if p := f.groupName(f.tree.cur); p != "" {
				name = p + "[" + name + "]"
			}
			f.fail(name, "missing required field")
			return
		}
	}
}
