// Package load is the benchmark harness's closed-loop HTTP load generator: N workers, each
// sending one request after another for a fixed time, recording every latency.
//
// It is deliberately simple (no coordinated-omission correction): every variant is measured the
// same way in the same run, and the harness reports ratios between variants, not absolutes.
package load

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Request is one request to send. Build returns it for the n-th request of a run (n counts
// from 0 across all workers), so variants can use a fresh idempotency key per request.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// Builder makes the n-th request of a run.
type Builder func(n int64) Request

// Result is what one run measured.
type Result struct {
	Requests int64
	Elapsed  time.Duration
	// Statuses counts responses by status code; a replayed response (Idempotent-Replayed: true,
	// or the peer's Idempotency-Replayed: true) is counted under "replayed" instead of its status.
	Statuses map[string]int64
	// Errors counts transport errors (no response).
	Errors    int64
	latencies []time.Duration
}

// RPS is completed requests per second.
func (r Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Quantile returns the latency at q (0..1), or 0 without samples.
func (r Result) Quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(q * float64(len(r.latencies)-1))
	return r.latencies[i]
}

// Latencies returns the sorted latencies.
func (r Result) Latencies() []time.Duration { return r.latencies }

// NewClient returns an HTTP client that keeps up to conns idle connections to one host.
func NewClient(conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = conns * 2
	t.MaxIdleConnsPerHost = conns * 2
	t.MaxConnsPerHost = 0
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// Run sends requests from `workers` goroutines for duration d (or until ctx ends) and returns
// what it measured. Every response body is read whole, as a real client would.
func Run(ctx context.Context, c *http.Client, workers int, d time.Duration, build Builder) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		next     atomic.Int64
		mu       sync.Mutex
		res      = Result{Statuses: map[string]int64{}}
		wg       sync.WaitGroup
		firstErr error
	)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			statuses := map[string]int64{}
			var errs int64
			var lastErr error
			for ctx.Err() == nil {
				spec := build(next.Add(1) - 1)
				t0 := time.Now()
				status, err := do(ctx, c, spec)
				if ctx.Err() != nil {
					break // a request cut by the end of the run is not counted
				}
				if err != nil {
					errs++
					lastErr = err
					continue
				}
				lat = append(lat, time.Since(t0))
				statuses[status]++
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			for k, v := range statuses {
				res.Statuses[k] += v
			}
			res.Errors += errs
			if firstErr == nil && lastErr != nil {
				firstErr = lastErr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.Requests = int64(len(res.latencies))
	slices.Sort(res.latencies)
	if res.Requests == 0 && firstErr != nil {
		return res, fmt.Errorf("no request succeeded: %w", firstErr)
	}
	return res, nil
}

// Once sends n copies of the same request at the same moment (a barrier releases them
// together) and returns each response's status label and latency, in completion order.
func Once(ctx context.Context, c *http.Client, n int, spec Request) ([]string, []time.Duration, error) {
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		labels  []string
		lat     []time.Duration
		lastErr error
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			status, err := do(ctx, c, spec)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				lastErr = err
				labels = append(labels, "error")
				lat = append(lat, d)
				return
			}
			labels = append(labels, status)
			lat = append(lat, d)
		}()
	}
	close(start)
	wg.Wait()
	return labels, lat, lastErr
}

func do(ctx context.Context, c *http.Client, spec Request) (string, error) {
	var body io.Reader
	if spec.Body != nil {
		body = bytes.NewReader(spec.Body)
	}
	req, err := http.NewRequestWithContext(ctx, spec.Method, spec.URL, body)
	if err != nil {
		return "", err
	}
	for k, v := range spec.Header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// idemgen marks a replay Idempotent-Replayed (Stripe's header); idemlease, the peer of
	// bench/peer, Idempotency-Replayed.
	if resp.Header.Get("Idempotent-Replayed") == "true" || resp.Header.Get("Idempotency-Replayed") == "true" {
		return "replayed", nil
	}
	return fmt.Sprint(resp.StatusCode), nil
}
