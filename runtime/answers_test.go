package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/store"
)

// heard is what one ending sounds like to the client, as written by the default ProblemWriter.
type heard struct {
	status   int
	problem  string // "" for a response that is not a problem
	detail   string
	replayed bool
}

// Every ending is answered, as the contract says (the decision table of docs/design.md section 1 and section 2:
// 400 key and body refusals, 401 without a scope, 409 + Retry-After in flight, 412 for an
// expired first attempt, 413, 415, 422 mismatch, 429 + Retry-After, 500, 503 + Retry-After,
// Idempotent-Replayed on a replay), is counted under its outcome, is logged when it should be,
// and no two endings that mean different things to a client sound the same (status, problem
// and detail): a client must be able to tell "not processed" from "outcome unknown".
func TestEveryEndingIsAnswered(t *testing.T) {
	e := newMemEnv(t, nil)
	op := payOp()
	op.Key.FirstSent = "Repeatability-First-Sent"
	stored := &store.Record{Response: store.Response{Status: 201, Body: []byte(`{"id":1}`)}}
	handlers := Response{Status: 201, Body: []byte(`{"id":1}`)}
	// meaning groups the endings that are meant to sound alike: a client does the same after
	// each of them (the server's own failures say nothing of their cause to the client; a
	// client that went away hears what any client would of a store call that failed).
	cases := map[ending]struct {
		name       string
		res        result
		status     int
		problem    string
		retryAfter string // "" for none
		replayed   bool
		outcome    Outcome
		logged     bool
		meaning    string
	}{
		endUnauthenticated:      {"unauthenticated", result{err: errors.New("no token")}, 401, ProblemUnauthenticated, "", false, OutcomeUnauthorized, true, "authenticate"},
		endScopeHeaderInvalid:   {"scope header invalid", result{sent: "X-Account"}, 400, ProblemBodyInvalid, "", false, OutcomeBodyInvalid, false, "fix the request"},
		endBodyTooLarge:         {"body too large", result{size: 20, limit: 10}, 413, ProblemBodyTooLarge, "", false, OutcomeBodyInvalid, false, "send less"},
		endBodyOverLimit:        {"body over the limit", result{limit: 10}, 413, ProblemBodyTooLarge, "", false, OutcomeBodyInvalid, false, "send less"},
		endBodyUnreadable:       {"body unreadable", result{err: errors.New("unexpected EOF")}, 400, ProblemBodyInvalid, "", false, OutcomeBodyInvalid, false, "fix the request"},
		endCodingUnsupported:    {"content coding", result{sent: "gzip"}, 415, ProblemMediaTypeUnsupported, "", false, OutcomeBodyInvalid, false, "send another media type"},
		endContentTypeRepeated:  {"two Content-Types", result{}, 400, ProblemBodyInvalid, "", false, OutcomeBodyInvalid, false, "fix the request"},
		endMediaTypeUnsupported: {"media type", result{sent: "text/plain"}, 415, ProblemMediaTypeUnsupported, "", false, OutcomeBodyInvalid, false, "send another media type"},
		endCharsetUnsupported:   {"charset", result{sent: "application/json; charset=latin1", charset: "latin1"}, 415, ProblemMediaTypeUnsupported, "", false, OutcomeBodyInvalid, false, "send another media type"},
		endPartTooLarge:         {"part too large", result{err: errors.New("part file is over 10 bytes"), pointer: "/file"}, 413, ProblemBodyTooLarge, "", false, OutcomeBodyInvalid, false, "send less"},
		endBodyInvalid:          {"body invalid", result{err: &canonical.Error{Pointer: "/amount", Reason: "not a number"}, pointer: "/amount"}, 400, ProblemBodyInvalid, "", false, OutcomeBodyInvalid, false, "fix the request"},
		endDecoderFailed:        {"decoder failed", result{err: errors.New("decoder bug")}, 500, ProblemInternal, "", false, OutcomeInternal, true, "server failed"},
		endMisconfigured:        {"misconfigured", result{err: errors.New("no transactions")}, 500, ProblemInternal, "", false, OutcomeInternal, true, "server failed"},
		endMisuse:               {"middleware misused", result{}, 500, ProblemInternal, "", false, OutcomeInternal, true, "server failed"},
		endKeyMissing:           {"key missing", result{}, 400, ProblemKeyMissing, "", false, OutcomeKeyMissing, false, "send a key"},
		endKeyInvalid:           {"key invalid", result{err: errors.New("too long")}, 400, ProblemKeyInvalid, "", false, OutcomeKeyInvalid, false, "send a valid key"},
		endFirstSentInvalid:     {"first-sent invalid", result{}, 400, ProblemKeyInvalid, "", false, OutcomeKeyInvalid, false, "send a valid key"},
		endKeyExpired:           {"key expired", result{sent: "Mon, 01 Jan 2024 00:00:00 GMT"}, 412, ProblemKeyExpired, "", false, OutcomeKeyInvalid, false, "send a new key"},
		endReplayed:             {"replayed", result{rec: stored}, 201, "", "", true, OutcomeReplayed, false, "the earlier result"},
		endResultExpired:        {"result expired", result{rec: &store.Record{State: store.Expired, StatusClass: 2}}, 410, ProblemResultExpired, "", false, OutcomeExpired, false, "look the outcome up"},
		endMismatch:             {"mismatch", result{}, 422, ProblemPayloadMismatch, "", false, OutcomeMismatch, false, "key reused"},
		endOtherOperation:       {"other operation", result{}, 422, ProblemPayloadMismatch, "", false, OutcomeMismatch, false, "key reused"},
		endInFlight:             {"in flight", result{after: 1500 * time.Millisecond}, 409, ProblemInFlight, "2", false, OutcomeConflict, false, "wait, then retry"},
		endLeaseLost:            {"lease lost", result{}, 409, ProblemInFlight, "1", false, OutcomeLeaseLost, true, "retry for the new owner's result"},
		endLimited:              {"limited", result{after: 3 * time.Second}, 429, ProblemRateLimited, "3", false, OutcomeLimited, false, "slow down"},
		endStoreUnavailable:     {"store unavailable", result{err: errors.New("connection refused")}, 503, ProblemStoreUnavailable, "1", false, OutcomeStoreError, true, "not processed"},
		endCanceled:             {"canceled", result{err: errors.New("context canceled")}, 503, ProblemStoreUnavailable, "1", false, OutcomeCanceled, true, "not processed"},
		endDraining:             {"draining", result{}, 503, ProblemStoreUnavailable, "1", false, OutcomeDraining, true, "not processed"},
		endStoreUnknown:         {"store unknown", result{err: errors.New("commit: eof")}, 503, ProblemStoreUnavailable, "1", false, OutcomeStoreError, true, "outcome unknown"},
		endHandlerFailed:        {"handler failed", result{err: errors.New("boom"), stack: []byte("goroutine 1")}, 500, ProblemInternal, "", false, OutcomeReleased, true, "server failed"},
		endExecuted:             {"executed", result{resp: handlers}, 201, "", "", false, OutcomeExecuted, false, "the handler's answer"},
		endReleased:             {"released", result{resp: Response{Status: 503}}, 503, "", "", false, OutcomeReleased, false, "the handler's answer"},
		endForeign:              {"foreign", result{resp: Response{Status: 404}, err: &foreignResponse{reason: "router"}}, 404, "", "", false, OutcomeReleased, true, "the handler's answer"},
		endUnguarded:            {"unguarded", result{resp: handlers}, 201, "", "", false, OutcomeUnguarded, false, "the handler's answer"},
	}
	sounds := map[heard]ending{}
	for end := endNone + 1; end < endings; end++ {
		c, ok := cases[end]
		if !ok {
			t.Errorf("ending %d: not in this test's table", end)
			continue
		}
		res := c.res
		res.ending = end
		x := &exchange{rt: e.rt, op: op, r: req("t1", key1, body100), prof: e.rt.profileOf(op)}
		a := answer(x, &res)
		if a.msg == logNoAnswer {
			t.Errorf("%s: no answer", c.name)
			continue
		}
		if a.outcome != c.outcome || (a.msg != "") != c.logged {
			t.Errorf("%s: outcome %q logged %v (%q), want %q logged %v", c.name, a.outcome, a.msg != "", a.msg, c.outcome, c.logged)
		}
		w := httptest.NewRecorder()
		e.rt.finish(w, x, &res, &a)
		p := problemOf(t, w)
		got := heard{status: w.Code, problem: p.name, detail: p.doc.Detail, replayed: w.Header().Get(HeaderReplayed) == "true"}
		if got.status != c.status || got.problem != c.problem || got.replayed != c.replayed || w.Header().Get("Retry-After") != c.retryAfter {
			t.Errorf("%s: %d %q replayed %v Retry-After %q, want %d %q replayed %v Retry-After %q",
				c.name, got.status, got.problem, got.replayed, w.Header().Get("Retry-After"), c.status, c.problem, c.replayed, c.retryAfter)
		}
		if c.problem != "" && p.doc.Title == "" {
			t.Errorf("%s: problem without a title", c.name)
		}
		if c.problem == ProblemBodyInvalid && c.res.pointer != "" && p.doc.Pointer != c.res.pointer {
			t.Errorf("%s: pointer %q, want %q", c.name, p.doc.Pointer, c.res.pointer)
		}
		if ae := w.Header().Get("Accept-Encoding"); (ae == "identity") != (end == endCodingUnsupported) {
			// RFC 9110 section 12.5.3: only a 415 for a content coding lists the codings.
			t.Errorf("%s: Accept-Encoding %q", c.name, ae)
		}
		if other, ok := sounds[got]; ok && cases[other].meaning != c.meaning {
			t.Errorf("%s and %s sound the same to the client (%d %q %q) but mean %q and %q",
				cases[other].name, c.name, got.status, got.problem, got.detail, cases[other].meaning, c.meaning)
		}
		sounds[got] = end
	}
}

