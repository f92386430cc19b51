package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultProxy stands between stripe-go and the server, as a load balancer does, and breaks
// what a network breaks: it forwards every request to the server, lets the server execute it
// to the end, and then may drop the answer by resetting the client's connection (TCP RST), so
// the client never learns the outcome and retries. It records every attempt it saw, by tenant
// (the Authorization header: each scenario uses a key of its own).
//
// Answers carry Connection: close unless a plan asks for keep-alive: on a reused connection,
// net/http re-sends a request that carries an Idempotency-Key by itself when the connection
// breaks before the answer (one of the scenarios shows it), and the counts of the others
// are those of stripe-go's own retries.
type faultProxy struct {
	target string
	client *http.Client

	mu       sync.Mutex
	plans    map[string]*plan
	attempts map[string][]*attempt
}

// plan is what the proxy does to one tenant's requests.
type plan struct {
	// drop lists the attempts (0 first, counted over the tenant's requests) whose answers are
	// dropped after the server has answered.
	drop []int
	// resetAfter: the first attempt's connection is reset this long after the request was
	// forwarded, while the server is still executing it (a load balancer's timeout).
	resetAfter time.Duration
	// keepAlive lets the client reuse its connections.
	keepAlive bool
	// rewrite, when set, changes attempt n (0 first) before it is forwarded: its header in
	// place, its body by the return value.
	rewrite func(n int, h http.Header, body []byte) []byte
}

// attempt is one request the proxy saw and what became of it.
type attempt struct {
	n              int
	key, account   string
	header         http.Header // as forwarded
	body           string      // as forwarded
	sent, answered time.Time
	status         int  // the server's status; 0 if the server could not be reached
	replayed       bool // Idempotent-Replayed: true
	requestID      string
	original       string // Original-Request
	dropped        bool   // the client never got the answer
	done           chan struct{}
}

func newFaultProxy(target string) *faultProxy {
	return &faultProxy{
		target:   target,
		client:   &http.Client{Transport: &http.Transport{}},
		plans:    map[string]*plan{},
		attempts: map[string][]*attempt{},
	}
}

// plan sets what happens to tenant's requests.
func (p *faultProxy) plan(tenant string, pl plan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans["Bearer "+tenant] = &pl
}

// seen returns tenant's attempts once the server has answered each of them.
func (p *faultProxy) seen(t *testing.T, tenant string) []*attempt {
	t.Helper()
	p.mu.Lock()
	as := append([]*attempt(nil), p.attempts["Bearer "+tenant]...)
	p.mu.Unlock()
	for _, a := range as {
		select {
		case <-a.done:
		case <-time.After(15 * time.Second):
			t.Fatalf("proxy: attempt %d of %s still without an answer from the server", a.n, tenant)
		}
	}
	return as
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tenant := r.Header.Get("Authorization")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		reset(w)
		return
	}
	p.mu.Lock()
	pl := p.plans[tenant]
	if pl == nil {
		pl = &plan{}
	}
	a := &attempt{n: len(p.attempts[tenant]), key: r.Header.Get("Idempotency-Key"),
		account: r.Header.Get("Stripe-Account"), sent: time.Now(), done: make(chan struct{})}
	p.attempts[tenant] = append(p.attempts[tenant], a)
	p.mu.Unlock()

	h := r.Header.Clone()
	h.Del("Connection")
	if pl.rewrite != nil {
		body = pl.rewrite(a.n, h, body)
	}
	a.header, a.body = h, string(body)

	// The server's side of the exchange is not tied to the client's connection: once
	// forwarded, the request runs to its end whatever happens to the client.
	out, err := http.NewRequestWithContext(context.Background(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	out.Header = h
	type answer struct {
		status int
		header http.Header
		body   []byte
	}
	answers := make(chan answer, 1)
	go func() {
		defer close(a.done)
		var ans answer
		resp, err := p.client.Do(out)
		if err == nil {
			ans.body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			ans.status, ans.header = resp.StatusCode, resp.Header
		}
		a.answered = time.Now()
		if err == nil {
			a.status = ans.status
			a.replayed = ans.header.Get("Idempotent-Replayed") == "true"
			a.requestID, a.original = ans.header.Get("Request-Id"), ans.header.Get("Original-Request")
		}
		answers <- ans
	}()

	if pl.resetAfter > 0 && a.n == 0 {
		select {
		case <-time.After(pl.resetAfter):
			a.dropped = true
			reset(w)
			return
		case ans := <-answers:
			answers <- ans // the server was faster than the timeout: answer normally
		}
	}
	ans := <-answers
	if ans.status == 0 || slices.Contains(pl.drop, a.n) {
		a.dropped = true
		reset(w)
		return
	}
	for k, vs := range ans.header {
		if k == "Connection" || k == "Content-Length" {
			continue
		}
		w.Header()[k] = vs
	}
	if !pl.keepAlive {
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(ans.status)
	_, _ = w.Write(ans.body)
}

// reset closes the client's connection without an answer, with a TCP RST (SO_LINGER 0).
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// String prints an attempt for the test log: when it arrived (relative to t0), what the
// server answered, and whether the client got it.
func (a *attempt) describe(t0 time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "+%.2fs %d", a.sent.Sub(t0).Seconds(), a.status)
	if a.replayed {
		b.WriteString(" replayed")
	}
	if a.dropped {
		b.WriteString(" (dropped)")
	}
	fmt.Fprintf(&b, " answered +%.2fs", a.answered.Sub(t0).Seconds())
	return b.String()
}
