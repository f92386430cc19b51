package canonical

import (
	"math"
	"strconv"
	"strings"
)

// Decoder reads one strict JSON document (RFC 8259 plus the rules in the package doc) token by
// token, for generated typed decoders. Its zero value is ready after [Decoder.Reset], and it
// stays on the caller's stack when called directly (not through func values). It allocates
// only for what it returns: one copy of the document shared by all strings without escapes,
// strings and names with escapes, and generic values (Raw, Unknown).
//
// Errors are sticky: after the first one every method is a no-op that returns a zero value or
// false, so generated code can read straight on and check [Decoder.Finish] once. The first
// error is an [*Error] whose Pointer names the value being read.
type Decoder struct {
	data  []byte
	pos   int
	depth int
	err   *Error
	// frames[i] is the open container at depth i+1 and its current member or element.
	frames [MaxDepth]frame
	// name is the current member name, unescaped (a subslice of data when it had no escapes).
	name        []byte
	nameEscaped bool
	// text is data as a string, made on the first Str: strings without escapes are substrings
	// of it, so a document's strings cost one allocation together.
	text string
	// Scratch buffers reused across Reset: unescaped text, generic canonicalization.
	buf   []byte
	spans []span
	names []byte
	tmp   []byte // sortMembers
	skip  []byte // Skip's discarded output
	// matcher matches schema patterns (Pattern); kept across Reset.
	matcher Matcher
	// textScalars: numbers and booleans may be written as strings (TextScalars); Reset clears
	// it.
	textScalars bool
	// reencoding: the values read so far are also written to reenc (Reencode).
	reencoding bool
	reenc      []byte
	// relaxed: Undeclared refuses nothing (Relax); Reset clears it.
	relaxed bool
}

type frame struct {
	// nameStart and nameEnd delimit the raw (still escaped) current member name in data.
	nameStart, nameEnd int32
	// count is the number of members or elements started so far; for arrays count-1 is the
	// current index.
	count  int32
	array  bool
	closed bool
}

// maxInput is the largest document a Decoder accepts: offsets are kept in int32.
const maxInput = math.MaxInt32

// Reset makes d read data from the start, keeping its scratch buffers.
func (d *Decoder) Reset(data []byte) {
	d.data = data
	d.pos = 0
	d.depth = 0
	d.err = nil
	d.name = nil
	d.text = ""
	d.textScalars = false
	d.relaxed = false
	d.reencoding, d.reenc = false, nil
	if len(data) > maxInput {
		d.fail(0, "document larger than 2 GiB")
	}
}

// TextScalars makes d, until the next Reset, also take a number or a boolean written as a JSON
// string holding exactly its JSON text ("42", "-1.5", "true"), for documents assembled from
// text fields, such as multipart parts named metadata[order] or accounting.class_id, whose
// values have no JSON type of their own. The value's rules are JSON's (Int64: "1.0" is 1, "1.5"
// and " 1" are errors); a plain number or boolean is still taken.
func (d *Decoder) TextScalars() { d.textScalars = true }

// Reencode makes d write, from now until the next Reset, everything it reads to a re-encoding
// that Reencoded returns: compact JSON in the document's order, member names and strings with
// RFC 8785's minimal escapes, integers ([Decoder.Int64]) as their exact digits, numbers
// ([Decoder.Float64]) and generic values ([Decoder.Raw], [Decoder.Unknown], [Decoder.Skip]) in
// their canonical form. Whatever reads the re-encoding reads the values d decoded, whichever
// spelling the document used (1.5e3 for an integer is 1500), which is what the fingerprint
// covers; the Middleware hands it to the wrapped handler in place of the body. Call it right
// after Reset, before the first read.
func (d *Decoder) Reencode() {
	d.reencoding = true
	d.reenc = make([]byte, 0, len(d.data))
}

// Reencoded returns the re-encoding of what d read since Reencode (nil without Reencode), valid
// once Finish has returned nil.
func (d *Decoder) Reencoded() []byte { return d.reenc }

// emit appends to the re-encoding.
func (d *Decoder) emit(b ...byte) {
	if d.reencoding {
		d.reenc = append(d.reenc, b...)
	}
}

