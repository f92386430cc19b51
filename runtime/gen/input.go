package gen

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// Input is one request to a marked operation while it is decoded and framed into its
// fingerprint. The HTTP layer calls Reset, Begin, then the operation's generated decode function,
// then Sum (or Release when decoding failed) and BodyKey. The generated decode function reads the
// parameters (Params), decodes the body (JSON, Form, or FormTree for a form with bracketed
// fields), adds the body to the fingerprint (JSONBody, FormBody, FormTreeBody or RawBody) and
// reports a body-carried key (SetBodyKey).
//
// Errors are sticky, like canonical.Decoder's: after the first refused parameter or form field
// every later read is a no-op, and Err returns that first error. An Input may be reused for
// another request after Reset; its zero value is ready for Reset.
type Input struct {
	// Request is the request being decoded.
	Request *http.Request
	// Body is the whole request body (nil or empty when there is none).
	Body []byte
	// MediaType is the request's media type, lower case without parameters ("" without a body).
	MediaType string
	// Declared is the operation's media type entry that admitted the request (MediaType, or the
	// media range that matched it); generated code picks its decoder by it.
	Declared string

	pathValue func(string) string
	query     url.Values
	queried   bool

	framer  canonical.Framer
	framing bool

	key    string
	hasKey bool

	dec canonical.Decoder
	// json: the body is being read by dec, whose error Err reports first.
	json bool
	// reencode: the decoders keep a re-encoding of the body (Reencode); rawFramed: the body was
	// fingerprinted as raw bytes (RawBody), so a handler gets it as sent.
	reencode, rawFramed bool
	// relaxed: the readers take what refusals added since 0.1.0 refuse (Relax).
	relaxed bool

	// fields is the parsed form body (Form) and next the index of the field after the current.
	fields []canonical.FormField
	parsed bool
	next   int
	// flat are the items of the flat array field being read (Form.List), in element order, and
	// flatAt the index of the next.
	flat   []listItem
	flatAt int
	// tree is the bracketed view of the form body (FormTree); kept is the scratch list of
	// FormTreeBody.
	tree formTree
	kept []canonical.FormField

	// items are the values of the list parameter being read (Params.QueryList, HeaderList) and
	// item the index of the next.
	items []string
	item  int

	// deepState is the deepObject query parameter being read (Params.DeepObject).
	deepState
	// multipartState is the multipart body being read (Multipart).
	multipartState

	checker
}

// Reset prepares in for a request: r, its body, its media type and the declared entry that
// admitted it (Reset with nil values lets go of the last request, for an Input kept in a pool). pathValue returns the value of a path parameter by its name in the spec; nil
// means r.PathValue, which is right when the route's wildcards carry the parameters' names. m
// matches schema patterns; nil compiles them on every use, for tests only.
func (in *Input) Reset(r *http.Request, body []byte, mediaType, declared string, pathValue func(string) string, m *Matcher) {
	if in.framing {
		in.Release()
	}
	in.Request, in.Body, in.MediaType, in.Declared = r, body, mediaType, declared
	in.pathValue = pathValue
	in.query, in.queried = nil, false
	in.key, in.hasKey = "", false
	in.reencode, in.rawFramed = false, false
	in.relaxed = false
	// Scratch space is kept for the next request, but nothing that refers to this one.
	if len(in.fields) > 0 {
		clear(in.fields)
		in.fields = in.fields[:0]
	}
	if len(in.items) > 0 {
		clear(in.items)
		in.items = in.items[:0]
	}
	in.parsed, in.next = false, 0
	if len(in.deep) > 0 {
		clear(in.deep)
		in.deep = in.deep[:0]
	}
	in.deepName, in.deepNext = "", 0
	if len(in.parts) > 0 {
		clear(in.parts)
		in.parts = in.parts[:0]
	}
	in.mpParsed, in.mpNext = false, 0
	if in.pjson {
		in.pdec.Reset(nil)
		in.pjson = false
	}
	in.flat, in.flatAt = in.flat[:0], 0
	in.tree.reset()
	if len(in.kept) > 0 {
		clear(in.kept)
		in.kept = in.kept[:0]
	}
	if in.json {
		in.dec.Reset(nil)
		in.json = false
	}
	in.checker = checker{m: m}
}

// Begin starts the fingerprint with everything but the body, in the framing of
// canonical.Framer: operationID, method and the path template; the value of each path parameter
// in the order the template names them (each once); the values of each declared query parameter,
// in the order given, which must be sorted by name; the media type; and the values of each
// header of fingerprint.headers, in the order given.
func (in *Input) Begin(operationID, method, pathTemplate string, query, headers []string) {
	in.framer.Begin(operationID, method, pathTemplate)
	in.framing = true
	for rest, seen := pathTemplate, 0; ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			break
		}
		name := rest[i+1 : i+j]
		at := seen + i
		rest, seen = rest[i+j+1:], seen+i+j+1
		// A name the template repeats is one parameter: frame it where it first appears.
		if strings.Contains(pathTemplate[:at], pathTemplate[at:at+j+1]) {
			continue
		}
		in.framer.PathParam(name, in.PathValue(name))
	}
	if len(query) > 0 {
		q := in.Query()
		for _, name := range query {
			in.framer.Query(name, q[name])
		}
	}
	in.framer.MediaType(in.MediaType)
	for _, h := range headers {
		in.framer.Header(h, in.Request.Header.Values(h))
	}
}

