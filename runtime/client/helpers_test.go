package client

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// fakeClock makes backoff waits instant and records them; Now moves only when Sleep is called.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	// A whole second, so that HTTP dates (one-second resolution) are exact.
	return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// maxJitter is a deterministic jitter: the largest value of the full-jitter range.
func maxJitter(n time.Duration) time.Duration { return n - 1 }

// newTestTransport builds a Transport over base with a fake clock and maxJitter.
func newTestTransport(t *testing.T, base http.RoundTripper, opts ...Option) (*Transport, *fakeClock) {
	t.Helper()
	tr := New(base, opts...)
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	fc := newFakeClock()
	tr.cfg.clock = fc
	tr.cfg.jitter = maxJitter
	return tr, fc
}

// seen is one request as the test server received it.
type seen struct {
	method string
	key    string
	keys   int // number of key header lines
	body   []byte
}

// scriptServer answers attempt i with script[i], repeating the last entry, and records every
// request it receives.
type scriptServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newScriptServer(t *testing.T, script ...http.HandlerFunc) *scriptServer {
	t.Helper()
	s := &scriptServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		i := len(s.reqs)
		s.reqs = append(s.reqs, seen{method: r.Method, key: r.Header.Get(DefaultHeader), keys: len(r.Header.Values(DefaultHeader)), body: body})
		s.mu.Unlock()
		script[min(i, len(script)-1)](w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptServer) Requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

// status answers code with a small text body.
func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		io.WriteString(w, http.StatusText(code))
	}
}

// statusRetryAfter answers code with a Retry-After header.
func statusRetryAfter(code int, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", retryAfter)
		w.WriteHeader(code)
		io.WriteString(w, http.StatusText(code))
	}
}

// problem answers an application/problem+json document of the given type.
func problem(code int, typ string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(code)
		io.WriteString(w, `{"type":"`+typ+`","title":"conflict","status":409}`)
	}
}

// created answers 201 with a JSON body.
func created(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, `{"id":"pay_1"}`)
}

// drop closes the connection without answering.
func drop(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// post sends a POST with body through hc and returns the response with its body read.
func post(t *testing.T, hc *http.Client, ctx context.Context, url string, body []byte) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response body: %v", err)
	}
	return resp, got, nil
}

// bodyTracker wraps a base RoundTripper and records, for every response, whether its body was
// read to the end and closed.
type bodyTracker struct {
	base   http.RoundTripper
	mu     sync.Mutex
	bodies []*trackedBody
}

type trackedBody struct {
	rc     io.ReadCloser
	mu     sync.Mutex
	eof    bool
	closed bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		b.eof = true
		b.mu.Unlock()
	}
	return n, err
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.rc.Close()
}

func (b *trackedBody) state() (eof, closed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof, b.closed
}

func (bt *bodyTracker) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := bt.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	tb := &trackedBody{rc: resp.Body}
	resp.Body = tb
	bt.mu.Lock()
	bt.bodies = append(bt.bodies, tb)
	bt.mu.Unlock()
	return resp, nil
}

// closeTracker is a request body that records Close and has no GetBody.
type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error {
	c.closed = true
	return nil
}
