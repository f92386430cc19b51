package gen

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// File is a file part of a multipart/form-data body (a property of type string, format binary):
// what the client sent, whole. Its fingerprint is its content hash with its name and type
// (AppendFile), not its bytes.
type File struct {
	// Filename is the part's filename parameter as sent ("" when none).
	Filename string
	// ContentType is the part's Content-Type header as sent ("" when none: HTTP then means
	// text/plain for a form field; idemgen does not guess).
	ContentType string
	// Data is the part's content.
	Data []byte
}

// AppendFile appends the canonical form (RFC 8785) of a file part to b: an object with its
// content_type, filename, the lower-case hex SHA-256 of its bytes and its size, so two uploads
// of the same bytes under the same name and type are one request and any other byte makes
// another.
func AppendFile(b []byte, f *File) []byte {
	sum := sha256.Sum256(f.Data)
	o, b := canonical.WriteObject(b, nil)
	b = o.String(b, `"content_type":`, f.ContentType)
	b = o.String(b, `"filename":`, f.Filename)
	b = o.String(b, `"sha256":`, hex.EncodeToString(sum[:]))
	b = o.Int(b, `"size":`, int64(len(f.Data)))
	return o.End(b)
}

// part is one part of a multipart body; reencoded is the re-encoding of a JSON part
// (Input.Reencode).
type part struct {
	name, filename, contentType string
	data, reencoded             []byte
	// sent: the part stands for these nested text parts of one member (Multipart's nested
	// names), in body order, data being their values assembled as a JSON document of strings.
	sent []part
}

// multipartState is the multipart body being read (Input.Multipart).
type multipartState struct {
	parts    []part
	mpParsed bool
	mpNext   int
	// pdec decodes the JSON part being read; pjson says it has one to finish.
	pdec  canonical.Decoder
	pjson bool
}

// Multipart reads a multipart/form-data body part by part, in body order: Next, then a switch
// on Name, then Text (a field's value, converted and checked like a form field's: Str, Int64,
// …), Item (one more item of an array field), File or FileItem (a file part), JSON (a part
// holding JSON, decoded by the struct decoders), Reject for an undeclared part, and Required
// after the loop. Errors are *canonical.Error whose pointer is "/" and the part's name
// (followed by the pointer inside a JSON part); a part over the cap is a *BodyError with
// status 413. It is a view of the Input.
type Multipart Input

// Multipart returns the multipart reader of the request, parsing the body on the first call:
// the boundary comes from the request's Content-Type; every part must have a form-data
// Content-Disposition with a name; a part larger than partLimit bytes is refused (413).
//
// nested names the body's object, map and array members that may also arrive as one text part
// per nested field, as SDK generators write them: bracketed (metadata[order], items[0][price],
// tags[]) or dotted (metadata.order, accounting.class_id). The parts of each such member are
// read as one part under the member's name, at the place of the first of them, whose JSON (JSON)
// holds their values as strings: arrays where the segments below a field are the indices 0, 1,
// 2, … without gaps (in any order) or empty (tags[]=a&tags[]=b, in body order), objects
// otherwise (so items[0]&items[2] is an object, which an array member's decoder refuses, and a
// map member whose keys are exactly 0, 1, … cannot be sent this way: send it as a JSON part).
// Its decoder takes numbers and booleans written as text (canonical.Decoder.TextScalars), so
// the member is decoded and checked by its JSON decoder, as a JSON part of the same value would
// be, and fingerprinted as that value. Refused (400, naming the part): a file among them, text that is not UTF-8, a
// value given twice, a value where other parts have nested fields, an empty segment before the
// last, [] beside indices or keys; a part named after the member beside its nested parts is
// that part given twice.
func (in *Input) Multipart(partLimit int64, nested ...string) *Multipart {
	if !in.mpParsed {
		in.mpParsed = true
		in.mpNext = 0
		err := in.parseMultipart(partLimit)
		if err == nil && len(nested) > 0 {
			in.parts, err = groupNested(in.parts, nested)
		}
		if err != nil && in.err == nil {
			in.err = err
		}
	}
	return (*Multipart)(in)
}

