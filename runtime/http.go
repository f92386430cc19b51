package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/defaults"
	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store"
)

// This file is the HTTP layer: the only code that reads a marked operation's request or writes
// its response. A request goes through it top-down:
//
//	admit    scope (401), body size (413), content coding and media type (415)
//	prepare  the operation's decoder (400 body-invalid) and fingerprint, then the key (400)
//	run      the state machine of the operation's mode (atomic.go, lease.go)
//	finish   the answer (answers.go) observed, logged, and written as a response, a replay or
//	         a problem
//
// Each step says only how the request ended (a result's ending and its facts); the statuses
// above are answer's, the one place that says what the client hears. None of the refusals
// before run touches the store or leaves a record.

// exchange is one request to a marked operation on its way through the runtime.
type exchange struct {
	rt        *Runtime
	op        *Operation
	r         *http.Request
	scope     string
	scoped    bool   // the scope is known (the ScopeFunc accepted the request, or SingleTenant)
	tenant    string // the ScopeFunc's tenant; scope adds the operation's ScopeHeaders to it
	body      []byte
	mediaType string // the request's own, lower case, no parameters ("" without a body)
	declared  string // the Operation.MediaTypes entry that admitted it
	fp        canonical.Fingerprint
	key       string // the validated key; "" when an optional key is absent
	// prof is the operation's profile, or the Runtime's (Config.Profile): never nil in serve.
	prof *Profile
	// requestID is this request's id under prof.RequestID ("" without).
	requestID string
	// confirm: the handler must not start before the claim is held (Middleware).
	confirm bool
	// calledOut: a lease-mode call phase has run, so its external effect may have happened
	// and no store failure may be answered as "not processed".
	calledOut bool
	// notFinal: the handler marked its answer not final (NotFinal): sent, not stored, the key
	// released.
	notFinal atomic.Bool
	// detached: the handler runs detached from the client (detach), so a store call that fails
	// after the client went away failed on its own.
	detached bool
	// flight is the request as Shutdown sees it while it runs (nil before): &inFlight.
	flight   *flight
	inFlight flight
	// earlier, when set, is the decoder's refusal of a request that the decoders before the
	// refusals added since 0.1.0 took (earlierTwin): the machine only looks for the record of
	// that request, and answers the refusal when there is none.
	earlier *result
	// tmpl is the operation's path template and segs the request's decoded path segments
	// (pathValue); for a request an adapter routed (Guard.Serve), segs are the template's
	// segments with the router's values in its parameter segments.
	tmpl *gen.Template
	segs []string
	// ident is the request's log identity (LogAttrs, IdempotencyKey, NotFinal) and hctx the
	// context that carries it to the machine and the handler: both live in the exchange, so that
	// making that context allocates nothing.
	ident logIdentity
	hctx  identityCtx
	// keyName is the key header's canonical name (endpoint.keyName); "" until keyHeader.
	keyName string
	// expires backs the value of the answer's HeaderKeyExpires (profileHeaders), so that
	// setting it allocates only the date's text.
	expires [1]string
}

// keyHeader is the operation's key header in canonical form, the request's header map's key.
func (x *exchange) keyHeader() string {
	if x.keyName == "" {
		x.keyName = http.CanonicalHeaderKey(x.op.Key.Header)
	}
	return x.keyName
}

// id is the record the request's key names.
func (x *exchange) id() store.ID {
	var vals []string
	if x.op.Scope == ScopePath {
		// The router (or the template, for serve) matched the path: its values fit.
		vals, _ = x.template().Values(x.segments())
	}
	return store.ID{Scope: x.scope, Key: x.op.storedKey(x.key, vals)}
}

// claim is what a claim of the request's key writes.
func (x *exchange) claim() store.Claim {
	c := store.Claim{ID: x.id(), Tenant: x.tenant, Operation: x.op.ID, Fingerprint: x.fp, Retention: x.op.retention(),
		Tombstone: x.op.tombstone(), Wait: x.op.Wait}
	if x.op.Mode == ModeLease {
		c.Lease, c.Wait = x.op.lease(), 0
	}
	return c
}

// runner runs the state machine of an operation's mode for one decoded request.
type runner func(ctx context.Context, x *exchange) result

// serve runs one request through the layer; decode is the operation's, returning the machine
// bound to the decoded request. Nothing here is generic over the request type: a large API
// compiles it once.
func serve(w http.ResponseWriter, r *http.Request, rt *Runtime, ep *endpoint, decode func(*gen.Input) (runner, error)) {
	serveRouted(w, r, rt, ep, nil, decode)
}

