package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Transport is a retrying http.RoundTripper for idempotent APIs (see the package comment). It is
// safe for concurrent use; build it with New.
type Transport struct {
	base http.RoundTripper
	cfg  config
}

// New returns a Transport that sends through base (http.DefaultTransport when nil), configured
// by opts on top of the Default* constants. An invalid option does not panic: Validate and every
// RoundTrip report it.
func New(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.safetyMargin() >= cfg.retention {
		cfg.fail("retention margin %s must be below the retention %s", cfg.safetyMargin(), cfg.retention)
	}
	return &Transport{base: base, cfg: cfg}
}

// Validate returns the first invalid option given to New, or nil. Call it at start-up to fail
// early instead of on the first request.
func (t *Transport) Validate() error { return t.cfg.err }

// KeyOf returns the idempotency key the Transport sent for resp ("" when resp was not sent
// through a Transport with this key header, or query parameter with WithQueryKey):
// resp.Request is the last attempt's request.
func (t *Transport) KeyOf(resp *http.Response) string {
	if resp == nil || resp.Request == nil {
		return ""
	}
	if t.cfg.query != "" {
		if resp.Request.URL == nil {
			return ""
		}
		return resp.Request.URL.Query().Get(t.cfg.query)
	}
	return resp.Request.Header.Get(t.cfg.header)
}

// CloseIdleConnections closes the base RoundTripper's idle connections when it can
// (http.Client.CloseIdleConnections calls this).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip sends req as one logical operation (see the package comment). It returns the first
// response that is final — a success, a replay, or a status that is not retried — or:
//   - an *ExhaustedError when it stops without a final response;
//   - a *ReconcileError when the next attempt could come after the server's retention;
//   - an error wrapping ErrBodyTooLarge, an invalid key or option, or a KeyFunc error, before
//     anything is sent;
//   - the transport error itself when it cannot be fixed by retrying (an untrusted certificate).
//
// It never modifies req; each attempt sends a clone carrying the key header (or, with
// WithQueryKey, the key in its query).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if t.cfg.err == nil && !t.cfg.methods[method] {
		return t.base.RoundTrip(req)
	}
	op, err := t.prepare(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return t.run(req, op)
}

// operation is what stays the same across the attempts of one RoundTrip.
type operation struct {
	key       string
	inURL     bool      // WithQueryKey: the request's URL already carries the key
	firstSent time.Time // zero: set at the first attempt
	body      *replayBody
}

// prepare resolves the key (header, then context, then KeyFunc) and takes over the body.
func (t *Transport) prepare(req *http.Request) (*operation, error) {
	if t.cfg.err != nil {
		return nil, t.cfg.err
	}
	op := &operation{}
	supplied, fromCtx := req.Context().Value(ctxKey{}).(suppliedKey)
	vals, carrier := req.Header.Values(t.cfg.header), t.cfg.header+" header"
	if t.cfg.query != "" {
		vals, carrier = req.URL.Query()[t.cfg.query], t.cfg.query+" query parameter"
		op.inURL = len(vals) == 1
	}
	switch {
	case len(vals) > 1:
		return nil, fmt.Errorf("client: request has %d %ss; an idempotent request carries one", len(vals), carrier)
	case len(vals) == 1:
		if fromCtx && supplied.value != vals[0] {
			return nil, fmt.Errorf("client: %s and context key (WithKey) differ", carrier)
		}
		op.key, op.firstSent = vals[0], supplied.firstSent
	case fromCtx:
		op.key, op.firstSent = supplied.value, supplied.firstSent
	default:
		k, err := t.cfg.keyFunc(req)
		if err != nil {
			return nil, fmt.Errorf("client: key func: %w", err)
		}
		op.key = k
	}
	if err := ValidKey(op.key); err != nil {
		return nil, err
	}
	body, err := newReplayBody(req, t.cfg.maxBody)
	if err != nil {
		return nil, err
	}
	op.body = body
	return op, nil
}

// outcome is what one attempt left behind, for the decision to retry and for the final error.
type outcome struct {
	status     int
	header     http.Header
	body       []byte
	err        error
	retryAfter time.Duration
	hasRA      bool
}

