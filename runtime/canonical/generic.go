package canonical

import (
	"slices"
	"strconv"
	"strings"
	"sync"
)

// AppendCanonical appends the RFC 8785 canonical form of the JSON document data to b. The
// input must be strict (see the package doc); otherwise it returns b unchanged and an *Error.
// This is the generic canonicalizer for schema-less bodies; generated code uses typed
// canonicalizers and [Decoder.Raw] instead.
func AppendCanonical(b, data []byte) ([]byte, error) {
	return AppendCanonicalExcluding(b, data, nil)
}

// AppendCanonicalExcluding is AppendCanonical leaving out the values that ex names.
func AppendCanonicalExcluding(b, data []byte, ex *Exclusion) ([]byte, error) {
	d := decoderPool.Get().(*Decoder)
	d.Reset(data)
	n := len(b)
	b = d.appendValue(b, ex)
	err := d.Finish()
	d.Reset(nil) // keep the scratch buffers, not the document
	decoderPool.Put(d)
	if err != nil {
		return b[:n], err
	}
	return b, nil
}

// decoderPool keeps Decoders with grown scratch buffers for the generic canonicalizer.
var decoderPool = sync.Pool{New: func() any { return new(Decoder) }}

// Raw reads any value and returns its canonical form in a new slice. Generated code stores it
// for oneOf/anyOf and schema-less values, so the handler sees the very text that is
// fingerprinted (a number a double does not hold exactly, such as 9007199254740993, is refused
// rather than rounded: see "Numbers" in the package doc).
func (d *Decoder) Raw() []byte {
	if d.next() == 0 {
		return nil
	}
	b := d.generic(nil)
	if d.err != nil {
		return nil
	}
	return b
}

// AppendRaw reads any value and appends its canonical form to b.
func (d *Decoder) AppendRaw(b []byte) []byte {
	n := len(b)
	b = d.generic(b)
	if d.err != nil {
		return b[:n]
	}
	return b
}

// Skip reads and checks any value, discarding it (from the fingerprint: a re-encoding keeps it).
func (d *Decoder) Skip() {
	d.skip = d.generic(d.skip[:0])
}

// generic appends the canonical form of the next value to b, and to the re-encoding
// (Reencode), which the members and elements inside it must not write to on their own.
func (d *Decoder) generic(b []byte) []byte {
	if !d.reencoding {
		return d.appendValue(b, nil)
	}
	n := len(b)
	d.reencoding = false
	b = d.appendValue(b, nil)
	d.reencoding = true
	if d.err == nil {
		d.reenc = append(d.reenc, b[n:]...)
	}
	return b
}

// Unknown reads the value of the current member, which the schema does not declare, and keeps
// it in *m for the fingerprint; a name already in *m is the error "duplicate member name", and
// one that equals a name in declared up to letter case is refused (Undeclared).
func (d *Decoder) Unknown(m *Members, declared ...string) {
	d.Undeclared(declared...)
	if d.err != nil {
		return
	}
	nm := d.Key()
	i, found := slices.BinarySearchFunc(*m, nm, func(x Member, n string) int {
		return compare16(x.Name, n)
	})
	if found {
		d.duplicate()
		return
	}
	v := d.Raw()
	if d.err != nil {
		return
	}
	*m = slices.Insert(*m, i, Member{Name: nm, Value: v})
}

// span is one member written by appendObject, for sorting.
type span struct {
	nameOff, nameLen int // decoded name in d.names
	start, end       int // "name":value in the output
	rawName          int32
	rawNameEnd       int32
	excluded         bool
}