// serveRouted is serve with the path parameter values the router matched, one per parameter
// segment of the operation's template (Guard.Serve); nil: they are found in the request's path
// by the template. A value that does not fit its segment (the literal text of "{id}:cancel",
// an empty value) is not this operation: 404.
func serveRouted(w http.ResponseWriter, r *http.Request, rt *Runtime, ep *endpoint, params []string, decode func(*gen.Input) (runner, error)) {
	x := &exchange{rt: rt, op: ep.op, r: r, tmpl: &ep.tmpl, prof: rt.profileOf(ep.op), keyName: ep.keyName}
	if params != nil {
		x.segs = routedSegments(&ep.tmpl, params)
		if !ep.tmpl.Match(x.segs, false) {
			http.NotFound(w, r)
			return
		}
	}
	if !x.pathMatches() {
		// Only a mixed segment's literal text can differ: the router matched the rest.
		http.NotFound(w, r)
		return
	}
	ctx, span := rt.tracer.Start(r.Context(), spanRequest, ep.spanStart...)
	defer span.End()
	// Attributes are built only for a span that records: with no tracing configured, a replay
	// pays for neither their allocations nor the key's hash.
	traced := span.IsRecording()
	res := x.admit(w)
	if !res.answered() {
		var run runner
		run, res = prepare(x, decode)
		if !res.answered() {
			if traced {
				span.SetAttributes(attrKeyHash.String(keyHash(x.scope, x.key)))
			}
			// The handler's context carries the request's log attributes (LogAttrs, LogHandler),
			// hashed the first time something asks for them; Shutdown tracks the request while
			// it runs, and cancels its handler at its deadline (drain.cancelable).
			x.flight = &x.inFlight
			rt.drain.enter(x.flight)
			res = run(x.withIdentity(ctx), x)
			rt.drain.leave(x.flight)
		}
	}
	a := answer(x, &res)
	if traced {
		span.SetAttributes(attrOutcome.String(string(a.outcome)))
		if a.problem.Status >= 500 {
			span.SetStatus(codes.Error, a.problem.Name)
		}
	}
	rt.finish(w, x, &res, &a)
}

// endpoint is an operation as the HTTP layer serves it, with what is made once per operation
// rather than once per request.
type endpoint struct {
	op   *Operation
	tmpl gen.Template // op.Path
	// keyName is op.Key.Header in canonical form ("" without a key header).
	keyName string
	// spanStart are the request span's start options: its kind, and the operation and mode as
	// attributes, so that a Sampler sees them.
	spanStart []trace.SpanStartOption
}

func newEndpoint(op *Operation) *endpoint {
	return &endpoint{op: op, tmpl: gen.ParseTemplate(op.Path), keyName: http.CanonicalHeaderKey(op.Key.Header),
		spanStart: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attrOperation.String(op.ID), attrMode.String(op.Mode.String()))}}
}