// Sum returns the fingerprint of the framed request and releases the framing buffer.
func (in *Input) Sum() canonical.Fingerprint {
	in.framing = false
	return in.framer.Sum()
}

// Release gives up the framing of a request that was refused after Begin.
func (in *Input) Release() {
	in.framing = false
	in.framer.Release()
}

// BodyKey returns the idempotency key the decode function found in the body, and whether the
// body carried one (always false for header keys).
func (in *Input) BodyKey() (value string, present bool) { return in.key, in.hasKey }

// SetBodyKey records the body-carried idempotency key.
func (in *Input) SetBodyKey(value string, present bool) { in.key, in.hasKey = value, present }

// PathValue returns the value of the path parameter named name in the spec.
func (in *Input) PathValue(name string) string {
	if in.pathValue != nil {
		return in.pathValue(name)
	}
	return in.Request.PathValue(name)
}

// Query returns the request's query parameters, parsed once per request.
func (in *Input) Query() url.Values {
	if !in.queried {
		in.query, in.queried = in.Request.URL.Query(), true
	}
	return in.query
}

// Match reports whether s contains a match of the schema pattern.
func (in *Input) Match(pattern, s string) bool { return in.m.Match(pattern, s) }

// Relax makes every reader of the request, until the next Reset, take what the refusals added
// to decoding since idemgen 0.1.0 refuse, as the readers did before them
// (canonical.Decoder.Relax): a member, form field or part whose name is a declared one up to
// letter case is taken as any undeclared one, and so is, in a flat form, a field name whose
// brackets do not parse (a[b). The fingerprint is then the one an earlier version
// gave the request. Call it after Reset. The runtime decodes a refused request so only to look
// up whether an earlier version executed it (and then replays it), never to run a handler.
func (in *Input) Relax() { in.relaxed = true }

// JSON returns a strict decoder reset on the body, matching patterns through the Input's Matcher.
// Its errors (and data after the document) are reported by Err, before any parameter's.
func (in *Input) JSON() *canonical.Decoder {
	in.dec.Reset(in.Body)
	in.dec.SetMatcher(in.m)
	if in.reencode {
		in.dec.Reencode()
	}
	if in.relaxed {
		in.dec.Relax()
	}
	in.json = true
	return &in.dec
}

// BodyStart opens the canonical JSON body of the fingerprint; append the body's canonical form to
// the result and hand it to JSONBody.
func (in *Input) BodyStart() []byte { return in.framer.BodyStart() }

// JSONBody closes the canonical JSON body opened by BodyStart.
func (in *Input) JSONBody(b []byte) { in.framer.BodyEnd(b) }

// QueryObjectStart opens the fingerprint field of a deepObject query parameter (after the
// body): append the canonical form of its decoded value to the result and hand it to
// QueryObjectEnd.
func (in *Input) QueryObjectStart(name string) []byte { return in.framer.QueryObjectStart(name) }

// QueryObjectEnd closes the field opened by QueryObjectStart.
func (in *Input) QueryObjectEnd(b []byte) { in.framer.BodyEnd(b) }

// MultipartStart opens the canonical multipart body of the fingerprint: append the canonical
// form of the decoded body (files as AppendFile) to the result and hand it to MultipartBody.
func (in *Input) MultipartStart() []byte { return in.framer.MultipartStart() }

// MultipartBody closes the body opened by MultipartStart.
func (in *Input) MultipartBody(b []byte) { in.framer.BodyEnd(b) }

// FormBody adds the canonical form of the form body to the fingerprint, leaving out the fields
// named in exclude (fingerprint.exclude and a form-carried key). A body the form decoder has
// accepted cannot fail here; if it did, the error is recorded like a decoding error.
func (in *Input) FormBody(exclude ...string) {
	if err := in.framer.FormBody(in.Body, exclude...); err != nil && in.err == nil {
		in.err = err
	}
}

// RawBody adds the body's exact bytes to the fingerprint (fingerprint.body: raw, media types other
// than JSON and form, and an absent optional body).
func (in *Input) RawBody() {
	in.rawFramed = true
	in.framer.RawBody(in.Body)
}

// Err returns why the request is refused, or nil: the JSON body's first error (a
// *canonical.Error, including data after the document), else the first refused form field or
// parameter (a *canonical.Error or *BodyError). Generated code frames the body whether or not it
// decoded, so it reads straight through; the caller never sums the fingerprint of a refused
// request.
func (in *Input) Err() error {
	if in.json {
		if err := in.dec.Finish(); err != nil {
			return err
		}
	}
	(*Multipart)(in).finishJSON()
	return in.err
}

// NoDecoder refuses a body whose media type was admitted by the operation but has no decoder.
func (in *Input) NoDecoder() error {
	return &BodyError{Reason: "no decoder for media type " + in.MediaType}
}