// The machines' endings: decide's verdicts on a record the request did not claim, and each
// store error, in both modes, as machine.go maps them.
func TestMachineEndings(t *testing.T) {
	e := newMemEnv(t, nil)
	fp := canonical.Fingerprint{Version: canonical.Version, Sum: [32]byte{1}}
	other := canonical.Fingerprint{Version: canonical.Version, Sum: [32]byte{2}}
	rec := func(op string, f canonical.Fingerprint, state store.State, left time.Duration) *store.Record {
		return &store.Record{Operation: op, Fingerprint: f, State: state, LeaseLeft: left}
	}
	// tomb is f's tombstone: its first bytes and version only (store.TombstoneSumBytes).
	tomb := func(f canonical.Fingerprint, version uint16) *store.Record {
		r := &store.Record{State: store.Expired, StatusClass: 2}
		r.Fingerprint.Version = version
		copy(r.Fingerprint.Sum[:store.TombstoneSumBytes], f.Sum[:])
		return r
	}
	records := []struct {
		name  string
		mode  Mode
		rec   *store.Record
		want  ending
		after time.Duration
	}{
		{"completed, same request", ModeAtomic, rec("pay", fp, store.Completed, 0), endReplayed, 0},
		{"completed, other request", ModeAtomic, rec("pay", other, store.Completed, 0), endMismatch, 0},
		{"completed, other operation", ModeLease, rec("refund", fp, store.Completed, 0), endOtherOperation, 0},
		{"running, same request", ModeLease, rec("pay", fp, store.Running, 2*time.Second), endInFlight, 2 * time.Second},
		{"running, other request", ModeLease, rec("pay", other, store.Running, time.Second), endMismatch, 0},
		{"running, lease ended, no takeover made", ModeLease, rec("pay", fp, store.Running, -time.Second), endInFlight, -time.Second},
		{"atomic meets an ended lease", ModeAtomic, rec("pay", fp, store.Running, -time.Second), endInFlight, -time.Second},
		{"tombstone, same request", ModeAtomic, tomb(fp, fp.Version), endResultExpired, 0},
		{"tombstone, same request, lease mode", ModeLease, tomb(fp, fp.Version), endResultExpired, 0},
		{"tombstone, other request", ModeAtomic, tomb(other, fp.Version), endMismatch, 0},
		{"tombstone, another fingerprint version", ModeLease, tomb(other, fp.Version+1), endResultExpired, 0},
	}
	for _, c := range records {
		x := &exchange{rt: e.rt, op: &Operation{ID: "pay", Mode: c.mode}, fp: fp}
		got := x.meet(c.rec)
		if got.ending != c.want || got.after != c.after || (c.want == endReplayed || c.want == endResultExpired) != (got.rec == c.rec) {
			t.Errorf("%s: ending %d after %v, want %d after %v", c.name, got.ending, got.after, c.want, c.after)
		}
	}

	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	lost := fmt.Errorf("complete: %w", store.ErrLost)
	errs := []struct {
		name      string
		mode      Mode
		err       error
		calledOut bool
		gone      bool // the client went away
		want      ending
		after     time.Duration
	}{
		{"busy", ModeAtomic, fmt.Errorf("claim: %w", store.ErrBusy), false, false, endInFlight, 0},
		{"completed first", ModeAtomic, &store.CompletedError{Record: *rec("pay", fp, store.Completed, 0)}, false, false, endReplayed, 0},
		{"completed first, other request", ModeLease, &store.CompletedError{Record: *rec("pay", other, store.Completed, 0)}, false, false, endMismatch, 0},
		{"lost, lease mode", ModeLease, lost, true, false, endLeaseLost, 0},
		{"lost, atomic mode", ModeAtomic, lost, false, false, endHandlerFailed, 0},
		{"transaction failed", ModeAtomic, fmt.Errorf("%w: x", store.ErrTxFailed), false, false, endHandlerFailed, 0},
		{"limited", ModeAtomic, fmt.Errorf("claim: %w", &store.LimitError{RetryAfter: 7 * time.Second}), false, false, endLimited, 7 * time.Second},
		{"outcome unknown", ModeAtomic, fmt.Errorf("commit: %w", store.ErrOutcomeUnknown), false, false, endStoreUnknown, 0},
		{"failed after the call phase", ModeLease, errors.New("connection reset"), true, false, endStoreUnknown, 0},
		{"failed after the call phase, client gone", ModeLease, errors.New("connection reset"), true, true, endStoreUnknown, 0},
		{"unavailable", ModeAtomic, errors.New("connection refused"), false, false, endStoreUnavailable, 0},
		{"unavailable, client gone", ModeLease, errors.New("context canceled"), false, true, endCanceled, 0},
	}
	for _, c := range errs {
		r := httptest.NewRequest("POST", "/", nil)
		if c.gone {
			r = r.WithContext(canceled)
		}
		x := &exchange{rt: e.rt, op: &Operation{ID: "pay", Mode: c.mode}, fp: fp, r: r, calledOut: c.calledOut}
		got := x.storeFailed(c.err)
		if got.ending != c.want || got.after != c.after {
			t.Errorf("%s: ending %d after %v, want %d after %v", c.name, got.ending, got.after, c.want, c.after)
		}
		logged := c.want == endStoreUnknown || c.want == endStoreUnavailable || c.want == endCanceled || c.want == endHandlerFailed
		if logged && !errors.Is(got.err, c.err) {
			t.Errorf("%s: logs %v, want the store's error", c.name, got.err)
		}
	}
}

