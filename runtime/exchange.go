package runtime

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/gen"
)

// DefaultBodyLimit is limits.body and limits.response when an Operation leaves them zero:
// 1 MiB (DESIGN section 2).
const DefaultBodyLimit = 1 << 20

// BodyError is a request refused by the generated decoder or parameter parser: 400 body-invalid
// naming the JSON pointer (RFC 6901) of the offending value. It is gen.BodyError, kept here under
// its old name until the runtime's API is reworked; Fail accepts it, *canonical.Error, and any
// other error with a `Pointer() string` method.
type BodyError = gen.BodyError

// pointerError is what Fail recognises as a client error: *BodyError, *canonical.Error and any
// other error that names where in the request it is.
type pointerError interface {
	error
	Pointer() string
}

// Begin starts the exchange for a request to op. In the order fixed by DESIGN section 4 it
// resolves the scope (Config.ScopeStatus, 401 by default, problem `unauthenticated`), reads the
// body through http.MaxBytesReader (413 `body-too-large` above op.BodyLimit bytes, default 1 MiB,
// refused from Content-Length before reading when it already says so), and checks the media type
// against op.MediaTypes (415 `media-type-unsupported`): an entry that is a media range ("*/*",
// "type/*", RFC 9110 section 12.5.1) admits every type in it, a JSON type with a charset other
// than utf-8 is refused (RFC 8259 section 8.1), and so is a Content-Encoding other than identity
// (RFC 9110 section 15.5.16). When it returns false it has already
// written the problem response and nothing was recorded.
func (rt *Runtime) Begin(w http.ResponseWriter, r *http.Request, op *Operation) (*Exchange, bool) {
	x := &Exchange{rt: rt, w: w, r: r, op: op}
	if rt.cfg.SingleTenant {
		x.scope = ""
	} else {
		s, err := rt.cfg.Scope(r)
		if err != nil {
			// The ScopeFunc's reason stays in the logs: it may describe credentials.
			rt.obs.Outcome(op.ID, op.Mode, OutcomeUnauthorized)
			rt.log.Debug("request refused: no scope", "operation", op.ID, "error", err)
			rt.probes.write(w, rt.cfg.ScopeStatus, ProblemUnauthenticated,
				"The request could not be attributed to a tenant; authenticate and retry.", "", 0)
			return nil, false
		}
		x.scope = s
	}

	limit := op.BodyLimit
	if limit <= 0 {
		limit = DefaultBodyLimit
	}
	if r.ContentLength > limit {
		rt.refuseBody(x, http.StatusRequestEntityTooLarge, ProblemBodyTooLarge,
			fmt.Sprintf("The body has %d bytes; the limit is %d.", r.ContentLength, limit))
		return nil, false
	}
	if r.Body != nil {
		body, err := readBody(w, r, limit)
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			rt.refuseBody(x, http.StatusRequestEntityTooLarge, ProblemBodyTooLarge,
				fmt.Sprintf("The body is larger than the limit of %d bytes.", limit))
			return nil, false
		case err != nil:
			rt.refuseBody(x, http.StatusBadRequest, ProblemBodyInvalid, "The body could not be read: "+err.Error())
			return nil, false
		}
		x.body = body
	}

	if len(x.body) > 0 {
		if coding, ok := unsupportedCoding(r.Header.Values("Content-Encoding")); !ok {
			// RFC 9110 section 12.5.3: a 415 for a content coding lists the codings accepted.
			w.Header().Set("Accept-Encoding", "identity")
			rt.refuseBody(x, http.StatusUnsupportedMediaType, ProblemMediaTypeUnsupported,
				fmt.Sprintf("Content-Encoding %q is not supported: send the body without a content coding (RFC 9110 section 15.5.16); the body is fingerprinted and decoded as sent.", coding))
			return nil, false
		}
	}
	ct := r.Header.Get("Content-Type")
	if declared := exactMediaType(op.MediaTypes, ct); declared != "" {
		// The common case, a Content-Type spelled as declared: nothing to parse.
		x.mediaType = declared
		return x, true
	}
	if ct != "" || len(x.body) > 0 {
		mt, params, err := mime.ParseMediaType(ct)
		mt = strings.ToLower(mt)
		if len(op.MediaTypes) > 0 && (err != nil || matchMediaType(op.MediaTypes, mt) == "") {
			rt.refuseBody(x, http.StatusUnsupportedMediaType, ProblemMediaTypeUnsupported,
				fmt.Sprintf("Content-Type %q is not one of %s.", ct, strings.Join(op.MediaTypes, ", ")))
			return nil, false
		}
		if err == nil {
			if cs, ok := params["charset"]; ok && isJSONMediaType(mt) && !strings.EqualFold(cs, "utf-8") {
				rt.refuseBody(x, http.StatusUnsupportedMediaType, ProblemMediaTypeUnsupported,
					fmt.Sprintf("Content-Type %q declares charset %q; JSON is UTF-8 (RFC 8259 section 8.1): send UTF-8 with charset=utf-8 or no charset.", ct, cs))
				return nil, false
			}
			x.mediaType = mt
		}
	}
	return x, true
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

