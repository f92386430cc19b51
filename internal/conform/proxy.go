package conform

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The fault proxy sits on a loopback port between the checker and the service. Each request
// tells it, in headers it removes before forwarding, which fault to apply:
//
//	X-Conform-Fault: reset        forward, read the service's whole answer, then reset the
//	                              client's connection (TCP RST) instead of answering
//	X-Conform-Fault: delay=800ms  hold the request that long before forwarding it (the
//	                              client has usually given up and retried by then)
//	X-Conform-Fault: twice        forward it on two connections at once; answer with the
//	                              first answer
//	X-Conform-Attempt: a17        names the attempt, so each answer the service gave is
//	                              recorded under it
//
// The proxy records every answer the service gave it (upstream), which the history uses as
// the ground truth of what the service decided, whatever the client saw.
const (
	headerFault   = "X-Conform-Fault"
	headerAttempt = "X-Conform-Attempt"
)

// upstream is one answer the service gave the proxy.
type upstream struct {
	attempt string
	copy    int // 0, or 1 for the second connection of "twice"
	call    time.Time
	ret     time.Time
	status  int
	header  http.Header
	body    []byte
	err     string
}

type proxy struct {
	target string // the service's base URL
	ln     net.Listener
	srv    *http.Server
	// Two transports: the copies of "twice" travel on two connections.
	tr [2]*http.Transport
	mu sync.Mutex
	// seen holds the upstream answers by attempt until taken.
	seen map[string][]upstream
	// held counts the requests being forwarded; idle is signalled when it drops to zero. Not a
	// WaitGroup: the operations checked at once drain while others' requests arrive, and a
	// WaitGroup may not be added to while a Wait is in progress.
	held int
	idle *sync.Cond
}

// startProxy listens on a loopback port and forwards to target.
func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fault proxy: %w", err)
	}
	p := &proxy{target: target, ln: ln, seen: map[string][]upstream{}}
	p.idle = sync.NewCond(&p.mu)
	for i := range p.tr {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DisableCompression = true
		t.MaxIdleConnsPerHost = 64
		p.tr[i] = t
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// url is the proxy's base URL.
func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

// close stops the proxy once the requests it still holds have been forwarded.
func (p *proxy) close() {
	p.srv.Close()
	p.drain()
	for _, t := range p.tr {
		t.CloseIdleConnections()
	}
}

// take returns and forgets the service's answers to an attempt.
func (p *proxy) take(attempt string) []upstream {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.seen[attempt]
	delete(p.seen, attempt)
	return out
}

// drain waits until the requests the proxy still holds (delayed ones) have been answered.
func (p *proxy) drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.held > 0 {
		p.idle.Wait()
	}
}

// hold counts a request being forwarded; the function it returns ends it.
func (p *proxy) hold() func() {
	p.mu.Lock()
	p.held++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.held--; p.held == 0 {
			p.idle.Broadcast()
		}
	}
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer p.hold()()
	fault, attempt := r.Header.Get(headerFault), r.Header.Get(headerAttempt)
	r.Header.Del(headerFault)
	r.Header.Del(headerAttempt)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	// The service's side must not end when the client gives up: a delayed or reset request
	// still reaches it, as a retry's predecessor does in production.
	ctx := context.WithoutCancel(r.Context())
	switch {
	case strings.HasPrefix(fault, "delay="):
		d, _ := time.ParseDuration(strings.TrimPrefix(fault, "delay="))
		time.Sleep(d)
		up := p.forward(ctx, r, body, attempt, 0)
		p.answer(w, up)
	case fault == "twice":
		ch := make(chan upstream, 2)
		for i := range 2 {
			go func() { ch <- p.forward(ctx, r, body, attempt, i) }()
		}
		first := <-ch
		p.answer(w, first)
		<-ch
	case fault == "reset":
		p.forward(ctx, r, body, attempt, 0)
		reset(w)
	default:
		p.answer(w, p.forward(ctx, r, body, attempt, 0))
	}
}

// forward sends the request to the service on connection i and records its answer.
func (p *proxy) forward(ctx context.Context, r *http.Request, body []byte, attempt string, i int) upstream {
	up := upstream{attempt: attempt, copy: i, call: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err == nil {
		req.Header = r.Header.Clone()
		req.Host = r.Host
		req.GetBody = nil // never re-sent behind the history's back (see client.sendTo)
		if len(body) == 0 {
			req.Body = io.NopCloser(bytes.NewReader(nil))
		}
		var resp *http.Response
		if resp, err = p.tr[i].RoundTrip(req); err == nil {
			up.status, up.header = resp.StatusCode, resp.Header
			up.body, err = io.ReadAll(io.LimitReader(resp.Body, readLimit))
			resp.Body.Close()
		}
	}
	up.ret = time.Now()
	if err != nil {
		up.err = err.Error()
		up.status = 0
	}
	if attempt != "" {
		p.mu.Lock()
		p.seen[attempt] = append(p.seen[attempt], up)
		p.mu.Unlock()
	}
	return up
}

func (p *proxy) answer(w http.ResponseWriter, up upstream) {
	if up.status == 0 {
		reset(w)
		return
	}
	for k, vs := range up.header {
		if k == "Content-Length" || k == "Connection" || k == "Transfer-Encoding" {
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(up.status)
	w.Write(up.body)
}

// reset closes the client's connection with a TCP RST, before any answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}
