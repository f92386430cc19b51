package client

import (
	"context"
	"time"
)

// backoff returns the wait before retry n (n ≥ 1, the retry after attempt n): full jitter, a
// uniform random duration in [0, min(maxDelay, base·2^(n-1))). Full jitter spreads the retries
// of many clients that failed together (after a deploy, a failover) instead of sending them in
// synchronized waves ("Exponential Backoff And Jitter", AWS Architecture Blog, 2015).
func (c *config) backoff(n int) time.Duration {
	bound := c.baseDelay
	for i := 1; i < n && bound < c.maxDelay; i++ {
		bound *= 2 // cannot overflow: bound < maxDelay before doubling
	}
	bound = min(bound, c.maxDelay)
	if bound <= 0 {
		return 0
	}
	return c.jitter(bound)
}

// clock is the Transport's view of time, replaced in tests so that backoff waits take no time.
type clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx ends, whichever comes first, and returns ctx.Err() in the
	// second case.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