// Err returns the first error so far (an *Error), or nil.
func (d *Decoder) Err() error {
	if d.err != nil {
		return d.err
	}
	return nil
}

// Failed reports whether an error has been recorded.
func (d *Decoder) Failed() bool { return d.err != nil }

// Finish checks that nothing but whitespace follows the document and returns the first error
// (an *Error), or nil.
func (d *Decoder) Finish() error {
	if d.err == nil {
		d.skipWS()
		if d.pos < len(d.data) {
			d.fail(d.pos, "unexpected data after the document")
		} else if d.depth != 0 {
			d.fail(d.pos, "unexpected end of input")
		}
	}
	return d.Err()
}

// fail records the first error at offset, naming the current value.
func (d *Decoder) fail(offset int, reason string) {
	if d.err != nil {
		return
	}
	d.err = &Error{Pointer: d.pointer(), Offset: offset, Reason: reason}
}

// pointer returns the RFC 6901 pointer of the value being read (built only on error).
func (d *Decoder) pointer() string {
	var b []byte
	for i := 0; i < d.depth; i++ {
		f := &d.frames[i]
		if f.count == 0 {
			break
		}
		b = append(b, '/')
		if f.array {
			b = strconv.AppendInt(b, int64(f.count-1), 10)
			continue
		}
		raw := d.data[f.nameStart:f.nameEnd]
		var name []byte
		name = appendUnescaped(name, raw)
		for _, c := range name {
			switch c {
			case '~':
				b = append(b, '~', '0')
			case '/':
				b = append(b, '~', '1')
			default:
				b = append(b, c)
			}
		}
	}
	return string(b)
}

// Invalid records a schema violation of the value just read (or, after EndObject, of the
// object just closed), e.g. d.Invalid("minimum is 1").
func (d *Decoder) Invalid(reason string) { d.fail(d.pos, reason) }

// Missing records that the object just closed lacks the required member name.
func (d *Decoder) Missing(name string) {
	if d.err != nil {
		return
	}
	d.fail(d.pos, "missing required member "+strconv.Quote(name))
}

// isSpace is JSON's insignificant whitespace (RFC 8259 section 2).
func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func (d *Decoder) skipWS() {
	for d.pos < len(d.data) && isSpace(d.data[d.pos]) {
		d.pos++
	}
}

// next skips whitespace and returns the next byte without consuming it; it records an error
// and returns 0 at the end of input.
func (d *Decoder) next() byte {
	if d.err != nil {
		return 0
	}
	d.skipWS()
	if d.pos >= len(d.data) {
		d.fail(d.pos, "unexpected end of input")
		return 0
	}
	return d.data[d.pos]
}

func (d *Decoder) unexpected(want string) {
	if d.pos >= len(d.data) {
		d.fail(d.pos, "unexpected end of input")
		return
	}
	c := d.data[d.pos]
	var what string
	switch {
	case c == '{':
		what = "an object"
	case c == '[':
		what = "an array"
	case c == '"':
		what = "a string"
	case c == '-' || c >= '0' && c <= '9':
		what = "a number"
	case c == 't' || c == 'f':
		what = "a boolean"
	case c == 'n':
		what = "null"
	default:
		what = "character " + strconv.QuoteRune(rune(c))
		if c >= 0x80 {
			what = "byte 0x" + strconv.FormatUint(uint64(c), 16)
		}
	}
	d.fail(d.pos, "expected "+want+", found "+what)
}

func (d *Decoder) push(array bool) bool {
	if d.depth >= MaxDepth {
		d.fail(d.pos, "nesting deeper than "+strconv.Itoa(MaxDepth))
		return false
	}
	d.frames[d.depth] = frame{array: array}
	d.depth++
	d.pos++
	return true
}

// BeginObject consumes '{' and reports whether an object was opened. Read its members with
// NextMember, then call EndObject.
func (d *Decoder) BeginObject() bool {
	if d.next() != '{' {
		if d.err == nil {
			d.unexpected("an object")
		}
		return false
	}
	d.emit('{')
	return d.push(false)
}