// appendValue appends the canonical form of the next value, which it consumes.
func (d *Decoder) appendValue(b []byte, ex *Exclusion) []byte {
	switch c := d.next(); c {
	case 0:
	case '{':
		return d.appendObject(b, ex)
	case '[':
		return d.appendArray(b, ex)
	case '"':
		s, e, escaped := d.scanString()
		if d.err == nil {
			b = appendCanonicalRaw(b, d.data[s:e], escaped)
		}
	case 't':
		if d.literal("true") {
			b = append(b, "true"...)
		}
	case 'f':
		if d.literal("false") {
			b = append(b, "false"...)
		}
	case 'n':
		if d.literal("null") {
			b = append(b, "null"...)
		}
	default:
		if c != '-' && (c < '0' || c > '9') {
			d.unexpected("a value")
			return b
		}
		s := d.pos
		e, frac, ok := scanNumber(d.data, s)
		if !ok {
			d.fail(s, "malformed number")
			return b
		}
		d.pos = e
		num := d.data[s:e]
		// Integers of up to 15 digits are exact doubles and ECMAScript prints their digits.
		if !frac && len(num) <= 15 {
			if len(num) == 2 && num[0] == '-' && num[1] == '0' {
				return append(b, '0')
			}
			return append(b, num...)
		}
		if out, ok := appendNumberText(b, num); ok {
			return out
		}
		f, ok := parseFloat(num)
		if !ok {
			d.fail(s, "number outside the float64 range")
			return b
		}
		// The double's shortest digits are both the exactness check (exactDouble's rule) and,
		// laid out as ECMAScript does, the canonical form (what AppendFloat would compute again).
		digits, n, point := shortestDigits(f)
		if (f == 0 || significantDigits(num) > 17) && !sameDecimal(num, digits[:n], point) {
			d.fail(s, reasonInexact)
			return b
		}
		if n == 0 {
			return append(b, '0')
		}
		if f < 0 {
			b = append(b, '-')
		}
		b = appendDigits(b, digits[:n], point)
	}
	return b
}

func (d *Decoder) appendObject(b []byte, ex *Exclusion) []byte {
	if !d.push(false) {
		return b
	}
	objStart := len(b) + 1
	b = append(b, '{')
	spanBase, nameBase := len(d.spans), len(d.names)
	sorted, excluded := true, false
	for d.NextMember() {
		f := &d.frames[d.depth-1]
		child := ex.member(d.name)
		sp := span{
			nameOff: len(d.names), nameLen: len(d.name),
			rawName: f.nameStart, rawNameEnd: f.nameEnd,
		}
		d.names = append(d.names, d.name...)
		memberStart := len(b)
		b = Comma(b, objStart)
		sp.start = len(b)
		b = appendQuotedValid(b, d.name)
		b = append(b, ':')
		b = d.appendValue(b, child)
		if d.err != nil {
			break
		}
		if child != nil && child.leaf {
			b = b[:memberStart]
			sp.start, sp.excluded, excluded = memberStart, true, true
		}
		sp.end = len(b)
		if n := len(d.spans); sorted && n > spanBase {
			switch compare16(d.nameOf(d.spans[n-1]), d.nameOf(sp)) {
			case 0:
				d.duplicate()
			case 1:
				sorted = false
			}
		}
		d.spans = append(d.spans, sp)
	}
	if d.err == nil && !sorted {
		b = d.sortMembers(b, objStart, d.spans[spanBase:], excluded)
	}
	d.spans, d.names = d.spans[:spanBase], d.names[:nameBase]
	d.EndObject()
	return append(b, '}')
}

func (d *Decoder) nameOf(sp span) []byte { return d.names[sp.nameOff : sp.nameOff+sp.nameLen] }

// sortMembers rewrites the members written from objStart in UTF-16 name order, refusing
// duplicate names (excluded members included: they are still part of what the handler sees).
func (d *Decoder) sortMembers(b []byte, objStart int, spans []span, excluded bool) []byte {
	less := func(x, y span) int { return compare16(d.nameOf(x), d.nameOf(y)) }
	if len(spans) <= 12 {
		for i := 1; i < len(spans); i++ {
			for j := i; j > 0 && less(spans[j], spans[j-1]) < 0; j-- {
				spans[j], spans[j-1] = spans[j-1], spans[j]
			}
		}
	} else {
		slices.SortFunc(spans, less)
	}
	for i := 1; i < len(spans); i++ {
		if less(spans[i-1], spans[i]) == 0 {
			f := &d.frames[d.depth-1]
			f.nameStart, f.nameEnd = spans[i].rawName, spans[i].rawNameEnd
			d.duplicate()
			return b
		}
	}
	d.tmp = append(d.tmp[:0], b[objStart:]...)
	b = b[:objStart]
	for _, sp := range spans {
		if sp.excluded {
			continue
		}
		b = Comma(b, objStart)
		b = append(b, d.tmp[sp.start-objStart:sp.end-objStart]...)
	}
	return b
}