// exactMediaType returns the declared media type that ct spells exactly (letter case aside), with
// no parameters, or "".
func exactMediaType(declared []string, ct string) string {
	for _, d := range declared {
		if len(d) == len(ct) && strings.EqualFold(d, ct) && !strings.Contains(d, "*") {
			return strings.ToLower(d)
		}
	}
	return ""
}

// DeclaredMediaType returns the entry of Operation.MediaTypes that admitted the request: the
// request's own media type when it is declared, else the narrowest matching media range
// ("type/*" before "*/*", RFC 9110 section 12.5.1). It is "" when the operation declares no media
// types or the request has no body and no Content-Type. Generated code that picks a decoder per
// declared content switches on this, not on MediaType, so a wildcard entry finds its decoder.
func (x *Exchange) DeclaredMediaType() string {
	if x.mediaType == "" {
		return ""
	}
	return matchMediaType(x.op.MediaTypes, x.mediaType)
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
// +json structured syntax suffix (RFC 6839 section 3.1), the types the generated decoder reads as
// UTF-8 JSON.
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

func (rt *Runtime) refuseBody(x *Exchange, status int, name, detail string) {
	rt.obs.Outcome(x.op.ID, x.op.Mode, OutcomeBodyInvalid)
	rt.probes.write(x.w, status, name, detail, "", 0)
}

// finish marks the exchange as answered and reports whether it was still open. A second
// Fail/RunAtomic/RunLease is a bug in the caller (generated code calls exactly one): it is logged
// and ignored rather than writing a second response or running a handler twice.
func (x *Exchange) finish() bool {
	if x.done {
		x.rt.log.Error("runtime: Exchange answered twice; call exactly one of Fail, RunAtomic, RunLease", "operation", x.op.ID)
		return false
	}
	x.done = true
	return true
}

// Fail answers the request with the problem err describes, before any key lookup and without a
// record (DESIGN section 4): an error with a `Pointer() string` method (*canonical.Error,
// *BodyError) becomes 400 body-invalid with that JSON pointer in the problem's `pointer` member;
// anything else is a server bug and becomes 500 with no detail.
func (x *Exchange) Fail(err error) {
	if !x.finish() {
		return
	}
	var ce *canonical.Error
	if errors.As(err, &ce) {
		x.rt.obs.Outcome(x.op.ID, x.op.Mode, OutcomeBodyInvalid)
		x.rt.probes.write(x.w, http.StatusBadRequest, ProblemBodyInvalid, ce.Error(), ce.Pointer, 0)
		return
	}
	var pe pointerError
	if errors.As(err, &pe) {
		x.rt.obs.Outcome(x.op.ID, x.op.Mode, OutcomeBodyInvalid)
		x.rt.probes.write(x.w, http.StatusBadRequest, ProblemBodyInvalid, pe.Error(), pe.Pointer(), 0)
		return
	}
	x.rt.log.Error("idempotent request failed before the key check", "operation", x.op.ID, "error", err)
	x.rt.probes.write(x.w, http.StatusInternalServerError, ProblemInternal, "", "", 0)
}

// HeaderKey reads the key from the operation's key header (Operation.Key.Header, matched
// case-insensitively). Present is false when no such header line exists; two or more lines are
// kept so that the key check refuses them (400 key-invalid, DESIGN section 2).
func (x *Exchange) HeaderKey() Key {
	vals := x.r.Header.Values(x.op.Key.Header)
	if len(vals) == 0 {
		return Key{}
	}
	return Key{Value: vals[0], Present: true, lines: len(vals)}
}

// resolveKey applies the key rules; ok is false when it has answered 400. key is "" when the key
// is absent and optional: the request runs unguarded.
func (x *Exchange) resolveKey(k Key) (key string, ok bool) {
	if !k.Present {
		if x.op.Key.Required {
			x.rt.obs.Outcome(x.op.ID, x.op.Mode, OutcomeKeyMissing)
			x.rt.probes.write(x.w, http.StatusBadRequest, ProblemKeyMissing, x.keyWhere()+" is required.", "", 0)
			return "", false
		}
		return "", true
	}
	v, err := checkKey(k, &x.op.Key, x.rt.matcher)
	if err != nil {
		x.rt.obs.Outcome(x.op.ID, x.op.Mode, OutcomeKeyInvalid)
		x.rt.probes.write(x.w, http.StatusBadRequest, ProblemKeyInvalid, x.keyWhere()+": "+err.Error()+".", "", 0)
		return "", false
	}
	return v, true
}

func (x *Exchange) keyWhere() string {
	if x.op.Key.Header != "" {
		return "The " + x.op.Key.Header + " header"
	}
	return "The idempotency key at " + x.op.Key.BodyPointer
}

// RunAtomic validates key (400 key-missing / key-invalid), then runs the state machine in atomic
// mode (DESIGN section 4): a new key runs fn inside the transaction that also stores its final
// response; a completed key with the same fingerprint replays; a different fingerprint or
// operation is 422; a concurrent claim is 409 in-flight with Retry-After (after at most
// Operation.Wait, which turns into a replay when the first request finishes in time); an
// unreachable store is 503 and fn never runs. A missing optional key runs fn unguarded in a plain
// transaction.
func (x *Exchange) RunAtomic(key Key, fp canonical.Fingerprint, fn AtomicFunc) {
	if !x.finish() {
		return
	}
	k, ok := x.resolveKey(key)
	if !ok {
		return
	}
	if k == "" {
		x.rt.runUnguardedAtomic(x, fn)
		return
	}
	x.rt.runAtomic(x, k, fp, fn)
}

// RunLease validates key, then runs the state machine in lease mode (DESIGN section 4): a new key
// commits a claim with a lease of Operation.Lease on the database clock and a fencing token, runs
// fn outside any transaction, then runs the CompleteFunc it returns in a transaction that
// compares and swaps the token and stores the final response. A failure releases the key. A
// running claim answers 409 until its lease ends; then the same fingerprint takes over (the old
// owner's completion fails) and a different one gets 422.
func (x *Exchange) RunLease(key Key, fp canonical.Fingerprint, fn LeaseFunc) {
	if !x.finish() {
		return
	}
	k, ok := x.resolveKey(key)
	if !ok {
		return
	}
	if k == "" {
		x.rt.runUnguardedLease(x, fn)
		return
	}
	x.rt.runLease(x, k, fp, fn)
}

// answerExisting answers a request whose key has a live record that it did not claim: replay,
// 422 or 409. It reports the outcome.
func (rt *Runtime) answerExisting(x *Exchange, rec *record, fp canonical.Fingerprint, key string) {
	op := x.op
	switch {
	case rec.operation != op.ID || !rec.sameRequest(fp):
		rt.obs.Outcome(op.ID, op.Mode, OutcomeMismatch)
		detail := "The key was used with a different request."
		if rec.operation != op.ID {
			detail = "The key was used with another operation."
		}
		rt.probes.write(x.w, http.StatusUnprocessableEntity, ProblemPayloadMismatch, detail, "", 0)
	case rec.completed():
		rt.obs.Outcome(op.ID, op.Mode, OutcomeReplayed)
		writeReplay(x.w, rec)
	default:
		rt.conflict(x, rec.leaseLeft)
	}
}

// conflict answers 409 in-flight; left is the running lease's remaining time (0 in atomic mode).
func (rt *Runtime) conflict(x *Exchange, left time.Duration) {
	rt.obs.Outcome(x.op.ID, x.op.Mode, OutcomeConflict)
	if left <= 0 {
		left = rt.cfg.ConflictRetryAfter
	}
	rt.probes.write(x.w, http.StatusConflict, ProblemInFlight,
		"A request with this key is still being processed; retry after the Retry-After delay.", "", left)
}

// storeUnavailable answers 503 and logs err with the key's hash. A store call cut short because
// the client went away (its request context ended) is not a store failure: it is counted as
// canceled and logged at Info, so a disconnecting client cannot page anyone.
func (rt *Runtime) storeUnavailable(x *Exchange, key string, err error) {
	if x.r.Context().Err() != nil {
		rt.obs.Outcome(x.op.ID, x.op.Mode, OutcomeCanceled)
		rt.log.Info("client went away during the idempotency store call", "operation", x.op.ID, "key_hash", keyHash(x.scope, key), "error", err)
	} else {
		rt.obs.Outcome(x.op.ID, x.op.Mode, OutcomeStoreError)
		rt.log.Error("idempotency store unavailable", "operation", x.op.ID, "key_hash", keyHash(x.scope, key), "error", err)
	}
	rt.probes.write(x.w, http.StatusServiceUnavailable, ProblemStoreUnavailable,
		"The idempotency store cannot be reached; the request was not processed.", "", rt.cfg.StoreRetryAfter)
}

// handlerFailed answers 500 for a handler error or panic after the key was released.
func (rt *Runtime) handlerFailed(x *Exchange, key string, err error) {
	rt.obs.Outcome(x.op.ID, x.op.Mode, OutcomeReleased)
	rt.log.Error("idempotent handler failed; key released", "operation", x.op.ID, "key_hash", keyHash(x.scope, key), "error", err)
	rt.probes.write(x.w, http.StatusInternalServerError, ProblemInternal, "", "", 0)
}

// stored is a final response prepared for the record (DESIGN section 5).
type stored struct {
	status  int
	headers []byte
	body    []byte
	omitted bool
}

func prepareStored(op *Operation, resp Response) (stored, error) {
	h, err := storableHeaders(op, resp.Header)
	if err != nil {
		return stored{}, fmt.Errorf("encode headers: %w", err)
	}
	limit := op.ResponseLimit
	if limit <= 0 {
		limit = DefaultBodyLimit
	}
	s := stored{status: resp.Status, headers: h, body: resp.Body}
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if int64(len(resp.Body)) > limit {
		s.body, s.omitted = nil, true
	}
	if s.body == nil && !s.omitted {
		s.body = []byte{}
	}
	return s, nil
}

// panicError is a recovered handler panic.
type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("handler panicked: %v", p.v) }