// NextMember advances to the next member of the open object and reports whether there is one;
// the member's name is then [Decoder.Name] and its value must be read (or skipped) before the
// next call. It returns false at the closing '}' and on error.
func (d *Decoder) NextMember() bool {
	if d.err != nil || d.depth == 0 {
		return false
	}
	f := &d.frames[d.depth-1]
	if f.array || f.closed {
		d.fail(d.pos, "internal: NextMember outside an object")
		return false
	}
	c := d.next()
	if f.count > 0 {
		switch c {
		case ',':
			d.pos++
			c = d.next()
		case '}':
			d.pos++
			f.closed = true
			d.emit('}')
			return false
		default:
			if d.err == nil {
				d.unexpected("',' or '}'")
			}
			return false
		}
	} else if c == '}' {
		d.pos++
		f.closed = true
		d.emit('}')
		return false
	}
	if c != '"' {
		if d.err == nil {
			d.unexpected("a member name")
		}
		return false
	}
	start := d.pos + 1
	s, e, escaped := d.scanString()
	if d.err != nil {
		return false
	}
	d.nameEscaped = escaped
	if escaped {
		d.buf = appendUnescaped(d.buf[:0], d.data[s:e])
		d.name = d.buf
	} else {
		d.name = d.data[s:e]
	}
	f.count++
	f.nameStart, f.nameEnd = int32(start), int32(e)
	if d.next() != ':' {
		if d.err == nil {
			d.unexpected("':'")
		}
		return false
	}
	d.pos++
	if d.reencoding {
		if f.count > 1 {
			d.reenc = append(d.reenc, ',')
		}
		d.reenc = append(appendQuotedValid(d.reenc, d.name), ':')
	}
	return true
}

// Name returns the current member's name, unescaped. The slice is valid until the next call
// of NextMember; use string(d.Name()) in a switch or map index, which does not allocate.
func (d *Decoder) Name() []byte { return d.name }

// Key returns the current member's name as a string, for map keys: like Str, it shares one
// copy of the document instead of allocating per key.
func (d *Decoder) Key() string {
	if d.nameEscaped || d.depth == 0 {
		return string(d.name)
	}
	f := &d.frames[d.depth-1]
	if d.text == "" {
		d.text = string(d.data)
	}
	return d.text[f.nameStart:f.nameEnd]
}

// EndObject closes the object opened by BeginObject after NextMember returned false.
func (d *Decoder) EndObject() { d.end(false) }

func (d *Decoder) end(array bool) {
	if d.err != nil {
		return
	}
	if d.depth == 0 || d.frames[d.depth-1].array != array || !d.frames[d.depth-1].closed {
		d.fail(d.pos, "internal: unbalanced EndObject/EndArray")
		return
	}
	d.depth--
}

// Once marks bit (0..63) of *seen as read and reports whether it was unread before; a second
// read is the error "duplicate member". Generated code passes one bit per declared property.
func (d *Decoder) Once(seen *uint64, bit uint) bool {
	if d.err != nil {
		return false
	}
	m := uint64(1) << (bit & 63)
	if *seen&m != 0 {
		d.duplicate()
		return false
	}
	*seen |= m
	return true
}

// Duplicate records that the current member's name occurred before in its object, e.g. a map
// key already present.
func (d *Decoder) Duplicate() {
	if d.err != nil || d.depth == 0 {
		return
	}
	d.duplicate()
}

func (d *Decoder) duplicate() {
	f := &d.frames[d.depth-1]
	d.fail(int(f.nameStart)-1, "duplicate member name")
}

// Reject records that the current member is not allowed (additionalProperties: false).
func (d *Decoder) Reject() {
	if d.err != nil || d.depth == 0 {
		return
	}
	f := &d.frames[d.depth-1]
	d.fail(int(f.nameStart)-1, "member not allowed by the schema")
}