// admit checks the scope, the body's size and its media type, and reads the body. The body is
// read whole: the fingerprint covers it, and a request the server cannot take is refused before
// any key lookup.
func (x *exchange) admit(w http.ResponseWriter) result {
	rt, op, r := x.rt, x.op, x.r
	if !rt.cfg.SingleTenant {
		s, err := callScope(rt.cfg.Scope, r)
		if err != nil {
			return result{ending: endUnauthenticated, err: err}
		}
		x.scope = s
	}
	x.tenant = x.scope
	x.scope = op.RequestScope(x.scope, r.Header)
	if id := x.prof.RequestID; id != nil && id.Header != "" {
		x.requestID = id.forRequest(r.Header)
	}
	x.scoped = true
	if name, bad := op.badScopeHeader(r.Header); bad {
		// Refused before any lookup: a value that names no account must not make a scope of
		// its own (each would get fresh keys and caps).
		return result{ending: endScopeHeaderInvalid, sent: name}
	}
	limit := op.bodyLimit()
	if r.ContentLength > limit {
		return result{ending: endBodyTooLarge, size: r.ContentLength, limit: limit}
	}
	if r.Body != nil {
		body, err := readBody(w, r, limit)
		if err != nil {
			if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
				return result{ending: endBodyOverLimit, limit: limit}
			}
			return result{ending: endBodyUnreadable, err: err}
		}
		x.body = body
	}
	// The header map is read by canonical name, as Header.Get would after canonicalizing the
	// name on every call.
	if len(x.body) > 0 {
		if coding, ok := unsupportedCoding(r.Header["Content-Encoding"]); !ok {
			return result{ending: endCodingUnsupported, sent: coding}
		}
	}
	cts := r.Header["Content-Type"]
	if len(cts) > 1 {
		// Which one the decoder, the fingerprint and the handler would each take is a guess.
		return result{ending: endContentTypeRepeated}
	}
	ct := ""
	if len(cts) == 1 {
		ct = cts[0]
	}
	if declared := exactMediaType(op.MediaTypes, ct); declared != "" {
		// The common case, a Content-Type spelled as declared: nothing to parse.
		x.mediaType, x.declared = declared, declared
		return result{}
	}
	if ct == "" && len(x.body) == 0 {
		return result{}
	}
	mt, params, err := mime.ParseMediaType(ct)
	mt = strings.ToLower(mt)
	if len(op.MediaTypes) > 0 && (err != nil || matchMediaType(op.MediaTypes, mt) == "") {
		return result{ending: endMediaTypeUnsupported, sent: ct}
	}
	if err != nil {
		return result{}
	}
	if cs, ok := params["charset"]; ok && isJSONMediaType(mt) && !strings.EqualFold(cs, "utf-8") {
		return result{ending: endCharsetUnsupported, sent: ct, charset: cs}
	}
	x.mediaType, x.declared = mt, matchMediaType(op.MediaTypes, mt)
	return result{}
}

// callScope runs the ScopeFunc; a panic in it refuses the request like an error would.
func callScope(f ScopeFunc, r *http.Request) (s string, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("scope function panicked: %v", v)
		}
	}()
	return f(r)
}

// prepare runs the operation's decoder, which checks parameters and body and completes the
// fingerprint, then reads and validates the key.
func prepare(x *exchange, decode func(*gen.Input) (runner, error)) (runner, result) {
	op := x.op
	in := x.rt.inputs.Get().(*gen.Input)
	defer func() {
		in.Reset(nil, nil, "", "", nil, nil) // nothing of this request stays in the pool
		x.rt.inputs.Put(in)
	}()
	run, fp, err := decodeRequest(x, in, decode, false)
	if err != nil {
		refused := decodeFailed(err)
		if refused.ending == endBodyInvalid {
			return x.earlierTwin(in, decode, refused)
		}
		return nil, refused
	}
	x.fp = fp
	k := rawKey{}
	switch {
	case op.Key.Header != "":
		if vals := x.r.Header[x.keyHeader()]; len(vals) > 0 {
			k = rawKey{value: vals[0], present: true, lines: len(vals)}
		}
	case op.Key.Query != "":
		// An empty value (?request_id=) is a present key that fails the length rule, as an
		// empty header is.
		if vals := in.Query()[op.Key.Query]; len(vals) > 0 {
			k = rawKey{value: vals[0], present: true, lines: len(vals)}
		}
	default:
		k.value, k.present = in.BodyKey()
	}
	return run, x.resolveKey(k)
}

// earlierTwin is what a request the decoder refused (refused) runs instead: a version of the
// decoder before the refusals added since idemgen 0.1.0 may have taken, and executed, this very
// request, and its retry must get that answer, not a 400 telling the client that what ran was
// invalid (the adversary's "Amount" beside "amount" after an upgrade). So the request is decoded
// again as those decoders did (gen.Input.Relax); when that takes it and its key is valid, the
// machine of its mode only looks the key up (x.earlier set: earlierAtomic, earlierLease): a
// record of the same operation with the same fingerprint, as the earlier decoder computed it,
// is answered from (its replay, or 409 while it runs), and so is a record decide answers so for
// any request (another framing version: exchange.earlierMet); anything else gets the refusal.
// Nothing runs a handler on a relaxed decoding.
func (x *exchange) earlierTwin(in *gen.Input, decode func(*gen.Input) (runner, error), refused result) (runner, result) {
	run, fp, err := decodeRequest(x, in, decode, true)
	if err != nil {
		return nil, refused
	}
	k := rawKey{}
	if x.op.Key.Header != "" {
		if vals := x.r.Header.Values(x.op.Key.Header); len(vals) > 0 {
			k = rawKey{value: vals[0], present: true, lines: len(vals)}
		}
	} else {
		k.value, k.present = in.BodyKey()
	}
	if res := x.resolveKey(k); res.answered() || x.key == "" {
		return nil, refused
	}
	x.fp, x.earlier = fp, &refused
	return run, result{}
}