// The handler phase's checks (callPhase's check functions): what each phase may return.
func TestPhaseChecks(t *testing.T) {
	e := newMemEnv(t, nil)
	x := &exchange{rt: e.rt, op: payOp()}
	cases := []struct {
		name    string
		phase   func() (Response, error)
		status  int
		failure string
	}{
		{"status 0 is 200", func() (Response, error) { return Response{}, nil }, 200, ""},
		{"a status", func() (Response, error) { return Response{Status: 201}, nil }, 201, ""},
		{"an error", func() (Response, error) { return Response{Status: 201}, errors.New("no") }, 0, "no"},
		{"a status out of range", func() (Response, error) { return Response{Status: 1000}, nil }, 0, "handler answered status 1000"},
		{"a panic", func() (Response, error) { panic("oops") }, 0, "handler panicked: oops"},
	}
	for _, c := range cases {
		h := callHandler(t.Context(), x, 0, func(_ context.Context, _ int) (Response, error) { return c.phase() })
		switch {
		case c.failure != "" && (h.failure == nil || h.failure.err.Error() != c.failure):
			t.Errorf("%s: %+v, want the failure %q", c.name, h, c.failure)
		case c.failure == "" && (h.failure != nil || h.resp.Status != c.status):
			t.Errorf("%s: %+v, want status %d", c.name, h, c.status)
		case c.name == "a panic" && !strings.Contains(string(h.failure.stack), "runtime/debug.Stack"):
			t.Errorf("%s: no stack", c.name)
		}
	}
	if _, f := checkCallPhase[int](nil, nil); f == nil || f.err.Error() != "lease handler returned no CompleteFunc" {
		t.Errorf("a call phase without a completion: %v", f)
	}
	if _, f := checkCallPhase[int](nil, http.ErrAbortHandler); f == nil || !errors.Is(f.err, http.ErrAbortHandler) {
		t.Errorf("a call phase error: %v", f)
	}
}
