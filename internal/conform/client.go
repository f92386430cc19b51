package conform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Exchange is one request and what came back, as a report shows it.
type Exchange struct {
	// Label says what the request is for ("first request", "replay", "copy 3 of 8").
	Label  string `json:"label"`
	Method string `json:"method"`
	// Target is the path and query as sent, relative to the base URL.
	Target string     `json:"target"`
	Header []HeaderKV `json:"header"`
	Body   string     `json:"body,omitempty"`
	// Via names the path a faulted request took ("proxy: reset after the answer").
	Via string `json:"via,omitempty"`
	// Status is 0 when no response came back; Err then says why.
	Status        int        `json:"status"`
	RespHeader    []HeaderKV `json:"responseHeader,omitempty"`
	RespBody      string     `json:"responseBody,omitempty"`
	Err           string     `json:"error,omitempty"`
	Start         time.Time  `json:"start"`
	Took          Duration   `json:"took"`
	respBodyRaw   []byte
	respHeaderRaw http.Header
}

// HeaderKV is one header line.
type HeaderKV struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Duration marshals as Go's duration text ("12ms").
type Duration time.Duration

// MarshalText writes the duration rounded to microseconds.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).Round(time.Microsecond).String()), nil
}

// replayed reports whether the response says it is a replay.
func (e *Exchange) replayed() bool {
	return strings.EqualFold(e.respHeaderRaw.Get("Idempotent-Replayed"), "true")
}

// ok reports whether a response came back.
func (e *Exchange) ok() bool { return e.Status != 0 }

// header returns a response header.
func (e *Exchange) header(name string) string { return e.respHeaderRaw.Get(name) }

// sent returns the values of the request's header name, one per line, in the order sent.
func (e *Exchange) sent(name string) []string {
	var out []string
	for _, h := range e.Header {
		if strings.EqualFold(h.Name, name) {
			out = append(out, h.Value)
		}
	}
	return out
}

// errBudget is the error of a request over --max-requests.
var errBudget = errors.New("the request budget (--max-requests) is spent")

// client sends the checks' requests to the service: per-request timeout, the run's request
// budget, bodies shown in reports cut at showLimit bytes.
type client struct {
	base    string
	http    *http.Client
	timeout time.Duration
	budget  int64
	sent    atomic.Int64
}

// showLimit is how much of a body a report shows.
const showLimit = 2048

// readLimit bounds a response body read into memory.
const readLimit = 8 << 20

// send sends w and records the exchange. A transport error or a timeout is an exchange
// without a status.
func (c *client) send(ctx context.Context, label string, w *wire) *Exchange {
	return c.sendTo(ctx, c.base, label, w)
}

// sendTo sends w to another base URL (the fault proxy).
func (c *client) sendTo(ctx context.Context, base, label string, w *wire) *Exchange {
	e := &Exchange{Label: label, Method: w.method, Target: w.target, Body: show(w.body), Start: time.Now()}
	for _, h := range w.header {
		e.Header = append(e.Header, HeaderKV{h.name, h.value})
	}
	if w.err != nil {
		e.Err = w.err.Error()
		return e
	}
	if c.budget > 0 && c.sent.Add(1) > c.budget {
		e.Err = errBudget.Error()
		return e
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, w.method, base+w.target, bytes.NewReader(w.body))
	if err != nil {
		e.Err = "build request: " + err.Error()
		return e
	}
	// Go's Transport sends a request that carries an Idempotency-Key header again, by itself,
	// when its connection breaks before the answer (net/http isReplayable): a lost answer would
	// be retried behind the checks' back. A body it cannot rewind (no GetBody, not NoBody)
	// turns that off; an empty one is sent as Content-Length: 0 all the same.
	req.GetBody = nil
	if len(w.body) == 0 {
		req.Body = io.NopCloser(bytes.NewReader(nil))
	}
	for _, h := range w.header {
		if strings.EqualFold(h.name, "Host") {
			req.Host = h.value
			continue
		}
		req.Header[http.CanonicalHeaderKey(h.name)] = append(req.Header[http.CanonicalHeaderKey(h.name)], h.value)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		e.Took = Duration(time.Since(e.Start))
		e.Err = transportError(err, c.timeout)
		return e
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, readLimit))
	e.Took = Duration(time.Since(e.Start))
	if err != nil {
		e.Err = fmt.Sprintf("read the response (status %d): %v", resp.StatusCode, err)
		return e
	}
	e.Status, e.respBodyRaw, e.respHeaderRaw = resp.StatusCode, body, resp.Header
	e.RespBody = show(body)
	for _, k := range sortedKeys(resp.Header) {
		if k == "Date" || k == "Content-Length" {
			continue
		}
		for _, v := range resp.Header[k] {
			e.RespHeader = append(e.RespHeader, HeaderKV{k, v})
		}
	}
	return e
}

// transportError words a client error for a report.
func transportError(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %v (--request-timeout)", timeout)
	}
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		err = ue.Unwrap()
	}
	return err.Error()
}

// show is a body as a report shows it: text up to showLimit bytes.
func show(b []byte) string {
	if len(b) > showLimit {
		return string(b[:showLimit]) + fmt.Sprintf("… (%d bytes)", len(b))
	}
	return string(b)
}