// pointerError is a decoder's refusal that names where in the request it is: *gen.BodyError,
// *canonical.Error, or any error with a Pointer method.
type pointerError interface {
	error
	Pointer() string
}

// decodeFailed is the ending of a decoder's error: the body refused where the error names a
// JSON pointer; anything else is a bug in the decoder.
func decodeFailed(err error) result {
	var be *gen.BodyError
	if errors.As(err, &be) && be.Status == http.StatusRequestEntityTooLarge {
		// A multipart part over limits.part: the body's own cap, per part.
		return result{ending: endPartTooLarge, err: be, pointer: be.At}
	}
	var ce *canonical.Error
	if errors.As(err, &ce) {
		return result{ending: endBodyInvalid, err: ce, pointer: ce.Pointer}
	}
	var pe pointerError
	if errors.As(err, &pe) {
		return result{ending: endBodyInvalid, err: pe, pointer: pe.Pointer()}
	}
	return result{ending: endDecoderFailed, err: err}
}

// resolveKey applies the key rules to the key the request carried. The key stays "" when it is
// absent and optional: the request then runs unguarded.
//
// An optional key that the rules refuse but that was sent as an RFC 8941 sf-string, on one
// header line, is a general client's key and runs the request unguarded too, rather than
// failing it: the IETF draft (draft-ietf-httpapi-idempotency-key-header, section 2.5, "Client")
// lets a client send a key the server has not published rules for, and Firefox sends
// `Idempotency-Key: "<uint64>"` on every POST and PATCH (behind its network.http.idempotencyKey
// preference), whose 15 digits or fewer fall below the default minimum of 16 about once in
// 18,000 requests, and which a key pattern may refuse every time. A key sent bare that breaks
// the rules is still 400 key-invalid: that client meant this API's key.
func (x *exchange) resolveKey(k rawKey) result {
	rule := &x.op.Key
	if !k.present {
		if rule.Required {
			return result{ending: endKeyMissing}
		}
		return result{}
	}
	v, quoted, err := checkKey(k, rule, x.rt.matcher.MatchWhole)
	if err != nil && quoted && !rule.Required && k.lines == 1 {
		return result{}
	}
	if err != nil {
		return result{ending: endKeyInvalid, err: err}
	}
	if rule.FirstSent != "" {
		if res := x.checkFirstSent(); res.answered() {
			return res
		}
	}
	x.key = v
	return result{}
}

// checkFirstSent applies OASIS Repeatable Requests 1.0 (Repeatability-First-Sent): the time of
// the first attempt must be given, and a first attempt older than the retention is refused
// (412), since the record of that attempt may already be gone and running it again could run it
// twice. The time is the client's and is compared with this server's clock.
func (x *exchange) checkFirstSent() result {
	name := x.op.Key.FirstSent
	vals := x.r.Header.Values(name)
	var sent time.Time
	var err error
	if len(vals) == 1 {
		sent, err = http.ParseTime(vals[0])
	}
	if len(vals) != 1 || err != nil {
		return result{ending: endFirstSentInvalid}
	}
	if time.Since(sent) > x.op.retention() {
		return result{ending: endKeyExpired, sent: vals[0]}
	}
	return result{}
}

func (x *exchange) keyWhere() string {
	switch {
	case x.op.Key.Header != "":
		return "The " + x.op.Key.Header + " header"
	case x.op.Key.Query != "":
		return "The " + x.op.Key.Query + " query parameter"
	}
	return "The idempotency key at " + x.op.Key.BodyPointer
}

// pathValue returns the value of the path parameter name of the request, found by matching
// the operation's path template against the end of the request's percent-decoded path
// segments (runtime/gen's template matcher), so that it does not depend on the router (a prefix
// a router strips or adds does not matter): the fingerprint is the same through a generated
// handler on http.ServeMux, on chi, or through the Middleware.
func (x *exchange) pathValue(name string) string {
	v, _ := x.template().Value(x.segments(), name)
	return v
}

