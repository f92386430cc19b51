package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/defaults"
	"github.com/idemgen/idemgen/runtime/store"
)

// This file holds what the client hears. The HTTP layer (http.go) and the state machines
// (atomic.go, lease.go, machine.go) only say what happened to a request: a result whose ending
// names the case, with the facts its answer needs. answer turns that into the outcome the
// observer counts and the log records, and the status, problem, Retry-After and headers the
// client gets, in one switch, so that each case sounds one way and no two cases that mean
// different things to a client sound the same (answers_test.go).

// ending is how one request to a marked operation ended: what happened, not what is sent.
type ending uint8

const (
	// endNone: nothing has ended the request yet; it goes on to the next step.
	endNone ending = iota

	// Refusals before the key is looked at: nothing touches the store.

	// endUnauthenticated: the ScopeFunc refused the request (err).
	endUnauthenticated
	// endScopeHeaderInvalid: a scope header (sent) does not hold an account id.
	endScopeHeaderInvalid
	// endBodyTooLarge: the announced Content-Length (size) is above the body limit (limit).
	endBodyTooLarge
	// endBodyOverLimit: the body, read, ran past the body limit (limit).
	endBodyOverLimit
	// endBodyUnreadable: reading the body failed (err).
	endBodyUnreadable
	// endCodingUnsupported: the body has a content coding (sent) other than identity.
	endCodingUnsupported
	// endContentTypeRepeated: the request has more than one Content-Type line.
	endContentTypeRepeated
	// endMediaTypeUnsupported: the Content-Type (sent) is not one of Operation.MediaTypes.
	endMediaTypeUnsupported
	// endCharsetUnsupported: a JSON Content-Type (sent) declares a charset (charset) other
	// than UTF-8.
	endCharsetUnsupported
	// endPartTooLarge: a multipart part is over its limit (err says which, pointer where).
	endPartTooLarge
	// endBodyInvalid: the decoder refused the request at pointer (err says why).
	endBodyInvalid
	// endDecoderFailed: the decoder failed without naming where (err): a bug in it.
	endDecoderFailed
	// endMisconfigured: the Runtime's store cannot serve the operation (err; CheckStore).
	endMisconfigured
	// endMisuse: Middleware is mounted where it cannot guard the request (frameworks.go).
	endMisuse
	// endKeyMissing: the operation requires a key and the request has none.
	endKeyMissing
	// endKeyInvalid: the key breaks the key rules (err).
	endKeyInvalid
	// endFirstSentInvalid: the Repeatability-First-Sent header is absent, repeated or not a
	// date (OASIS Repeatable Requests).
	endFirstSentInvalid
	// endKeyExpired: the first attempt (sent) is older than the retention.
	endKeyExpired

	// The machines' endings: the key was looked at.

	// endReplayed: the key completed with the same request; rec holds its response.
	endReplayed
	// endResultExpired: the same request completed under the key and its answer's retention
	// has ended; rec is the key's tombstone (store.Expired). Nothing runs again.
	endResultExpired
	// endMismatch: the key names another request of this operation.
	endMismatch
	// endOtherOperation: the key names a request of another operation.
	endOtherOperation
	// endInFlight: the same request is still running under the key; after is its lease's
	// time left (0: unknown).
	endInFlight
	// endLeaseLost: lease mode; another request took the claim over before this one
	// completed, and this one's result is discarded.
	endLeaseLost
	// endLimited: the store refused a new record under its per-scope limit; after is the
	// store's wait (0: none given). Nothing ran.
	endLimited
	// endStoreUnavailable: the store failed (err) before anything was committed or called.
	endStoreUnavailable
	// endCanceled: a store call failed (err) because the client went away; nothing ran.
	endCanceled
	// endDraining: the process is shutting down (Runtime.Shutdown): the key had no live record
	// (or the request no key), and nothing ran; err, when set, is the store call Shutdown cut
	// short.
	endDraining
	// endStoreUnknown: the store failed (err) after the request began to run: a commit
	// whose outcome is unknown, or a failure after a lease-mode call phase.
	endStoreUnknown
	// endHandlerFailed: the handler returned an error, panicked (stack) or made its
	// transaction fail (err); everything was rolled back and the key is free.
	endHandlerFailed
	// endExecuted: the handler's final response (resp) was stored.
	endExecuted
	// endReleased: the handler answered a status that is not final (resp); the key is free.
	endReleased
	// endForeign: the response (resp) is not the operation's handler's (a router's 404 in
	// front of which Middleware ran; err says why); delivered, never stored, key released.
	endForeign
	// endUnguarded: an optional key was absent; the handler ran without a record (resp).
	endUnguarded

	endings // the number of endings, for tests that walk them all
)

