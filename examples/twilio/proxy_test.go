package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
)

// faultProxy stands between twilio-go and the server, as a load balancer does: it forwards every
// request, lets the server execute it to the end, records the answer, and may drop it by
// resetting the client's connection (TCP RST), so that the client never learns the outcome.
type faultProxy struct {
	target string
	client *http.Client

	mu       sync.Mutex
	drop     []int // the attempts (0 first) whose answers are dropped
	attempts []*attempt
}

// attempt is one request the proxy forwarded and what the server answered.
type attempt struct {
	status  int // 0: the server could not be reached
	header  http.Header
	body    []byte
	dropped bool
}

func newFaultProxy(target string) *faultProxy {
	return &faultProxy{target: target, client: &http.Client{Transport: &http.Transport{}}}
}

// dropAnswers makes the proxy drop the answers of the attempts numbered n (0 first).
func (p *faultProxy) dropAnswers(n ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = n
}

// seen returns the attempts so far.
func (p *faultProxy) seen() []*attempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.attempts)
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		reset(w)
		return
	}
	a := &attempt{}
	p.mu.Lock()
	drop := slices.Contains(p.drop, len(p.attempts))
	p.attempts = append(p.attempts, a)
	p.mu.Unlock()

	// The server's side is not tied to the client's connection: once forwarded, the request
	// runs to its end whatever happens to the client.
	out, err := http.NewRequestWithContext(context.Background(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	out.Header = r.Header.Clone()
	resp, err := p.client.Do(out)
	if err == nil {
		a.body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			a.status, a.header = resp.StatusCode, resp.Header
		}
	}
	if a.status == 0 || drop {
		a.dropped = true
		reset(w)
		return
	}
	for k, vs := range a.header {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
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

// toProxy sends the SDK's requests, which name https://api.twilio.com, to the proxy: the
// transport an application's tests would give twilio-go's http.Client to talk to a local
// server.
type toProxy struct {
	proxy *url.URL
	next  http.RoundTripper
}

func (t toProxy) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = t.proxy.Scheme, t.proxy.Host, ""
	return t.next.RoundTrip(r)
}