func (in *Input) parseMultipart(limit int64) error {
	clear(in.parts)
	in.parts = in.parts[:0]
	_, params, err := mime.ParseMediaType(in.Request.Header.Get("Content-Type"))
	boundary := params["boundary"]
	if err != nil || boundary == "" {
		return &BodyError{Reason: "multipart body without a boundary in its Content-Type"}
	}
	r := multipart.NewReader(bytes.NewReader(in.Body), boundary)
	for {
		p, err := r.NextRawPart() // raw: Content-Transfer-Encoding is not applied (RFC 7578 section 4.7)
		// Only a bare io.EOF is the closing delimiter: a wrapped one is a body cut short.
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &BodyError{Reason: "malformed multipart body: " + err.Error()}
		}
		if p.FormName() == "" {
			return &BodyError{Reason: "a multipart part without a form-data Content-Disposition name"}
		}
		data, err := io.ReadAll(io.LimitReader(p, limit+1))
		if err != nil {
			return &BodyError{Reason: "malformed multipart body: " + err.Error()}
		}
		if int64(len(data)) > limit {
			return &BodyError{At: "/" + pointerToken(p.FormName()), Status: http.StatusRequestEntityTooLarge,
				Reason: "part " + strconv.Quote(p.FormName()) + " is larger than the limit of " + strconv.FormatInt(limit, 10) + " bytes per part (limits.part)"}
		}
		in.parts = append(in.parts, part{name: p.FormName(), filename: p.FileName(), contentType: p.Header.Get("Content-Type"), data: data})
	}
}

// Next makes the next part current and reports whether there was one; it stops at the first
// refused part (a JSON part is finished first).
//
//go:noinline
func (m *Multipart) Next() bool {
	m.finishJSON()
	if m.err != nil || m.mpNext >= len(m.parts) {
		return false
	}
	m.mpNext++
	p := &m.parts[m.mpNext-1]
	m.where, m.name, m.cur, m.present = "", pointerToken(p.name), "", true
	return true
}

// Name is the current part's name.
//
//go:noinline
func (m *Multipart) Name() string { return m.parts[m.mpNext-1].name }

// Text marks bit of *seen as read for the declared text field named Name (a part given twice is
// refused) and makes its value current for the conversion; the value must be UTF-8.
//
//go:noinline
func (m *Multipart) Text(seen *uint64, bit uint) *Multipart {
	m.once(seen, bit)
	m.text()
	return m
}

// Item marks bit of *seen as read for the array field named Name (each part is one item, in
// body order) and makes its value current.
//
//go:noinline
func (m *Multipart) Item(seen *uint64, bit uint) *Multipart {
	*seen |= uint64(1) << (bit & 63)
	m.text()
	return m
}

func (m *Multipart) text() {
	p := &m.parts[m.mpNext-1]
	if !utf8.Valid(p.data) {
		m.Invalid("field value is not valid UTF-8")
	}
	m.cur = string(p.data)
}

func (m *Multipart) once(seen *uint64, bit uint) {
	b := uint64(1) << (bit & 63)
	if *seen&b != 0 {
		m.Invalid("part given more than once")
	}
	*seen |= b
}

// File marks bit of *seen as read for the declared file part named Name and returns it.
//
//go:noinline
func (m *Multipart) File(seen *uint64, bit uint) File {
	m.once(seen, bit)
	return m.file()
}

// FileItem marks bit of *seen as read for the array of files named Name and returns one more.
//
//go:noinline
func (m *Multipart) FileItem(seen *uint64, bit uint) File {
	*seen |= uint64(1) << (bit & 63)
	return m.file()
}

func (m *Multipart) file() File {
	p := &m.parts[m.mpNext-1]
	return File{Filename: p.filename, ContentType: p.contentType, Data: p.data}
}

// JSON marks bit of *seen as read for the declared JSON part named Name and returns a strict
// decoder on its content for the struct decoders; its errors are reported under the part's
// name when the next part is read.
//
//go:noinline
func (m *Multipart) JSON(seen *uint64, bit uint) *canonical.Decoder {
	m.once(seen, bit)
	p := &m.parts[m.mpNext-1]
	m.pdec.Reset(p.data)
	m.pdec.SetMatcher(m.m)
	if m.relaxed {
		m.pdec.Relax()
	}
	if p.sent != nil {
		m.pdec.TextScalars()
	}
	if m.reencode {
		m.pdec.Reencode()
	}
	m.pjson = true
	return &m.pdec
}