// result is how one request ended: its ending and the facts its answer needs. Which facts are
// set depends on the ending (see each one).
type result struct {
	ending ending
	// rec is the live record a replay sends.
	rec *store.Record
	// resp is the handler's own response.
	resp Response
	// after is how long the facts say the client should wait (a running lease's time left,
	// the store's limit window); 0: the answer's default.
	after time.Duration
	// sent is what the request sent that was refused (a header's name or value, a content
	// coding, a Content-Type); charset the charset it declared.
	sent, charset string
	// size and limit are the body's announced size and the operation's body limit, in bytes.
	size, limit int64
	// pointer is where in the request a decoder's refusal is (RFC 6901).
	pointer string
	// err is what the log says about an ending that is logged (store errors, handler
	// failures), and the reason a refusal's detail quotes; stack is a recovered panic's.
	err   error
	stack []byte
	// claimed is when the request took its key's claim (zero: it never held one), for the
	// ExecutionObserver.
	claimed time.Time
}

// answered reports whether r ends the request (the zero result lets it go on).
func (r *result) answered() bool { return r.ending != endNone }

// reply is what a result becomes: the outcome counted and logged, and what the client gets
// besides the handler's own or the stored response.
type reply struct {
	outcome Outcome
	// problem is the error answer (Status 0: the answer is a replay or the handler's response).
	problem Problem
	// replayed: the answer is the stored response of an earlier request (Idempotent-Replayed).
	replayed bool
	// acceptEncoding is the Accept-Encoding header of a 415 for a content coding.
	acceptEncoding string
	// expires is when the stored answer stops replaying (HeaderKeyExpires); zero: no header.
	expires time.Time
	// level and msg are the log line the ending deserves; msg "" logs nothing.
	level slog.Level
	msg   string
}

// Log messages of the endings that are logged.
const (
	logStoreFailed     = "idempotency store failed"
	logCanceled        = "client went away during the idempotency store call"
	logDraining        = "request refused: the process is shutting down"
	logHandlerFailed   = "idempotent handler failed; key released"
	logForeign         = "response not produced by the operation's handler; not stored, key released"
	logLeaseLost       = "lease lost before completion; result discarded"
	logUnauthenticated = "request refused: no scope"
	logMisuse          = "idempotency middleware mounted where it cannot guard the request; refused"
	logNoAnswer        = "request ended in a way the runtime has no answer for; answered 500"
)

// resultExpiredDetail says what a retry that met its key's tombstone needs to know: the
// operation ran (when, and how it ended), its answer is gone, and it will not run again.
func resultExpiredDetail(x *exchange, rec *store.Record) string {
	ran := "A request with this key completed"
	if !rec.CompletedAt.IsZero() {
		ran += " at " + rec.CompletedAt.UTC().Format(http.TimeFormat)
	}
	if rec.StatusClass > 0 {
		ran += fmt.Sprintf(" with a %dxx answer", rec.StatusClass)
	}
	return ran + fmt.Sprintf("; answers are kept for %s and this one is gone, and the operation is not run again for this key. Look up its outcome (the resource it created), or send a new request with a new key.", x.op.retention())
}

