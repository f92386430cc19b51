package faults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/runtime"
)

// Target is a replica's address.
type Target struct {
	Name string
	URL  string
}

// Request is one logical request: an operation, a tenant, a key and a body, sent as many times
// as its client retries it.
type Request struct {
	Logical int
	Mode    string // "atomic" or "lease"
	Tenant  string
	Key     string
	Amount  int64
	// Headers are knobs added to every attempt (X-Delay, X-Hold, ...).
	Headers map[string]string
}

// Client sends attempts and records them in its history.
type Client struct {
	H    *History
	HTTP *http.Client
	seq  atomic.Int64
	lseq atomic.Int64
}

// NewClient returns a client recording into h; each attempt gives up after timeout.
func NewClient(h *History, timeout time.Duration) *Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	return &Client{H: h, HTTP: &http.Client{Transport: tr, Timeout: timeout}}
}

// Close closes idle connections.
func (c *Client) Close() { c.HTTP.CloseIdleConnections() }

// NextLogical numbers a new logical request (porcupine's client ids start at 0).
func (c *Client) NextLogical() int { return int(c.lseq.Add(1) - 1) }

// NextAttempt names a new attempt.
func (c *Client) NextAttempt() string { return fmt.Sprintf("a%d", c.seq.Add(1)) }

// Path is the operation's path for mode.
func Path(mode string) string {
	if mode == "lease" {
		return "/v1/charges"
	}
	return "/v1/payments"
}

// Body is the request's JSON body and its label.
func (r *Request) Body() ([]byte, string) {
	return fmt.Appendf(nil, `{"amount":%d}`, r.Amount), fmt.Sprintf("amount=%d", r.Amount)
}

// NewAttempt starts the record of an attempt of r to t, called now.
func (c *Client) NewAttempt(t Target, r *Request) Attempt {
	_, label := r.Body()
	return Attempt{ID: c.NextAttempt(), Logical: r.Logical, Mode: r.Mode, Key: r.Tenant + "/" + r.Key,
		Body: label, Replica: t.Name, Call: c.H.Now()}
}

// HTTPRequest builds the HTTP request of attempt a of r to t.
func HTTPRequest(ctx context.Context, t Target, r *Request, a *Attempt) (*http.Request, error) {
	body, _ := r.Body()
	req, err := http.NewRequestWithContext(ctx, "POST", t.URL+Path(r.Mode), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.Tenant)
	req.Header.Set("Idempotency-Key", r.Key)
	req.Header.Set("X-Attempt", a.ID)
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	return req, nil
}

// Send sends one attempt of r to t and records it.
func (c *Client) Send(ctx context.Context, t Target, r *Request) Attempt {
	a := c.NewAttempt(t, r)
	req, err := HTTPRequest(ctx, t, r, &a)
	if err != nil {
		panic(err) // a malformed URL is a bug of the test
	}
	resp, err := c.HTTP.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	a.Return = c.H.Now()
	Classify(&a, resp, body, err)
	c.H.Add(a)
	return a
}

// Classify fills in what an answer means: resp and body, or the transport error err.
func Classify(a *Attempt, resp *http.Response, body []byte, err error) {
	if err != nil {
		a.Kind, a.Detail = KindUnknown, err.Error()
		return
	}
	a.Status = resp.StatusCode
	a.RetryAfter = resp.Header.Get("Retry-After")
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		a.Kind = KindOK
		if resp.Header.Get(runtime.HeaderReplayed) == "true" {
			a.Kind = KindReplay
		}
		sum := sha256.Sum256(body)
		a.Resp = fmt.Sprintf("%d %x %s", resp.StatusCode, sum[:6], resp.Header.Get("Location"))
		var ans answer
		if json.Unmarshal(body, &ans) == nil {
			a.ExecID, a.ExecAttempt = ans.ID, ans.Attempt
		}
		return
	case resp.StatusCode == http.StatusConflict:
		a.Kind = KindConflict
	case resp.StatusCode == http.StatusUnprocessableEntity:
		a.Kind = KindMismatch
	case resp.StatusCode == http.StatusServiceUnavailable:
		a.Kind = KindUnknown
	case resp.StatusCode == http.StatusInternalServerError:
		a.Kind = KindFailed
	default:
		a.Kind = KindOther
	}
	var p struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &p) == nil && p.Detail != "" {
		a.Detail = p.Detail
	} else {
		a.Detail = strings.TrimSpace(string(body))
	}
	if a.Kind == KindUnknown && strings.Contains(a.Detail, "not processed") {
		// docs/runtime.md: "not processed" only when the server knows; otherwise the detail says
		// the outcome is unknown.
		a.Kind = KindUnavailable
	}
}

// Policy is how a client retries a logical request.
type Policy struct {
	// Pick chooses the replica of the n-th attempt (from 0).
	Pick func(n int) Target
	// MaxBackoff caps the wait before a retry (the server's Retry-After, else 20ms, with
	// jitter); Give up after Deadline (from the first attempt).
	MaxBackoff time.Duration
	Deadline   time.Duration
}

// Run sends r until it gets a definitive answer (success, replay or 422) or one it cannot retry
// (KindOther), the deadline passes, or ctx ends; it returns the last attempt.
func (c *Client) Run(ctx context.Context, r *Request, p Policy) Attempt {
	start := time.Now()
	for n := 0; ; n++ {
		a := c.Send(ctx, p.Pick(n), r)
		if a.Kind.Definitive() || a.Kind == KindOther || ctx.Err() != nil || time.Since(start) > p.Deadline {
			return a
		}
		wait := 20 * time.Millisecond
		if s, err := strconv.Atoi(a.RetryAfter); err == nil {
			wait = time.Duration(s) * time.Second
		}
		wait = min(wait, p.MaxBackoff)
		wait = wait/2 + rand.N(wait/2+1)
		select {
		case <-ctx.Done():
			return a
		case <-time.After(wait):
		}
	}
}
