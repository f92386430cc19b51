package runtime

import (
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// Replay headers (DESIGN section 5; the draft-ietf-httpapi-idempotency-key-header replays the
// original response, Stripe marks it with Idempotent-Replayed).
const (
	// HeaderReplayed marks every replayed response: `Idempotent-Replayed: true`.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderReplayBody is `omitted` on a replay whose body was above Operation.ResponseLimit
	// when it was first sent, so it was not stored.
	HeaderReplayBody = "Idempotent-Replay-Body"
)

// defaultReplayHeaders are stored and replayed for every operation (DESIGN section 5).
var defaultReplayHeaders = []string{
	"Content-Type", "Content-Encoding", "Content-Language", "Content-Disposition",
	"Location", "Etag", "Link",
}

// neverStored may not be stored or replayed even when an operation lists them in ReplayHeaders:
// credentials, per-response dates and the hop-by-hop headers of RFC 9110 section 7.6.1.
var neverStored = map[string]bool{
	"Set-Cookie": true, "Authorization": true, "Proxy-Authorization": true, "Date": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
	"Proxy-Authenticate": true, "Www-Authenticate": true,
	HeaderReplayed: true, HeaderReplayBody: true,
}

// storableHeaders returns the allow-listed headers of h as a JSON object of string arrays
// (names in canonical MIME form, sorted; values in order), or nil when there are none. It never
// fails; the error result keeps the signature of its callers.
func storableHeaders(op *Operation, h http.Header) ([]byte, error) {
	var names []string
	add := func(name string) {
		name = http.CanonicalHeaderKey(name)
		if neverStored[name] || len(h[name]) == 0 || slices.Contains(names, name) {
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
	if len(names) == 0 {
		return nil, nil
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
	return append(b, '}'), nil
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

// isFinal reports whether status is final under the operation's replay.statuses (DESIGN section
// 2): the last matching rule decides, nil rules mean [2xx, 4xx, !408, !409, !425, !429]. A
// non-final outcome is never stored and releases the key, so the client's retry runs again.
func isFinal(op *Operation, status int) bool {
	rules := op.Statuses
	if rules == nil {
		rules = defaultStatuses
	}
	final := false
	for _, r := range rules {
		if r.Code == status || (r.Code == 0 && r.Class != 0 && status/100 == r.Class) {
			final = !r.Exclude
		}
	}
	return final
}

var defaultStatuses = []StatusRule{
	{Class: 2}, {Class: 4},
	{Code: 408, Exclude: true}, {Code: 409, Exclude: true},
	{Code: 425, Exclude: true}, {Code: 429, Exclude: true},
}

// writeResponse sends a handler's response as is (Set-Cookie and the rest included: only the
// stored copy is filtered).
func writeResponse(w http.ResponseWriter, resp Response) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = append(h[k][:0:0], v...)
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(resp.Body)
}

// writeReplay sends a stored response with Idempotent-Replayed: true.
func writeReplay(w http.ResponseWriter, rec *record) {
	h := w.Header()
	if len(rec.headers) > 0 {
		setStoredHeaders(h, rec.headers)
	}
	h.Set(HeaderReplayed, "true")
	if rec.bodyOmitted {
		h.Set(HeaderReplayBody, "omitted")
		h.Set("Content-Length", "0")
	} else {
		h.Set("Content-Length", strconv.Itoa(len(rec.body)))
	}
	w.WriteHeader(int(rec.status))
	if !rec.bodyOmitted {
		_, _ = w.Write(rec.body)
	}
}

// setStoredHeaders sets the headers stored by storableHeaders (a JSON object of string arrays, as
// PostgreSQL's jsonb prints it) on h. A document that is not such an object sets nothing. It reads
// with the canonical package's token decoder rather than encoding/json's reflection: decoding the
// stored headers was a sixth of what a replay allocated.
func setStoredHeaders(h http.Header, doc []byte) {
	type header struct {
		name   string
		values []string
	}
	var (
		d    canonical.Decoder
		buf  [4]header
		list = buf[:0]
	)
	d.Reset(doc)
	if d.BeginObject() {
		for d.NextMember() {
			hd := header{name: d.Key()}
			if d.BeginArray() {
				for d.NextElement() {
					hd.values = append(hd.values, d.Str())
				}
				d.EndArray()
			}
			list = append(list, hd)
		}
		d.EndObject()
	}
	if d.Finish() != nil {
		return
	}
	for _, hd := range list {
		h[http.CanonicalHeaderKey(hd.name)] = hd.values
	}
}
