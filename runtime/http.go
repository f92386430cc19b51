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
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
	"github.com/idemgen/idemgen/runtime/store"
)

// This file is the HTTP layer: the only code that reads a marked operation's request or writes
// its response. A request goes through it top-down:
//
//	admit    scope (401), body size (413), content coding and media type (415)
//	prepare  the operation's decoder (400 body-invalid) and fingerprint, then the key (400)
//	run      the state machine of the operation's mode (atomic.go, lease.go)
//	finish   one outcome: observed, logged, and written as a response, a replay or a problem
//
// None of the refusals before run touches the store or leaves a record.

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
	// tmpl is the operation's path template and segs the request's decoded path segments
	// (pathValue); for a request an adapter routed (Guard.Serve), segs are the template's
	// segments with the router's values in its parameter segments.
	tmpl *gen.Template
	segs []string
}

// id is the record the request's key names.
func (x *exchange) id() store.ID { return store.ID{Scope: x.scope, Key: x.op.storedKey(x.key)} }

// claim is what a claim of the request's key writes.
func (x *exchange) claim() store.Claim {
	c := store.Claim{ID: x.id(), Tenant: x.tenant, Operation: x.op.ID, Fingerprint: x.fp, Retention: x.op.retention(), Wait: x.op.Wait}
	if x.op.Mode == ModeLease {
		c.Lease, c.Wait = x.op.lease(), 0
	}
	return c
}

// result is how one request ends: exactly one of a problem (Problem.Status set), a replay or
// the handler's own response.
type result struct {
	outcome Outcome
	problem Problem
	replay  *store.Response
	resp    Response
	// err is what the log says about an outcome that is logged (store errors, handler
	// failures); stack is a recovered panic's stack.
	err   error
	stack []byte
}

// answered reports whether r ends the request (the zero result lets it go on).
func (r *result) answered() bool { return r.outcome != "" }

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
	x := &exchange{rt: rt, op: ep.op, r: r, tmpl: &ep.tmpl, prof: rt.profileOf(ep.op)}
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
			// hashed the first time something asks for them.
			res = run(context.WithValue(ctx, logIdentityKey{}, &logIdentity{x: x}), x)
		}
	}
	if traced {
		span.SetAttributes(attrOutcome.String(string(res.outcome)))
		if res.problem.Status >= 500 {
			span.SetStatus(codes.Error, res.problem.Name)
		}
	}
	rt.finish(w, x, res)
}

// endpoint is an operation as the HTTP layer serves it, with what is made once per operation
// rather than once per request.
type endpoint struct {
	op   *Operation
	tmpl gen.Template // op.Path
	// spanStart are the request span's start options: its kind, and the operation and mode as
	// attributes, so that a Sampler sees them.
	spanStart []trace.SpanStartOption
}

