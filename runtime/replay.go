package runtime

import (
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/defaults"
	"github.com/idemgen/idemgen/runtime/store"
)

// Replay headers (draft-ietf-httpapi-idempotency-key-header replays the original response;
// Stripe marks it with Idempotent-Replayed): the contract table's (runtime/defaults).
const (
	// HeaderReplayed marks every replayed response: `Idempotent-Replayed: true`.
	HeaderReplayed = defaults.HeaderReplayed
	// HeaderReplayBody is `omitted` on a replay whose body was above Operation.ResponseLimit
	// when it was first sent, so it was not stored.
	HeaderReplayBody = defaults.HeaderReplayBody
	// HeaderKeyExpires is on every stored answer and every replay: an HTTP date (IMF-fixdate)
	// until which a retry with the same key gets this answer back, the end of the record's
	// retention by the store's clock, rounded down to the second (defaults.KeyExpiresHeader).
	HeaderKeyExpires = defaults.KeyExpiresHeader
)

// defaultReplayHeaders are stored and replayed for every operation (defaults.ReplayHeaders).
var defaultReplayHeaders = defaults.ReplayHeaders()

// storableHeaders returns the allow-listed headers of h as a JSON object of string arrays
// (names in canonical MIME form, sorted; values in order), or nil when there are none. The
// allow-list is the default one, the operation's ReplayHeaders, and what its profile prof (nil:
// none) stores: its ReplayHeaders and its request id header.
func storableHeaders(op *Operation, prof *Profile, h http.Header) []byte {
	var names []string
	add := func(name string) {
		name = http.CanonicalHeaderKey(name)
		if defaults.NeverStored(name) || len(h[name]) == 0 || slices.Contains(names, name) {
			return
		}
		names = append(names, name)
	}
	for _, n := range defaultReplayHeaders {
		add(n)
	}
	for _, n := range op.ReplayHeaders {
		add(n)
	}
	if prof != nil {
		for _, n := range prof.ReplayHeaders {
			add(n)
		}
		if prof.RequestID != nil && prof.RequestID.Header != "" {
			add(prof.RequestID.Header) // its replay names it (RequestID.Original)
		}
	}
	if len(names) == 0 {
		return nil
	}
	// Written by hand rather than with encoding/json (reflection over a map, sorted on every
	// response): this runs for every stored response.
	slices.Sort(names)
	b := make([]byte, 0, 128)
	b = append(b, '{')
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, name)
		b = append(b, ':', '[')
		for j, v := range h[name] {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string (RFC 8259 section 7): quote, backslash and
// control characters escaped, invalid UTF-8 replaced by U+FFFD (PostgreSQL's jsonb refuses it),
// everything else as is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// writeResponse sends a handler's response as is (Set-Cookie and the rest included: only the
// stored copy is filtered); decorate adds the profile's headers.
func writeResponse(w http.ResponseWriter, resp Response, decorate func(http.Header)) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = append(h[k][:0:0], v...)
	}
	decorate(h)
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(resp.Body)
}

// writeReplay sends a stored response with Idempotent-Replayed: true; decorate adds the
// profile's headers. The values of the headers it sets share one array.
func writeReplay(w http.ResponseWriter, stored *store.Response, decorate func(http.Header)) {
	h := w.Header()
	vals := setStoredHeaders(h, stored.Header, 3)
	decorate(h)
	vals = append(vals, "true")
	h[HeaderReplayed] = vals[0:1:1]
	if stored.BodyOmitted {
		vals = append(vals, "omitted", "0")
		h[HeaderReplayBody] = vals[1:2:2]
	} else {
		vals = append(vals, strconv.Itoa(len(stored.Body)))
	}
	h["Content-Length"] = vals[len(vals)-1 : len(vals) : len(vals)]
	w.WriteHeader(stored.Status)
	if !stored.BodyOmitted {
		_, _ = w.Write(stored.Body)
	}
}

// storable prepares a final response for the record: the allow-listed headers, and the body
// unless it is above the operation's stored-response limit (then it is delivered, not kept).
func (x *exchange) storable(resp Response) store.Response {
	op := x.op
	s := store.Response{Status: resp.Status, Header: storableHeaders(op, x.prof, resp.Header), Body: resp.Body}
	if s.Status == 0 {
		s.Status = http.StatusOK
	}
	if int64(len(resp.Body)) > op.responseLimit() {
		s.Body, s.BodyOmitted = nil, true
	}
	if s.Body == nil && !s.BodyOmitted {
		s.Body = []byte{}
	}
	return s
}

// setStoredHeaders sets the headers stored by storableHeaders (a JSON object of string arrays) on
// h, and returns an empty slice with room for spare more values after theirs, in the same
// array: the values of a replay's headers are one allocation, their names and the values' text
// one copy of the document (canonical.Decoder's Key and Str). A document that is not such an
// object sets nothing. It reads with the canonical package's token decoder rather than
// encoding/json's reflection: decoding the stored headers by reflection was a sixth of what a
// replay allocated.
func setStoredHeaders(h http.Header, doc []byte, spare int) []string {
	type header struct {
		name       string
		start, end int // its values in vals
	}
	var (
		d       canonical.Decoder
		hbuf    [4]header
		list    = hbuf[:0]
		vbuf    [8]string
		vals    = vbuf[:0]
		decoded = len(doc) > 0
	)
	if decoded {
		d.Reset(doc)
		if d.BeginObject() {
			for d.NextMember() {
				hd := header{name: d.Key(), start: len(vals)}
				if d.BeginArray() {
					for d.NextElement() {
						vals = append(vals, d.Str())
					}
					d.EndArray()
				}
				hd.end = len(vals)
				list = append(list, hd)
			}
			d.EndObject()
		}
		decoded = d.Finish() == nil
	}
	if !decoded {
		list, vals = list[:0], vals[:0]
	}
	all := make([]string, len(vals), len(vals)+spare)
	copy(all, vals)
	for _, hd := range list {
		h[http.CanonicalHeaderKey(hd.name)] = all[hd.start:hd.end:hd.end]
	}
	return all[len(all):]
}