// answer is what the client hears when a request to x's operation ends with res. Every ending
// has exactly one case; the contract's statuses are the decision table of docs/design.md section 1 (409 + Retry-After
// in flight, 422 mismatch, 503 + Retry-After when the store fails, fail closed).
func answer(x *exchange, res *result) reply {
	cfg := &x.rt.cfg
	// The status of each problem is runtime/defaults' table, the one the loader's errors
	// mapping and `idemgen spec` read too.
	problem := func(outcome Outcome, name, detail string) reply {
		return reply{outcome: outcome, problem: newProblem(defaults.ProblemStatus(name), name, detail)}
	}
	switch res.ending {
	case endUnauthenticated:
		// The ScopeFunc's reason stays in the logs: it may describe credentials.
		a := problem(OutcomeUnauthorized, ProblemUnauthenticated, "The request could not be attributed to a tenant; authenticate and retry.")
		a.problem.Status = cfg.ScopeStatus
		a.level, a.msg = slog.LevelDebug, logUnauthenticated
		return a
	case endScopeHeaderInvalid:
		a := problem(OutcomeBodyInvalid, ProblemBodyInvalid, "The "+res.sent+" header does not hold a valid account id.")
		a.problem.Pointer = "/header/" + res.sent
		return a
	case endBodyTooLarge:
		return problem(OutcomeBodyInvalid, ProblemBodyTooLarge,
			fmt.Sprintf("The body has %d bytes; the limit is %d.", res.size, res.limit))
	case endBodyOverLimit:
		return problem(OutcomeBodyInvalid, ProblemBodyTooLarge,
			fmt.Sprintf("The body is larger than the limit of %d bytes.", res.limit))
	case endBodyUnreadable:
		return problem(OutcomeBodyInvalid, ProblemBodyInvalid, "The body could not be read: "+res.err.Error())
	case endCodingUnsupported:
		a := problem(OutcomeBodyInvalid, ProblemMediaTypeUnsupported,
			fmt.Sprintf("Content-Encoding %q is not supported: send the body without a content coding (RFC 9110 section 15.5.16); the body is fingerprinted and decoded as sent.", res.sent))
		// RFC 9110 section 12.5.3: a 415 for a content coding lists the codings accepted.
		a.acceptEncoding = "identity"
		return a
	case endContentTypeRepeated:
		return problem(OutcomeBodyInvalid, ProblemBodyInvalid, "The request has more than one Content-Type header line; send one.")
	case endMediaTypeUnsupported:
		return problem(OutcomeBodyInvalid, ProblemMediaTypeUnsupported,
			fmt.Sprintf("Content-Type %q is not one of %s.", res.sent, strings.Join(x.op.MediaTypes, ", ")))
	case endCharsetUnsupported:
		return problem(OutcomeBodyInvalid, ProblemMediaTypeUnsupported,
			fmt.Sprintf("Content-Type %q declares charset %q; JSON is UTF-8 (RFC 8259 section 8.1): send UTF-8 with charset=utf-8 or no charset.", res.sent, res.charset))
	case endPartTooLarge:
		a := problem(OutcomeBodyInvalid, ProblemBodyTooLarge, res.err.Error())
		a.problem.Pointer = res.pointer
		return a
	case endBodyInvalid:
		a := problem(OutcomeBodyInvalid, ProblemBodyInvalid, res.err.Error())
		a.problem.Pointer = res.pointer
		var enum interface{ AllowedValues() []string }
		if errors.As(res.err, &enum) {
			a.problem.Allowed = enum.AllowedValues()
		}
		return a
	case endDecoderFailed, endMisconfigured:
		// A bug on the server's side: nothing of it is for the client.
		a := problem(OutcomeInternal, ProblemInternal, "")
		a.level, a.msg = slog.LevelError, logHandlerFailed
		return a
	case endMisuse:
		a := problem(OutcomeInternal, ProblemInternal, "")
		a.level, a.msg = slog.LevelError, logMisuse
		return a
	case endKeyMissing:
		return problem(OutcomeKeyMissing, ProblemKeyMissing, x.keyWhere()+" is required.")
	case endKeyInvalid:
		return problem(OutcomeKeyInvalid, ProblemKeyInvalid, x.keyWhere()+": "+res.err.Error()+".")
	case endFirstSentInvalid:
		return problem(OutcomeKeyInvalid, ProblemKeyInvalid,
			"The "+x.op.Key.FirstSent+" header must hold the time of the first attempt, once, as an IMF-fixdate (RFC 9110 section 5.6.7).")
	case endKeyExpired:
		// OASIS Repeatable Requests: the record of that attempt may be gone, so running it
		// again could run it twice.
		return problem(OutcomeKeyInvalid, ProblemKeyExpired,
			fmt.Sprintf("The first attempt (%s) is older than the %s this server keeps requests for: it cannot tell whether that attempt ran. Send a new request with a new key.", res.sent, x.op.retention()))

	case endReplayed:
		a := reply{outcome: OutcomeReplayed, replayed: true}
		if left := res.rec.RetentionLeft; left > 0 {
			a.expires = time.Now().Add(left)
		}
		return a
	case endResultExpired:
		return problem(OutcomeExpired, ProblemResultExpired, resultExpiredDetail(x, res.rec))
	case endMismatch:
		return problem(OutcomeMismatch, ProblemPayloadMismatch, "The key was used with a different request.")
	case endOtherOperation:
		return problem(OutcomeMismatch, ProblemPayloadMismatch, "The key was used with another operation.")
	case endInFlight:
		a := problem(OutcomeConflict, ProblemInFlight, "A request with this key is still being processed; retry after the Retry-After delay.")
		a.problem.RetryAfter = res.after
		if res.after <= 0 {
			a.problem.RetryAfter = cfg.ConflictRetryAfter
		}
		return a
	case endLeaseLost:
		// The retry replays the new owner's result: an in-flight 409 is what tells a client
		// to retry with the same key.
		a := problem(OutcomeLeaseLost, ProblemInFlight, "This attempt's lease was taken over by a retry; retry to get its result.")
		a.problem.RetryAfter = cfg.ConflictRetryAfter
		a.level, a.msg = slog.LevelWarn, logLeaseLost
		return a
	case endLimited:
		a := problem(OutcomeLimited, ProblemRateLimited,
			"This tenant has created too many new idempotency keys in the current interval; the request was not processed. Retry after the Retry-After delay.")
		a.problem.RetryAfter = res.after
		if res.after <= 0 {
			a.problem.RetryAfter = time.Second
		}
		return a
	case endStoreUnavailable, endCanceled:
		// A store call cut short because the client went away is not a store failure: it is
		// counted as canceled, so a disconnecting client cannot page anyone. The client, if it
		// is still there, hears the same.
		a := problem(OutcomeStoreError, ProblemStoreUnavailable, "The idempotency store cannot be reached; the request was not processed.")
		a.problem.RetryAfter = cfg.StoreRetryAfter
		a.level, a.msg = slog.LevelError, logStoreFailed
		if res.ending == endCanceled {
			a.outcome, a.level, a.msg = OutcomeCanceled, slog.LevelInfo, logCanceled
		}
		return a
	case endDraining:
		// Not processed, as when the store cannot be reached: the client retries (on another
		// replica, the connection being closed); the store is fine, so nothing pages anyone.
		a := problem(OutcomeDraining, ProblemStoreUnavailable, "This server is shutting down; the request was not processed. Retry after the Retry-After delay.")
		a.problem.RetryAfter = cfg.StoreRetryAfter
		a.level, a.msg = slog.LevelInfo, logDraining
		return a
	case endStoreUnknown:
		a := problem(OutcomeStoreError, ProblemStoreUnavailable,
			"The idempotency store failed after the request began to run; the outcome is unknown. Retry with the same key: the retry replays the result if it was stored, or completes the request once if not.")
		a.problem.RetryAfter = cfg.StoreRetryAfter
		a.level, a.msg = slog.LevelError, logStoreFailed
		return a
	case endHandlerFailed:
		a := problem(OutcomeReleased, ProblemInternal, "")
		a.level, a.msg = slog.LevelError, logHandlerFailed
		return a

	case endExecuted:
		// Stored a moment ago: its retention counts from about now, by the store's clock.
		return reply{outcome: OutcomeExecuted, expires: time.Now().Add(x.op.retention())}
	case endReleased:
		// A non-final status is the handler's own answer: nothing to log.
		return reply{outcome: OutcomeReleased}
	case endForeign:
		// A router's 404 or redirect in front of which the Middleware ran: a client can cause
		// it at will, so it is not an error.
		return reply{outcome: OutcomeReleased, level: slog.LevelInfo, msg: logForeign}
	case endUnguarded:
		return reply{outcome: OutcomeUnguarded}
	}
	// An ending without a case is a bug of this file (TestEveryEndingIsAnswered): fail as one.
	a := problem(OutcomeInternal, ProblemInternal, "")
	a.level, a.msg = slog.LevelError, logNoAnswer
	return a
}