// Undeclared refuses the current member, which the schema does not declare, when its name equals
// one of the object's declared names up to letter case ("Amount" beside a declared "amount"):
// encoding/json, and the binders built on it, match member names to fields that way and let
// the last one win, so such a member would set the declared field for a handler that decodes
// the body again while the fingerprint and the generated handlers hold it as another member.
// Names compare under Unicode simple case folding, as encoding/json does (so the Kelvin sign K
// folds to k). It does nothing once an error is recorded.
func (d *Decoder) Undeclared(declared ...string) {
	if d.err != nil || d.depth == 0 || len(declared) == 0 || d.relaxed {
		return
	}
	if n := FoldsTo(string(d.name), declared); n != "" {
		f := &d.frames[d.depth-1]
		d.fail(int(f.nameStart)-1, CaseVariantReason(n))
	}
}

// Relax makes d, until the next Reset, take what the refusals added since idemgen 0.1.0 to
// decoding refuse, as decoders did before them, and so reach the canonical form, and the
// fingerprint, an earlier version gave such a body: Undeclared refuses nothing (a case variant
// of a declared name is kept, or refused, as any undeclared member). The runtime decodes so
// only to find the record of a request an earlier version executed (gen.Input.Relax), never to
// run one. A refusal added later joins this list (CHANGELOG.md names each).
func (d *Decoder) Relax() { d.relaxed = true }

// FoldsTo returns the name in declared that name equals up to letter case (Unicode simple case
// folding, strings.EqualFold) without being equal to it, or "".
func FoldsTo(name string, declared []string) string {
	for _, n := range declared {
		if n != name && strings.EqualFold(n, name) {
			return n
		}
	}
	return ""
}

// CaseVariantReason is the reason a name that folds to the declared name is refused with.
func CaseVariantReason(declared string) string {
	return "name differs from the declared " + strconv.Quote(declared) + " only in letter case, which decoders that match names case-insensitively (encoding/json) would take for it: send " + strconv.Quote(declared) + " or another name"
}

// BeginArray consumes '[' and reports whether an array was opened. Read its elements with
// NextElement, then call EndArray.
func (d *Decoder) BeginArray() bool {
	if d.next() != '[' {
		if d.err == nil {
			d.unexpected("an array")
		}
		return false
	}
	d.emit('[')
	return d.push(true)
}

// NextElement advances to the next element of the open array and reports whether there is
// one, which must then be read. It returns false at the closing ']' and on error.
func (d *Decoder) NextElement() bool {
	if d.err != nil || d.depth == 0 {
		return false
	}
	f := &d.frames[d.depth-1]
	if !f.array || f.closed {
		d.fail(d.pos, "internal: NextElement outside an array")
		return false
	}
	c := d.next()
	if f.count > 0 {
		switch c {
		case ',':
			d.pos++
			if d.next() == ']' {
				f.count++ // name the missing element
				d.unexpected("a value")
				return false
			}
		case ']':
			d.pos++
			f.closed = true
			d.emit(']')
			return false
		default:
			if d.err == nil {
				d.unexpected("',' or ']'")
			}
			return false
		}
	} else if c == ']' {
		d.pos++
		f.closed = true
		d.emit(']')
		return false
	}
	if d.err != nil {
		return false
	}
	f.count++
	if f.count > 1 {
		d.emit(',')
	}
	return true
}

// EndArray closes the array opened by BeginArray after NextElement returned false.
func (d *Decoder) EndArray() { d.end(true) }

// Index returns the current element's index in the innermost open array (-1 outside one).
func (d *Decoder) Index() int {
	if d.depth == 0 || !d.frames[d.depth-1].array {
		return -1
	}
	return int(d.frames[d.depth-1].count) - 1
}

// Null consumes a null and reports true when the next value is null; otherwise it consumes
// nothing. Nullable values test it first.
func (d *Decoder) Null() bool {
	if d.next() != 'n' {
		return false
	}
	if !d.literal("null") {
		return false
	}
	d.emit('n', 'u', 'l', 'l')
	return true
}

func (d *Decoder) literal(lit string) bool {
	if len(d.data)-d.pos >= len(lit) && string(d.data[d.pos:d.pos+len(lit)]) == lit {
		d.pos += len(lit)
		return true
	}
	d.fail(d.pos, "invalid literal")
	return false
}

