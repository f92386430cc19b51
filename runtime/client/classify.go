package client

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/runtime/defaults"
)

// maxProblemBytes caps, in bytes, how much of a 409 body is read to find its problem type.
const maxProblemBytes = 64 << 10

// retryableStatus reports whether a response with this status may succeed when sent again with
// the same key. 408 and 429 are the client-side statuses a server uses for "not now" (RFC 9110
// section 15.5.9, RFC 6585 section 4); 500, 502, 503 and 504 are transient server or gateway
// failures, which an idemgen server never stores (its replay.statuses default is
// [2xx, 4xx, !408, !409, !425, !429]). 409 is decided by retryable409. Every other status is final:
// 400 and 422 would only come back unchanged.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryable409 reports whether a 409 response is idemgen's in-flight problem: an
// application/problem+json body (RFC 9457) whose "type" ends with the segment "in-flight". Other
// conflicts are final. It reads at most maxProblemBytes of the body and puts them back, so a
// caller that gets the response still reads it whole.
func retryable409(resp *http.Response) bool {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "application/problem+json" {
		return false
	}
	head, readErr := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	resp.Body = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(head), restAfter(resp.Body, readErr)), Closer: resp.Body}
	var p struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(head, &p) != nil {
		return false
	}
	return problemIs(p.Type, defaults.ProblemInFlight)
}

// problemIs reports whether a problem type URI names the problem name: equal to it, or ending
// in it after a '/', '#' or ':' (so "…/problems/in-flight" matches and "not-in-flight" does not).
func problemIs(typ, name string) bool {
	if typ == name {
		return true
	}
	rest, ok := strings.CutSuffix(typ, name)
	return ok && strings.ContainsAny(rest[len(rest)-1:], "/#:")
}

// restAfter returns what follows a prefix read from body: the rest of body, or the read error.
func restAfter(body io.Reader, err error) io.Reader {
	if err != nil {
		return errReader{err}
	}
	return body
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// prefixedBody is a response body of which a prefix was already read and is served again.
type prefixedBody struct {
	io.Reader
	io.Closer
}

// permanentError reports whether a transport error cannot go away by sending again: a server
// certificate the client does not trust. Every other transport error — refused or reset
// connections, a connection closed before the response, timeouts — is retried, which is safe
// because the key makes the server run the operation at most once.
func permanentError(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalidCert      x509.CertificateInvalidError
		hostname         x509.HostnameError
		verification     *tls.CertificateVerificationError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &invalidCert) ||
		errors.As(err, &hostname) || errors.As(err, &verification)
}

// maxRetryAfter bounds a parsed Retry-After so that converting it to a Duration cannot
// overflow; any value this large is far beyond every MaxDelay anyway.
const maxRetryAfter = 100 * 365 * 24 * time.Hour

// retryAfter parses a Retry-After header (RFC 9110 section 10.2.3): delay-seconds, or an
// HTTP-date taken relative to now (a date in the past means no wait). ok is false when the header
// is absent or malformed; a malformed one is ignored, as if absent.
func retryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			var numErr *strconv.NumError
			if errors.As(err, &numErr) && numErr.Err == strconv.ErrRange {
				return maxRetryAfter, true
			}
			return 0, false
		}
		if secs > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxRetryAfter), true
}