func newEndpoint(op *Operation) *endpoint {
	return &endpoint{op: op, tmpl: gen.ParseTemplate(op.Path), spanStart: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal),
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
			// The ScopeFunc's reason stays in the logs: it may describe credentials.
			return result{outcome: OutcomeUnauthorized, err: err, problem: newProblem(rt.cfg.ScopeStatus,
				ProblemUnauthenticated, "The request could not be attributed to a tenant; authenticate and retry.")}
		}
		x.scope = s
	}
	x.tenant = x.scope
	x.scope = op.RequestScope(x.scope, r.Header)
	if id := x.prof.RequestID; id != nil && id.Header != "" {
		x.requestID = id.newID()
	}
	x.scoped = true
	if name, bad := op.badScopeHeader(r.Header); bad {
		// Refused before any lookup: a value that names no account must not make a scope of
		// its own (each would get fresh keys and caps).
		res := refused(http.StatusBadRequest, ProblemBodyInvalid, "The "+name+" header does not hold a valid account id.")
		res.problem.Pointer = "/header/" + name
		return res
	}
	limit := op.bodyLimit()
	if r.ContentLength > limit {
		return refused(http.StatusRequestEntityTooLarge, ProblemBodyTooLarge,
			fmt.Sprintf("The body has %d bytes; the limit is %d.", r.ContentLength, limit))
	}
	if r.Body != nil {
		body, err := readBody(w, r, limit)
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return refused(http.StatusRequestEntityTooLarge, ProblemBodyTooLarge,
				fmt.Sprintf("The body is larger than the limit of %d bytes.", limit))
		case err != nil:
			return refused(http.StatusBadRequest, ProblemBodyInvalid, "The body could not be read: "+err.Error())
		}
		x.body = body
	}
	if len(x.body) > 0 {
		if coding, ok := unsupportedCoding(r.Header.Values("Content-Encoding")); !ok {
			// RFC 9110 section 12.5.3: a 415 for a content coding lists the codings accepted.
			w.Header().Set("Accept-Encoding", "identity")
			return refused(http.StatusUnsupportedMediaType, ProblemMediaTypeUnsupported,
				fmt.Sprintf("Content-Encoding %q is not supported: send the body without a content coding (RFC 9110 section 15.5.16); the body is fingerprinted and decoded as sent.", coding))
		}
	}
	if cts := r.Header.Values("Content-Type"); len(cts) > 1 {
		// Which one the decoder, the fingerprint and the handler would each take is a guess.
		return refused(http.StatusBadRequest, ProblemBodyInvalid, "The request has more than one Content-Type header line; send one.")
	}
	ct := r.Header.Get("Content-Type")
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
		return refused(http.StatusUnsupportedMediaType, ProblemMediaTypeUnsupported,
			fmt.Sprintf("Content-Type %q is not one of %s.", ct, strings.Join(op.MediaTypes, ", ")))
	}
	if err != nil {
		return result{}
	}
	if cs, ok := params["charset"]; ok && isJSONMediaType(mt) && !strings.EqualFold(cs, "utf-8") {
		return refused(http.StatusUnsupportedMediaType, ProblemMediaTypeUnsupported,
			fmt.Sprintf("Content-Type %q declares charset %q; JSON is UTF-8 (RFC 8259 section 8.1): send UTF-8 with charset=utf-8 or no charset.", ct, cs))
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

// refused is a request refused before its key is looked at.
func refused(status int, name, detail string) result {
	return result{outcome: OutcomeBodyInvalid, problem: newProblem(status, name, detail)}
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
	run, fp, err := decodeRequest(x, in, decode)
	if err != nil {
		return nil, x.rt.decodeFailed(err)
	}
	x.fp = fp
	k := rawKey{}
	if op.Key.Header != "" {
		if vals := x.r.Header.Values(op.Key.Header); len(vals) > 0 {
			k = rawKey{value: vals[0], present: true, lines: len(vals)}
		}
	} else {
		k.value, k.present = in.BodyKey()
	}
	return run, x.resolveKey(k)
}

// pointerError is a decoder's refusal that names where in the request it is: *gen.BodyError,
// *canonical.Error, or any error with a Pointer method.
type pointerError interface {
	error
	Pointer() string
}

// decodeFailed answers a decoder's error: 400 body-invalid with the JSON pointer when the error
// names one; anything else is a bug in the decoder, 500.
func (rt *Runtime) decodeFailed(err error) result {
	var be *gen.BodyError
	if errors.As(err, &be) && be.Status == http.StatusRequestEntityTooLarge {
		// A multipart part over limits.part: the body's own cap, per part.
		p := newProblem(http.StatusRequestEntityTooLarge, ProblemBodyTooLarge, be.Error())
		p.Pointer = be.At
		return result{outcome: OutcomeBodyInvalid, problem: p}
	}
	var ce *canonical.Error
	if errors.As(err, &ce) {
		p := newProblem(http.StatusBadRequest, ProblemBodyInvalid, ce.Error())
		p.Pointer = ce.Pointer
		return result{outcome: OutcomeBodyInvalid, problem: p}
	}
	var pe pointerError
	if errors.As(err, &pe) {
		p := newProblem(http.StatusBadRequest, ProblemBodyInvalid, pe.Error())
		p.Pointer = pe.Pointer()
		return result{outcome: OutcomeBodyInvalid, problem: p}
	}
	return result{outcome: OutcomeInternal, err: err, problem: newProblem(http.StatusInternalServerError, ProblemInternal, "")}
}

// resolveKey applies the key rules to the key the request carried. The key stays "" when it is
// absent and optional: the request then runs unguarded.
func (x *exchange) resolveKey(k rawKey) result {
	rule := &x.op.Key
	if !k.present {
		if rule.Required {
			return result{outcome: OutcomeKeyMissing, problem: newProblem(http.StatusBadRequest, ProblemKeyMissing, x.keyWhere()+" is required.")}
		}
		return result{}
	}
	v, err := checkKey(k, rule, x.rt.matcher.MatchWhole)
	if err != nil {
		return result{outcome: OutcomeKeyInvalid, problem: newProblem(http.StatusBadRequest, ProblemKeyInvalid, x.keyWhere()+": "+err.Error()+".")}
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
		return result{outcome: OutcomeKeyInvalid, problem: newProblem(http.StatusBadRequest, ProblemKeyInvalid,
			"The "+name+" header must hold the time of the first attempt, once, as an IMF-fixdate (RFC 9110 section 5.6.7).")}
	}
	if time.Since(sent) > x.op.retention() {
		return result{outcome: OutcomeKeyInvalid, problem: newProblem(http.StatusPreconditionFailed, ProblemKeyExpired,
			fmt.Sprintf("The first attempt (%s) is older than the %s this server keeps requests for: it cannot tell whether that attempt ran. Send a new request with a new key.", vals[0], x.op.retention()))}
	}
	return result{}
}

func (x *exchange) keyWhere() string {
	if x.op.Key.Header != "" {
		return "The " + x.op.Key.Header + " header"
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

// finish ends the request with res: the observer counts it, the log records what needs a
// record, and exactly one response is written.
func (rt *Runtime) finish(w http.ResponseWriter, x *exchange, res result) {
	rt.obs.Outcome(x.op.ID, x.op.Mode, res.outcome)
	rt.logResult(x, &res)
	decorate := func(h http.Header) { x.profileHeaders(h, &res) }
	switch {
	case res.problem.Status != 0:
		decorate(w.Header())
		rt.problemWriter(x.prof)(w, x.r, res.problem)
	case res.replay != nil:
		writeReplay(w, res.replay, decorate)
	default:
		writeResponse(w, res.resp, decorate)
	}
}

// profileHeaders adds what every answer carries besides the response, after any stored
// headers: OASIS Repeatable Requests' Repeatability-Result for an operation that takes
// Repeatability-First-Sent, and what the profile adds (answerHeaders).
func (x *exchange) profileHeaders(h http.Header, res *result) {
	if x.op.Key.FirstSent != "" {
		// OASIS Repeatable Requests: whether the server took the request as repeatable.
		switch {
		case res.problem.Status >= 400 && res.problem.Status < 500:
			h.Set("Repeatability-Result", "rejected")
		case res.problem.Status == 0:
			h.Set("Repeatability-Result", "accepted")
		}
	}
	if x.prof.EchoKey {
		x.echoKey(h)
	}
	if id := x.prof.RequestID; id != nil && x.requestID != "" {
		x.requestIDs(h, id, res.replay != nil)
	}
}

// echoKey repeats the key header back (Profile.EchoKey): the validated key, or, for a request
// refused before its key was read (a body the schema refuses, a media type the operation does
// not take), the key as sent, unless it is longer than a valid key can be.
func (x *exchange) echoKey(h http.Header) {
	key, name := x.key, x.op.Key.Header
	if name == "" {
		return // a body-carried key has no header to echo
	}
	if key == "" {
		max := x.op.Key.MaxLength
		if max == 0 {
			max = DefaultKeyMaxLength
		}
		if k := x.r.Header.Get(name); len(k) <= max {
			key = k
		}
	}
	if key != "" {
		h.Set(name, key)
	}
}

// requestIDs sets the answer's id and names the execution whose response it is
// (Profile.RequestID): a replay gets this request's id and names the stored one; other answers
// keep an id the handler set.
func (x *exchange) requestIDs(h http.Header, id *RequestID, replayed bool) {
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
	if x.requestID == "" || resp.Header.Get(id.Header) != "" {
		return
	}
	resp.Header = resp.Header.Clone()
	if resp.Header == nil {
		resp.Header = http.Header{}
	}
	resp.Header.Set(id.Header, x.requestID)
}

// logResult writes the log line an outcome deserves, with the request's context (so a
// trace-aware handler can add its ids), the operation, and digests of the tenant and the key
// (logAttrs), never the tenant or the key.
func (rt *Runtime) logResult(x *exchange, res *result) {
	var (
		level slog.Level
		msg   string
	)
	switch res.outcome {
	case OutcomeStoreError:
		level, msg = slog.LevelError, "idempotency store failed"
	case OutcomeCanceled:
		level, msg = slog.LevelInfo, "client went away during the idempotency store call"
	case OutcomeReleased, OutcomeInternal:
		var foreign *foreignResponse
		switch {
		case res.err == nil:
			return // a non-final status: the handler's own answer
		case errors.As(res.err, &foreign):
			// A router's 404 or redirect in front of which the Middleware ran: a client can
			// cause it at will, so it is not an error.
			level, msg = slog.LevelInfo, "response not produced by the operation's handler; not stored, key released"
		default:
			level, msg = slog.LevelError, "idempotent handler failed; key released"
		}
	case OutcomeLeaseLost:
		level, msg = slog.LevelWarn, "lease lost before completion; result discarded"
	case OutcomeUnauthorized:
		level, msg = slog.LevelDebug, "request refused: no scope"
	default:
		return
	}
	ctx := x.r.Context()
	if !rt.log.Enabled(ctx, level) {
		return
	}
	attrs := x.logAttrs()
	if res.err != nil {
		attrs = append(attrs, slog.Any("error", res.err))
	}
	if len(res.stack) > 0 {
		attrs = append(attrs, slog.String("stack", string(res.stack)))
	}
	rt.log.LogAttrs(ctx, level, msg, attrs...)
}

// Answers of the state machine, shared by both modes.

// replayed sends the record's stored response.
func replayed(rec *store.Record) result {
	return result{outcome: OutcomeReplayed, replay: &rec.Response}
}

// answerRecord answers a request whose key has a live record it did not claim: replay, 422 or
// 409. retryAfter is the 409's Retry-After.
func (x *exchange) answerRecord(rec *store.Record) result {
	switch decide(x.op.Mode, x.op.ID, x.fp, rec) {
	case verdictMismatch:
		detail := "The key was used with a different request."
		if rec.Operation != x.op.ID {
			detail = "The key was used with another operation."
		}
		return result{outcome: OutcomeMismatch, problem: newProblem(http.StatusUnprocessableEntity, ProblemPayloadMismatch, detail)}
	case verdictReplay:
		return replayed(rec)
	default:
		return x.inFlight(rec.LeaseLeft)
	}
}

// inFlight answers 409; left is a running lease's remaining time (0: the default Retry-After).
func (x *exchange) inFlight(left time.Duration) result {
	p := newProblem(http.StatusConflict, ProblemInFlight, "A request with this key is still being processed; retry after the Retry-After delay.")
	p.RetryAfter = left
	if left <= 0 {
		p.RetryAfter = x.rt.cfg.ConflictRetryAfter
	}
	return result{outcome: OutcomeConflict, problem: p}
}

// storeFailed answers a store error by what it means (classify). A failure before anything was
// sent to be committed says the request was not processed; a commit whose outcome is unknown
// says so, and the retry with the same key finds out. A store call cut short because the client
// went away is not a store failure: it is counted as canceled, so a disconnecting client cannot
// page anyone.
func (x *exchange) storeFailed(err error) result {
	var done *store.CompletedError
	switch f := classify(x.op.Mode, err); {
	case f == faultBusy:
		return x.inFlight(0)
	case f == faultCompleted:
		errors.As(err, &done)
		return x.answerRecord(&done.Record)
	case f == faultLeaseLost:
		p := newProblem(http.StatusConflict, ProblemInFlight, "This attempt's lease was taken over by a retry; retry to get its result.")
		p.RetryAfter = x.rt.cfg.ConflictRetryAfter
		return result{outcome: OutcomeLeaseLost, problem: p}
	case f == faultHandler:
		return x.handlerFailed(err, nil)
	case f == faultLimited:
		var lim *store.LimitError
		p := newProblem(http.StatusTooManyRequests, ProblemRateLimited,
			"This tenant has created too many new idempotency keys in the current interval; the request was not processed. Retry after the Retry-After delay.")
		p.RetryAfter = time.Second
		if errors.As(err, &lim) && lim.RetryAfter > 0 {
			p.RetryAfter = lim.RetryAfter
		}
		return result{outcome: OutcomeLimited, problem: p}
	case f == faultUnknown, x.calledOut:
		p := newProblem(http.StatusServiceUnavailable, ProblemStoreUnavailable,
			"The idempotency store failed after the request began to run; the outcome is unknown. Retry with the same key: the retry replays the result if it was stored, or completes the request once if not.")
		p.RetryAfter = x.rt.cfg.StoreRetryAfter
		return result{outcome: OutcomeStoreError, err: err, problem: p}
	}
	p := newProblem(http.StatusServiceUnavailable, ProblemStoreUnavailable, "The idempotency store cannot be reached; the request was not processed.")
	p.RetryAfter = x.rt.cfg.StoreRetryAfter
	if x.r.Context().Err() != nil {
		return result{outcome: OutcomeCanceled, err: err, problem: p}
	}
	return result{outcome: OutcomeStoreError, err: err, problem: p}
}

// handlerFailed answers 500 for a handler error or panic; the key is free again.
func (x *exchange) handlerFailed(err error, stack []byte) result {
	return result{outcome: OutcomeReleased, err: err, stack: stack, problem: newProblem(http.StatusInternalServerError, ProblemInternal, "")}
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
	var one [1]byte
	if k, _ := r.Body.Read(one[:]); k == 0 {
		return body, nil
	}
	rest, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit-n-1))
	return append(append(body, one[0]), rest...), err
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