// pathMatches reports whether the request's path has the literal text of the template's mixed
// segments ("{sid}.json"): a router matches such a segment as a whole, by a wildcard. Everything
// else is the router's decision.
func (x *exchange) pathMatches() bool {
	t, segs := x.template(), x.segments()
	if len(segs) < t.Len() {
		return true
	}
	segs = segs[len(segs)-t.Len():]
	for i, s := range t.Segments() {
		if !s.Literal() && !s.Whole() {
			if _, ok := gen.MatchSegment(segs[i], s.Pieces...); !ok {
				return false
			}
		}
	}
	return true
}

// template is the operation's path template (parsed once per endpoint).
func (x *exchange) template() *gen.Template {
	if x.tmpl == nil {
		t := gen.ParseTemplate(x.op.Path)
		x.tmpl = &t
	}
	return x.tmpl
}

// segments are the request's path segments, percent-decoded, split once per request.
func (x *exchange) segments() []string {
	if x.segs == nil {
		x.segs = gen.DecodeSegments(gen.SplitPath(x.r.URL.EscapedPath()))
	}
	return x.segs
}

// finish ends the request with res, answered a: the observer counts it, the log records what
// needs a record, and exactly one response is written.
func (rt *Runtime) finish(w http.ResponseWriter, x *exchange, res *result, a *reply) {
	if !res.claimed.IsZero() {
		x.executed(a.outcome, res.claimed)
	}
	rt.obs.Outcome(x.op.ID, x.op.Mode, a.outcome)
	rt.logResult(x, res, a)
	if rt.drain.refusing() {
		// The process is leaving: the client's next request goes to a new connection, and so
		// to another replica.
		w.Header().Set("Connection", "close")
	}
	decorate := func(h http.Header) { x.profileHeaders(h, a) }
	switch {
	case a.problem.Status != 0:
		if a.acceptEncoding != "" {
			w.Header().Set("Accept-Encoding", a.acceptEncoding)
		}
		decorate(w.Header())
		rt.problemWriter(x.prof)(w, x.r, a.problem)
	case a.replayed:
		writeReplay(w, &res.rec.Response, decorate)
	default:
		writeResponse(w, res.resp, decorate)
	}
}

// profileHeaders adds what every answer carries besides the response, after any stored
// headers: the key's expiry on a stored answer or a replay (HeaderKeyExpires), OASIS Repeatable Requests' Repeatability-Result for an operation that takes
// Repeatability-First-Sent, and what the profile adds (answerHeaders).
func (x *exchange) profileHeaders(h http.Header, a *reply) {
	if !a.expires.IsZero() {
		// Rounded down: a client that retries before the date still gets the answer.
		x.expires[0] = a.expires.UTC().Format(http.TimeFormat)
		h[HeaderKeyExpires] = x.expires[:1:1]
	}
	if x.op.Key.FirstSent != "" {
		// OASIS Repeatable Requests: whether the server took the request as repeatable.
		switch {
		case a.problem.Status >= 400 && a.problem.Status < 500:
			h.Set("Repeatability-Result", "rejected")
		case a.problem.Status == 0:
			h.Set("Repeatability-Result", "accepted")
		}
	}
	if x.prof.EchoKey || x.op.Key.Echo {
		x.echoKey(h)
	}
	if id := x.prof.RequestID; id != nil && x.requestID != "" {
		x.requestIDs(h, id, a.replayed)
	}
}

// echoKey repeats the key header back (Profile.EchoKey, KeyRule.Echo) as the request sent it
// (an sf-string stays quoted), unless it is longer than a valid key can be, also for a request refused before its key was read (a body the schema
// refuses, a media type the operation does not take). A key sent on several lines is not
// echoed: which one would be is a guess.
func (x *exchange) echoKey(h http.Header) {
	name := x.op.Key.Header
	if name == "" {
		return // a body-carried key has no header to echo
	}
	vals := x.r.Header.Values(name)
	if len(vals) != 1 || vals[0] == "" {
		return
	}
	max := x.op.Key.MaxLength
	if max == 0 {
		max = DefaultKeyMaxLength
	}
	n := defaults.KeyLength(vals[0])
	if strings.HasPrefix(vals[0], `"`) {
		n -= 2
	}
	if n <= max {
		h.Set(name, vals[0])
	}
}

