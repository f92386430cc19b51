package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Reasons an *ExhaustedError gives for stopping (besides context.Canceled and
// context.DeadlineExceeded from the request's context). Test them with errors.Is.
var (
	// ErrMaxAttempts: the last allowed attempt failed.
	ErrMaxAttempts = errors.New("attempts exhausted")
	// ErrMaxElapsed: the next attempt would start after the MaxElapsed budget.
	ErrMaxElapsed = errors.New("time budget exhausted")
	// ErrRetryAfterTooLong: the server asked (Retry-After) for a longer wait than MaxDelay; the
	// Transport never retries earlier than asked, so it stops and reports the wait instead.
	ErrRetryAfterTooLong = errors.New("server asked to wait longer than allowed")
)

// ErrReconcile is matched (errors.Is) by every *ReconcileError.
var ErrReconcile = errors.New("idempotency key may have expired on the server: reconcile instead of retrying")

// ErrBodyTooLarge: a request body without GetBody is larger than the buffering cap
// (WithMaxBodyBytes); nothing was sent.
var ErrBodyTooLarge = errors.New("request body too large to buffer for retries")

// maxKeptBody caps, in bytes, the body of a failed attempt kept in an *ExhaustedError.
const maxKeptBody = 64 << 10

// ExhaustedError is returned when the Transport stops retrying an operation whose outcome it does
// not know: attempts or time ran out, the server asked for too long a wait, or the request's
// context ended. The operation may or may not have run on the server; retrying later with the
// same Key (before RetryBefore) is safe and returns its outcome.
type ExhaustedError struct {
	// Key is the operation's idempotency key: persist it if you will retry later.
	Key string
	// Attempts is how many attempts were sent.
	Attempts int
	// Elapsed is the time from the start of the first attempt to the stop.
	Elapsed time.Duration
	// Reason is why it stopped: ErrMaxAttempts, ErrMaxElapsed, ErrRetryAfterTooLong,
	// context.Canceled or context.DeadlineExceeded.
	Reason error
	// Status, Header and Body describe the last attempt's response (Body: at most its first
	// 64 KiB); Status is 0 when the last attempt ended in a transport error, held in Err.
	Status int
	Header http.Header
	Body   []byte
	Err    error
	// RetryAfter is the wait the last response asked for (Retry-After), 0 if none.
	RetryAfter time.Duration
	// RetryBefore is the last instant at which retrying with Key is still safe; afterwards the
	// server may have forgotten the key, and the caller must reconcile.
	RetryBefore time.Time
}

func (e *ExhaustedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "client: gave up after %d attempt(s) in %s: %v", e.Attempts, e.Elapsed.Round(time.Millisecond), e.Reason)
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (Retry-After %s)", e.RetryAfter)
	}
	switch {
	case e.Err != nil:
		fmt.Fprintf(&b, "; last attempt: %v", e.Err)
	case e.Status != 0:
		fmt.Fprintf(&b, "; last attempt: %d %s", e.Status, http.StatusText(e.Status))
	}
	return b.String()
}

// Unwrap returns the reason and the last attempt's transport error, so errors.Is matches either.
func (e *ExhaustedError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Reason, e.Err}
	}
	return []error{e.Reason}
}

// ReconcileError is returned instead of an attempt that could start after the server's retention
// for Key has ended (start of the first attempt + Retention − margin). Such an attempt could run
// the operation a second time, because an expired key is new again. The caller must reconcile:
// look the outcome up through the API (list or get the resource) and act on what it finds.
type ReconcileError struct {
	// Key is the operation's idempotency key.
	Key string
	// FirstSent is the earliest time the key may have reached the server.
	FirstSent time.Time
	// Deadline is the last instant the Transport would start an attempt with Key.
	Deadline time.Time
	// Attempts is how many attempts this RoundTrip sent (0 when the key was already too old).
	Attempts int
	// Status and Err describe the last attempt of this RoundTrip, if any (see ExhaustedError).
	Status int
	Err    error
}

func (e *ReconcileError) Error() string {
	s := fmt.Sprintf("client: not retrying: key first sent %s may expire on the server after %s (%d attempt(s) this time); reconcile instead of retrying",
		e.FirstSent.Format(time.RFC3339), e.Deadline.Format(time.RFC3339), e.Attempts)
	switch {
	case e.Err != nil:
		s += fmt.Sprintf("; last attempt: %v", e.Err)
	case e.Status != 0:
		s += fmt.Sprintf("; last attempt: %d %s", e.Status, http.StatusText(e.Status))
	}
	return s
}

// Is makes errors.Is(err, ErrReconcile) true.
func (e *ReconcileError) Is(target error) bool { return target == ErrReconcile }

// Unwrap returns the last attempt's transport error, if any.
func (e *ReconcileError) Unwrap() error { return e.Err }