// Bool reads true or false.
func (d *Decoder) Bool() bool {
	switch d.next() {
	case 't':
		if d.literal("true") {
			d.emit('t', 'r', 'u', 'e')
			return true
		}
		return false
	case 'f':
		if d.literal("false") {
			d.emit('f', 'a', 'l', 's', 'e')
		}
		return false
	case '"':
		if d.textScalars {
			start := d.pos
			s, e, _ := d.scanString()
			switch string(d.data[s:e]) {
			case "true":
				d.emit('t', 'r', 'u', 'e')
				return true
			case "false":
				d.emit('f', 'a', 'l', 's', 'e')
				return false
			}
			d.fail(start, "expected a boolean (true or false), found the text "+strconv.Quote(string(d.data[s:e])))
			return false
		}
	}
	if d.err == nil {
		d.unexpected("a boolean")
	}
	return false
}

// Str reads a string value, unescaped and checked to be valid UTF-8 without lone surrogates.
// Strings without escapes share one copy of the document (made on the first call), so they
// keep that copy alive while any of them is.
func (d *Decoder) Str() string {
	if d.next() != '"' {
		if d.err == nil {
			d.unexpected("a string")
		}
		return ""
	}
	s, e, escaped := d.scanString()
	if d.err != nil {
		return ""
	}
	if d.reencoding {
		d.reenc = appendCanonicalRaw(d.reenc, d.data[s:e], escaped)
	}
	if s == e {
		return ""
	}
	if !escaped {
		if d.text == "" {
			d.text = string(d.data)
		}
		return d.text[s:e]
	}
	d.buf = appendUnescaped(d.buf[:0], d.data[s:e])
	return string(d.buf)
}

// Int64 reads a number that is an integer (schema type integer) exactly: every digit counts,
// 1.0 and 1e0 are 1, 1.5 is an error, and a value outside int64 is an error instead of being
// rounded through a float64 (docs/design.md section 3: integers kept exact).
func (d *Decoder) Int64() int64 {
	start := d.pos
	s, e := d.number()
	if d.err != nil {
		return 0
	}
	v, reason := parseInt64(d.data[s:e])
	if reason != "" {
		d.fail(start, reason)
	}
	if d.reencoding {
		d.reenc = AppendInt(d.reenc, v)
	}
	return v
}

// Float64 reads a number (schema type number). A value outside the float64 range is an error,
// and so is one the double does not hold exactly up to its shortest round-trip form
// (9007199254740993, 0.30000000000000001, 1e-400): see "Numbers" in the package doc.
func (d *Decoder) Float64() float64 {
	start := d.pos
	s, e := d.number()
	if d.err != nil {
		return 0
	}
	num := d.data[s:e]
	f, ok := parseFloat(num)
	if !ok {
		d.fail(start, "number outside the float64 range")
		return f
	}
	if !shortPlainDecimal(num) && !exactDouble(num, f) {
		d.fail(start, reasonInexact)
	}
	if d.reencoding {
		d.reenc = AppendFloat(d.reenc, f)
	}
	return f
}

// number scans a number token and returns its span.
func (d *Decoder) number() (int, int) {
	c := d.next()
	if c != '-' && (c < '0' || c > '9') {
		if c == '"' && d.textScalars {
			return d.textNumber()
		}
		if d.err == nil {
			d.unexpected("a number")
		}
		return 0, 0
	}
	s := d.pos
	e, _, ok := scanNumber(d.data, s)
	if !ok {
		d.fail(s, "malformed number")
		return 0, 0
	}
	d.pos = e
	return s, e
}

// textNumber scans a string holding a number (TextScalars) and returns the number's span.
func (d *Decoder) textNumber() (int, int) {
	start := d.pos
	s, e, escaped := d.scanString()
	if d.err != nil {
		return 0, 0
	}
	if end, _, ok := scanNumber(d.data, s); escaped || s == e || !ok || end != e {
		d.fail(start, "expected a number, found the text "+strconv.Quote(string(d.data[s:e])))
		return 0, 0
	}
	return s, e
}