// Raw marks bit of *seen as read for a declared schema-less part (any value, a oneOf or anyOf)
// and returns its value as canonical JSON: the part's JSON when its Content-Type is JSON, else
// its text as a JSON string. A file (a part with a filename, or bytes that are not UTF-8) has
// no JSON form and is refused: only a property of type string, format binary takes files.
//
//go:noinline
func (m *Multipart) Raw(seen *uint64, bit uint) []byte {
	m.once(seen, bit)
	p := &m.parts[m.mpNext-1]
	mt, _, _ := mime.ParseMediaType(p.contentType)
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		b, err := canonical.AppendCanonical(nil, p.data)
		var ce *canonical.Error
		if errors.As(err, &ce) && m.err == nil {
			m.err = &canonical.Error{Pointer: "/" + m.name + ce.Pointer, Offset: ce.Offset, Reason: "in part " + strconv.Quote(p.name) + ": " + ce.Reason}
		}
		p.reencoded = b // what the fingerprint covers; a handler that reads the part gets it too
		return b
	case p.filename == "" && utf8.Valid(p.data):
		return canonical.AppendString(nil, string(p.data))
	}
	m.Invalid("is a file, which fits only a property of type string, format binary (a JSON part needs Content-Type: application/json)")
	return nil
}

// finishJSON reports the error of the JSON part just read, under the part's name.
func (m *Multipart) finishJSON() {
	if !m.pjson {
		return
	}
	m.pjson = false
	err := m.pdec.Finish()
	var ce *canonical.Error
	if err == nil && m.reencode {
		m.parts[m.mpNext-1].reencoded = m.pdec.Reencoded()
	}
	if err == nil || m.err != nil {
		return
	}
	if errors.As(err, &ce) {
		p := &m.parts[m.mpNext-1]
		if p.sent != nil {
			// The document was assembled here: its offsets are no place in the body.
			m.err = &canonical.Error{Pointer: "/" + m.name + ce.Pointer, Offset: -1,
				Reason: "in the nested parts of " + strconv.Quote(p.name) + ": " + ce.Reason}
			return
		}
		m.err = &canonical.Error{Pointer: "/" + m.name + ce.Pointer, Offset: ce.Offset,
			Reason: "in part " + strconv.Quote(p.name) + ": " + ce.Reason}
		return
	}
	m.err = err
}

// Reject refuses the current part: the schema is closed and does not declare it.
//
//go:noinline
func (m *Multipart) Reject() { m.Invalid("part not allowed by the schema") }

// Unknown keeps an undeclared part of an open schema in *members for the fingerprint, as the
// JSON decoder keeps undeclared members: a text part (no filename, UTF-8) as a JSON string, any
// other as its file object (AppendFile). A name given twice is refused, and so is one that
// equals one of declared up to letter case (canonical.Decoder.Undeclared).
//
//go:noinline
func (m *Multipart) Unknown(members *canonical.Members, declared ...string) {
	if m.err != nil {
		return
	}
	p := &m.parts[m.mpNext-1]
	if n := canonical.FoldsTo(p.name, declared); n != "" && !m.relaxed {
		m.Invalid(canonical.CaseVariantReason(n))
		return
	}
	i, found := slices.BinarySearchFunc(*members, p.name, func(x canonical.Member, n string) int {
		return canonical.Compare(x.Name, n)
	})
	if found {
		m.Invalid("part given more than once")
		return
	}
	var v []byte
	if p.filename == "" && utf8.Valid(p.data) {
		v = canonical.AppendString(nil, string(p.data))
	} else {
		f := m.file()
		v = AppendFile(nil, &f)
	}
	*members = slices.Insert(*members, i, canonical.Member{Name: p.name, Value: v})
}

// Required checks, after the last part, that the required parts have been read: names[i] is
// the part of bit i of seen.
func (m *Multipart) Required(seen uint64, names ...string) {
	m.finishJSON()
	for i, name := range names {
		if seen&(1<<(uint(i)&63)) == 0 && m.err == nil {
			m.name = pointerToken(name)
			m.Invalid("missing required part")
			return
		}
	}
}

// End finishes the last part.
func (m *Multipart) End() { m.finishJSON() }

// pointerToken escapes a part's name as a JSON pointer token (RFC 6901: "~" as "~0", "/" as
// "~1"), so that an error's pointer names the part even when its name has a slash.
func pointerToken(name string) string {
	if !strings.ContainsAny(name, "~/") {
		return name
	}
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}