// requestIDs sets the answer's id and names the execution whose response it is
// (Profile.RequestID): a replay gets this request's id and names the stored one; other answers
// keep an id the handler set.
func (x *exchange) requestIDs(h http.Header, id *RequestID, replayed bool) {
	if id.Echo {
		h.Set(id.Header, x.requestID)
		return
	}
	stored := h.Get(id.Header)
	original := x.requestID
	switch {
	case replayed && stored != "":
		original = stored
		h.Set(id.Header, x.requestID)
	case stored != "":
		original = stored
	default:
		h.Set(id.Header, x.requestID)
	}
	if id.Original != "" {
		h.Set(id.Original, original)
	}
}

// stamp gives a final response this request's id before it is stored (Profile.RequestID), so
// that its replays can name it.
func (x *exchange) stamp(resp *Response) {
	id := x.prof.RequestID
	if x.requestID == "" || id.Echo || resp.Header.Get(id.Header) != "" {
		return
	}
	resp.Header = resp.Header.Clone()
	if resp.Header == nil {
		resp.Header = http.Header{}
	}
	resp.Header.Set(id.Header, x.requestID)
}

// logResult writes the log line the answer a says res deserves, with the request's context (so
// a trace-aware handler can add its ids), the operation, and digests of the tenant and the key
// (logAttrs), never the tenant or the key.
func (rt *Runtime) logResult(x *exchange, res *result, a *reply) {
	ctx := x.r.Context()
	if a.msg == "" || !rt.log.Enabled(ctx, a.level) {
		return
	}
	attrs := x.logAttrs()
	if res.err != nil {
		attrs = append(attrs, slog.Any("error", res.err))
	}
	if len(res.stack) > 0 {
		attrs = append(attrs, slog.String("stack", string(res.stack)))
	}
	rt.log.LogAttrs(ctx, a.level, a.msg, attrs...)
}

// readBody reads the request body up to limit bytes. A body of announced length is read into a
// buffer of that size in one go; any other goes through http.MaxBytesReader.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	n := r.ContentLength
	if n < 0 || n > limit {
		return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	}
	// net/http's body reader stops at Content-Length and reports a short body as an error.
	body := make([]byte, n, n+1)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return nil, err
	}
	// A middleware may have replaced the body without fixing ContentLength: read on to the end.
	// The byte that tells is read into the buffer's spare capacity, which a local array passed
	// to Read (an interface call) would not be: it would be allocated on every request.
	if k, _ := r.Body.Read(body[n : n+1]); k == 0 {
		return body, nil
	}
	rest, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit-n-1))
	return append(body[:n+1], rest...), err
}

// exactMediaType returns the declared media type that ct spells exactly (letter case aside),
// with no parameters, or "".
func exactMediaType(declared []string, ct string) string {
	for _, d := range declared {
		if len(d) == len(ct) && strings.EqualFold(d, ct) && !strings.Contains(d, "*") {
			return strings.ToLower(d)
		}
	}
	return ""
}

// matchMediaType returns the entry of declared that admits the lower-case media type mt, or "".
// An exact entry wins over "type/*", which wins over "*/*" (RFC 9110 section 12.5.1 media
// ranges; the same precedence as Accept). Entries compare case-insensitively (RFC 9110 section
// 8.3.1) and any parameters on them are ignored.
func matchMediaType(declared []string, mt string) string {
	typ, sub, ok := strings.Cut(mt, "/")
	if !ok || typ == "" || typ == "*" || sub == "" || sub == "*" {
		return "" // a request names one media type, never a range
	}
	best, rank := "", 0
	for _, d := range declared {
		base, _, _ := strings.Cut(d, ";")
		base = strings.ToLower(strings.TrimSpace(base))
		r := 0
		switch {
		case base == mt:
			return d
		case base == typ+"/*":
			r = 2
		case base == "*/*":
			r = 1
		}
		if r > rank {
			best, rank = d, r
		}
	}
	return best
}

// isJSONMediaType reports whether mt (lower case, no parameters) is JSON: application/json or a
// +json structured syntax suffix (RFC 6839 section 3.1), the types decoders read as UTF-8 JSON.
func isJSONMediaType(mt string) bool {
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// unsupportedCoding checks Content-Encoding header lines: every listed coding must be identity
// (RFC 9110 section 8.4.1), since the runtime fingerprints and decodes the bytes as sent and
// does not decompress. It returns the first other coding and false.
func unsupportedCoding(lines []string) (string, bool) {
	for _, l := range lines {
		for c := range strings.SplitSeq(l, ",") {
			c = strings.TrimSpace(c)
			if c != "" && !strings.EqualFold(c, "identity") {
				return c, false
			}
		}
	}
	return "", true
}
