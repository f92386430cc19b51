package gen

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"mime"
	"strings"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// A handler that decodes a body again with its own decoder must read what the strict decoder
// read, or the fingerprint does not describe what the handler does: encoding/json matches
// member names case-insensitively and the last one wins, refuses 1.5e3 for an int64, and
// http.Request.ParseForm reads "a=1;b=2" as one field less. So the Middleware hands the wrapped
// handler a re-encoding of the body as the decoder read it, in place of the body as sent: every
// member and field the decoder accepted (those left out of the fingerprint too), in their
// order, each value in the one spelling every decoder reads alike. Member names that equal a
// declared name up to letter case are refused before (canonical.Decoder.Undeclared), so no
// decoder can take one for the other.

// Reencode asks the decode function that runs next to keep a re-encoding of the body it reads
// (ReencodedBody). Call it after Reset, before the decode function.
func (in *Input) Reencode() { in.reencode = true }

// ReencodedBody returns the body a handler that decodes the request again reads in place of the
// body as sent, after a decode function that returned no error, and the Content-Type it goes
// with ("" to keep the request's):
//
//   - a JSON body read by JSON: the decoder's re-encoding (canonical.Decoder.Reencode): compact,
//     in the body's order, strings minimally escaped, integers as their exact digits, numbers
//     and schema-less values in their canonical form (RFC 8785);
//   - a form read by Form or FormTree: its fields in body order, each name and value
//     percent-encoded alike (brackets left as they are), so that url.ParseQuery gives exactly
//     the fields the decoder read;
//   - a multipart body read by Multipart: its parts in body order with their name, filename and
//     Content-Type only (no Content-Transfer-Encoding, which mime/multipart would apply and the
//     fingerprint does not), JSON parts re-encoded like a JSON body, the nested text parts of a
//     member (metadata[order]) as sent, together at the place of the first; the boundary is
//     kept unless a part's bytes contain it;
//   - otherwise the body as sent: one fingerprinted as raw bytes (fingerprint.body: raw, a
//     signed body; media types without a decoder), none, or one a hand-written decode function
//     read by itself.
func (in *Input) ReencodedBody() (body []byte, contentType string) {
	switch {
	case !in.reencode || in.rawFramed || len(in.Body) == 0:
		return in.Body, ""
	case in.json:
		return in.dec.Reencoded(), ""
	case in.mpParsed:
		return in.reencodeMultipart()
	case in.parsed:
		return appendFormFields(make([]byte, 0, len(in.Body)), in.fields), ""
	}
	return in.Body, ""
}

// appendFormFields writes fields as an application/x-www-form-urlencoded body in their order:
// every byte but A-Z a-z 0-9 - . _ ~ [ ] percent-encoded (upper-case hex), so the text each
// parser decodes is the field's.
func appendFormFields(b []byte, fields []canonical.FormField) []byte {
	for i, f := range fields {
		if i > 0 {
			b = append(b, '&')
		}
		b = appendFormText(b, f.Name)
		b = append(b, '=')
		b = appendFormText(b, f.Value)
	}
	return b
}

func appendFormText(b []byte, s string) []byte {
	const upperHex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '[' || c == ']' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperHex[c>>4], upperHex[c&15])
	}
	return b
}

// reencodeMultipart writes the parts read by Multipart as a multipart/form-data body.
func (in *Input) reencodeMultipart() ([]byte, string) {
	_, params, _ := mime.ParseMediaType(in.Request.Header.Get("Content-Type"))
	boundary, contentType := params["boundary"], ""
	parts := sentParts(in.parts)
	for _, p := range parts {
		if bytes.Contains(p.content(), []byte("--"+boundary)) {
			boundary = newBoundary()
			contentType = mime.FormatMediaType("multipart/form-data", map[string]string{"boundary": boundary})
			break
		}
	}
	size := len(in.Body)
	b := make([]byte, 0, size+size/8)
	for _, p := range parts {
		b = append(b, "--"...)
		b = append(b, boundary...)
		b = append(b, "\r\nContent-Disposition: "...)
		disp := map[string]string{"name": p.name}
		if p.filename != "" {
			disp["filename"] = p.filename
		}
		b = append(b, mime.FormatMediaType("form-data", disp)...)
		if p.contentType != "" {
			b = append(b, "\r\nContent-Type: "...)
			b = append(b, p.contentType...)
		}
		b = append(b, "\r\n\r\n"...)
		b = append(b, p.content()...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "--"...)
	b = append(b, boundary...)
	b = append(b, "--\r\n"...)
	return b, contentType
}

// sentParts is parts with the nested text parts of a member (Multipart's nested names) in place
// of the one part they were read as: a handler that reads metadata[order] gets it as sent (its
// text, like any text part's), in body order among the member's parts, at the place of the
// first of them.
func sentParts(parts []part) []part {
	grouped := false
	for i := range parts {
		grouped = grouped || parts[i].sent != nil
	}
	if !grouped {
		return parts
	}
	out := make([]part, 0, len(parts))
	for _, p := range parts {
		if p.sent != nil {
			out = append(out, p.sent...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// content is what a part holds for a handler: its JSON re-encoded, or its bytes as sent.
func (p *part) content() []byte {
	if p.reencoded != nil {
		return p.reencoded
	}
	return p.data
}

// newBoundary returns a random multipart boundary (as mime/multipart.Writer makes them).
func newBoundary() string {
	var b [30]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(hex.EncodeToString(b[:]))
}
