// Package client is the client half of idemgen: an http.RoundTripper that retries unsafe
// requests (POST and PATCH by default) the way an idempotent server expects them to be retried.
//
// One line adds it to a client:
//
//	hc := &http.Client{Transport: client.New(nil)}
//
// For every logical operation (one RoundTrip call) the Transport
//
//   - picks one idempotency key — the request's own Idempotency-Key header, else the key put in
//     the context with WithKey or WithKeySince, else a fresh random UUID v4 — and sends that same
//     key on every attempt (draft-ietf-httpapi-idempotency-key-header section 2; Stripe's rule
//     that a new key per attempt is a new operation); WithHeader names another header, and
//     WithQueryKey a query parameter instead (AIP-155's request_id);
//   - buffers the request body once (or uses Request.GetBody) and sends the same bytes on every
//     attempt, because the server fingerprints the body and answers 422 to a changed one;
//   - retries transport errors and timeouts, 408, 409 whose problem type (RFC 9457) is
//     "in-flight", 429, 500, 502, 503 and 504, and nothing else: 400, 422 and every other 4xx are
//     final, since sending them again cannot change the answer;
//   - waits between attempts with full-jitter exponential backoff (a random wait in
//     [0, min(MaxDelay, BaseDelay·2^(n-1))), as in the AWS Architecture Blog's "Exponential
//     Backoff And Jitter"), and never less than the response's Retry-After (RFC 9110 section
//     10.2.3, seconds or an HTTP date);
//   - stops at once when the request's context is cancelled or its deadline would pass during
//     the wait;
//   - gives up with a *ReconcileError before the server's retention (24h by default, the
//     x-idempotent retention) could have expired the key: a retry after that point could run the
//     operation a second time, so the caller must look the outcome up instead.
//
// When the attempts or the time budget run out it returns an *ExhaustedError carrying the last
// status, headers and body (or transport error), the key, and RetryBefore, the instant until which
// retrying with the same key is still safe.
//
// Requests with other methods (GET, PUT, DELETE, … unless WithMethods says otherwise) pass
// through to the base RoundTripper untouched: no key, no retry.
package client