// run is the retry loop.
func (t *Transport) run(req *http.Request, op *operation) (*http.Response, error) {
	ctx := req.Context()
	clk := t.cfg.clock
	start := clk.Now()
	if op.firstSent.IsZero() {
		op.firstSent = start
	}
	deadline := op.firstSent.Add(t.cfg.retention - t.cfg.safetyMargin())
	var last outcome
	for attempt := 1; ; attempt++ {
		// The retention check comes before every attempt, the first included: a persisted key
		// (WithKeySince) may already be too old.
		if !clk.Now().Before(deadline) {
			return nil, t.reconcile(op, deadline, attempt-1, last)
		}
		resp, err := t.attempt(req, op)
		if err == nil && !t.retryableResponse(resp) {
			return resp, nil
		}
		if err != nil && (ctx.Err() != nil || permanentError(err)) {
			if ctx.Err() != nil {
				return nil, t.exhausted(op, attempt, start, ctx.Err(), outcome{err: err}, deadline)
			}
			return nil, err
		}
		last = t.record(resp, err)

		wait := t.cfg.backoff(attempt)
		if last.hasRA {
			wait = max(wait, last.retryAfter)
		}
		next := clk.Now().Add(wait)
		var reason error
		switch {
		case attempt >= t.cfg.maxAttempts:
			reason = ErrMaxAttempts
		case last.hasRA && last.retryAfter > t.cfg.maxDelay:
			// Never retry earlier than the server asked; the caller may come back later.
			reason = ErrRetryAfterTooLong
		case !next.Before(deadline):
			return nil, t.reconcile(op, deadline, attempt, last)
		case t.cfg.maxElapsed > 0 && next.Sub(start) > t.cfg.maxElapsed:
			reason = ErrMaxElapsed
		}
		if d, ok := ctx.Deadline(); ok && reason == nil && next.After(d) {
			// Sleeping into a deadline that ends before the next attempt only delays the failure.
			reason = context.DeadlineExceeded
		}
		if reason != nil {
			return nil, t.exhausted(op, attempt, start, reason, last, deadline)
		}
		if t.cfg.onRetry != nil {
			t.cfg.onRetry(Retry{Key: op.key, Attempt: attempt, Status: last.status, Err: last.err, Wait: wait})
		}
		if err := clk.Sleep(ctx, wait); err != nil {
			return nil, t.exhausted(op, attempt, start, err, last, deadline)
		}
	}
}

// attempt sends one clone of req with the key and a fresh copy of the body.
func (t *Transport) attempt(req *http.Request, op *operation) (*http.Response, error) {
	ctx := req.Context()
	var cancel context.CancelFunc
	var timer *time.Timer
	if t.cfg.attemptTimeout > 0 {
		ctx, cancel = context.WithCancel(ctx)
		timer = time.AfterFunc(t.cfg.attemptTimeout, cancel)
	}
	r := req.Clone(ctx)
	switch {
	case t.cfg.query == "":
		r.Header.Set(t.cfg.header, op.key)
	case !op.inURL:
		// Appended, so the rest of the query keeps its order and spelling.
		kv := url.QueryEscape(t.cfg.query) + "=" + url.QueryEscape(op.key)
		if r.URL.RawQuery == "" {
			r.URL.RawQuery = kv
		} else {
			r.URL.RawQuery += "&" + kv
		}
	}
	if err := op.body.attach(r); err != nil {
		if cancel != nil {
			timer.Stop()
			cancel()
		}
		return nil, err
	}
	resp, err := t.base.RoundTrip(r)
	if cancel == nil {
		return resp, err
	}
	if !timer.Stop() {
		// The attempt timeout fired, perhaps just as the response arrived: its body is unusable.
		if err == nil {
			resp.Body.Close()
		}
		if req.Context().Err() == nil {
			err = fmt.Errorf("attempt timed out after %s: %w", t.cfg.attemptTimeout, context.DeadlineExceeded)
		}
		return nil, err
	}
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose releases an attempt's context when the caller closes the response body.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// retryableResponse reports whether resp calls for another attempt.
func (t *Transport) retryableResponse(resp *http.Response) bool {
	if resp.StatusCode == http.StatusConflict {
		return retryable409(resp)
	}
	return retryableStatus(resp.StatusCode)
}

// record keeps what the caller may need from a failed attempt, then drains and closes its
// response so that the connection can be reused.
func (t *Transport) record(resp *http.Response, err error) outcome {
	if err != nil {
		return outcome{err: err}
	}
	o := outcome{status: resp.StatusCode, header: resp.Header}
	o.retryAfter, o.hasRA = retryAfter(resp.Header, t.cfg.clock.Now())
	o.body, _ = io.ReadAll(io.LimitReader(resp.Body, maxKeptBody))
	// Drain a bounded amount more: enough for typical error bodies to free the connection,
	// without reading an endless stream.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4*maxKeptBody))
	resp.Body.Close()
	return o
}

func (t *Transport) exhausted(op *operation, attempts int, start time.Time, reason error, last outcome, deadline time.Time) *ExhaustedError {
	return &ExhaustedError{
		Key:         op.key,
		Attempts:    attempts,
		Elapsed:     t.cfg.clock.Now().Sub(start),
		Reason:      reason,
		Status:      last.status,
		Header:      last.header,
		Body:        last.body,
		Err:         last.err,
		RetryAfter:  last.retryAfter,
		RetryBefore: deadline,
	}
}

func (t *Transport) reconcile(op *operation, deadline time.Time, attempts int, last outcome) *ReconcileError {
	return &ReconcileError{
		Key:       op.key,
		FirstSent: op.firstSent,
		Deadline:  deadline,
		Attempts:  attempts,
		Status:    last.status,
		Err:       last.err,
	}
}