func (d *Decoder) appendArray(b []byte, ex *Exclusion) []byte {
	if !d.push(true) {
		return b
	}
	arrStart := len(b) + 1
	b = append(b, '[')
	for d.NextElement() {
		child := ex.element(d.Index())
		elemStart := len(b)
		b = Comma(b, arrStart)
		b = d.appendValue(b, child)
		if child != nil && child.leaf {
			b = b[:elemStart]
		}
	}
	d.EndArray()
	return append(b, ']')
}

// Exclusion is a compiled set of fingerprint.exclude JSON pointers (RFC 6901) for the generic
// canonicalizer, where a "*" token matches every member or element. An excluded member is
// left out of its object; an excluded element is left out of its array. The nil *Exclusion
// excludes nothing. Generated typed canonicalizers resolve exclusions at generation time and
// need none.
type Exclusion struct {
	leaf  bool
	names map[string]*Exclusion
	any   *Exclusion
}

// NewExclusion compiles pointers such as "/client_timestamp", "/metadata/trace_id" and
// "/lines/*/note". It returns an error for a pointer that is not "" and does not start with
// '/', or that has an invalid '~' escape. The pointer "" (the whole document) is refused too.
func NewExclusion(pointers ...string) (*Exclusion, error) {
	root := &Exclusion{}
	for _, p := range pointers {
		if p == "" || p[0] != '/' {
			return nil, &Error{Pointer: p, Offset: -1, Reason: "exclusion pointer must start with '/'"}
		}
		n := root
		for _, tok := range strings.Split(p[1:], "/") {
			if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(tok, "~0", ""), "~1", ""), "~") {
				return nil, &Error{Pointer: p, Offset: -1, Reason: "invalid '~' escape in pointer"}
			}
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			var c *Exclusion
			if tok == "*" {
				if n.any == nil {
					n.any = &Exclusion{}
				}
				c = n.any
			} else {
				if n.names == nil {
					n.names = map[string]*Exclusion{}
				}
				if c = n.names[tok]; c == nil {
					c = &Exclusion{}
					n.names[tok] = c
				}
			}
			n = c
		}
		n.leaf = true
	}
	return root, nil
}

// member returns the exclusion node for a member name, nil when nothing below is excluded.
func (x *Exclusion) member(name []byte) *Exclusion {
	if x == nil {
		return nil
	}
	named := x.names[string(name)]
	return mergeNodes(named, x.any)
}

// element returns the exclusion node for an array index.
func (x *Exclusion) element(i int) *Exclusion {
	if x == nil {
		return nil
	}
	var buf [20]byte
	named := x.names[string(strconv.AppendInt(buf[:0], int64(i), 10))]
	return mergeNodes(named, x.any)
}

// mergeNodes combines a named child with the "*" child when both exist. It allocates, but
// only for pointer sets that overlap like "/a/*/x" with "/a/b/y".
func mergeNodes(a, b *Exclusion) *Exclusion {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	m := &Exclusion{leaf: a.leaf || b.leaf, any: mergeNodes(a.any, b.any)}
	if len(a.names)+len(b.names) > 0 {
		m.names = make(map[string]*Exclusion, len(a.names)+len(b.names))
		for k, v := range a.names {
			m.names[k] = v
		}
		for k, v := range b.names {
			m.names[k] = mergeNodes(m.names[k], v)
		}
	}
	return m
}
