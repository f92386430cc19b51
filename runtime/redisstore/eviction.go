package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// A running lease claim is the only thing that keeps a duplicate from running its call phase
// (a provider call) while the first request's runs: a claim that Redis evicts to make room
// (maxmemory with an allkeys-* policy, or a volatile-* one: running claims carry a TTL, the
// abandon delay) lets the duplicate claim the key again. So the lease store runs only on servers
// whose maxmemory-policy is noeviction: with memory full, Redis then refuses new claims (the
// runtime answers 503 and nothing runs) instead of dropping old ones. It reads the policy when
// it is made, after any connection failure (a reconnect may reach another server: a failover, a
// restart with another configuration) and at least every Options.PolicyRecheck, on every node of
// a cluster, and refuses to claim while the policy is wrong or unknown.
//
// The replay cache needs no such check: its copies may be evicted under any policy (a lost copy
// is a miss, and the database answers).

// ErrEvictionPolicy is returned by New and by the claims of a Store (Reserve, TakeOver) while a
// Redis server's maxmemory-policy is not noeviction: Redis could evict running claims. The
// runtime answers such a claim 503 (the request was not processed).
var ErrEvictionPolicy = errors.New("redisstore: the Redis server's maxmemory-policy is not noeviction, so it could evict running lease claims; set maxmemory-policy noeviction (docs/redis.md, Eviction)")

// ErrPolicyUnknown is returned like ErrEvictionPolicy when a server refuses both CONFIG GET and
// INFO (as some managed services do), so the policy cannot be read. Options.AssumeNoEviction
// says that you have made sure it is noeviction.
var ErrPolicyUnknown = errors.New("redisstore: the Redis server refuses CONFIG GET and INFO, so its maxmemory-policy cannot be checked; make sure it is noeviction and set Options.AssumeNoEviction")

// policyGuard holds the verdict on the servers' eviction policy.
type policyGuard struct {
	c      rueidis.Client
	every  time.Duration
	assume bool

	mu sync.Mutex
	// checked is when the verdict err was reached (zero: never); stale is set by a connection
	// failure since, so the next claim checks again first. running is closed when the check
	// under way ends; netErr is why the last check got no answer.
	checked time.Time
	err     error
	stale   atomic.Bool
	running chan struct{}
	netErr  error
}

// allow returns nil when claims may be made: the policy was checked recently, on every node,
// and is noeviction. Otherwise it checks now (one CONFIG GET per node) under ctx, or waits for
// the check another claim is making.
func (g *policyGuard) allow(ctx context.Context) error {
	g.mu.Lock()
	if !g.checked.IsZero() && !g.stale.Load() && time.Since(g.checked) < g.every {
		err := g.err
		g.mu.Unlock()
		return err
	}
	if ch := g.running; ch != nil {
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("redisstore: wait for the maxmemory-policy check: %w", context.Cause(ctx))
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.stale.Load() || g.checked.IsZero() {
			return g.netErr
		}
		return g.err
	}
	ch := make(chan struct{})
	g.running = ch
	g.mu.Unlock()

	err := g.check(ctx)

	g.mu.Lock()
	defer g.mu.Unlock()
	g.running = nil
	close(ch)
	var net *netError
	if errors.As(err, &net) {
		// Redis did not answer: no verdict; the claim itself would fail the same way.
		g.stale.Store(true)
		g.netErr = net.err
		return net.err
	}
	g.checked, g.err = time.Now(), err
	g.stale.Store(false)
	return err
}

// netError is a check that failed for want of an answer.
type netError struct{ err error }

func (e *netError) Error() string { return e.err.Error() }

// failed notes a store call's error: a connection failure makes the next claim check again.
func (g *policyGuard) failed(err error) {
	if err != nil && !isReply(err) && !errors.Is(err, context.Canceled) {
		g.stale.Store(true)
	}
}

// check reads every node's maxmemory-policy.
func (g *policyGuard) check(ctx context.Context) error {
	for addr, node := range g.c.Nodes() {
		policy, err := readPolicy(ctx, node)
		switch {
		case errors.Is(err, ErrPolicyUnknown) && g.assume:
			continue
		case errors.Is(err, ErrPolicyUnknown):
			return fmt.Errorf("%w (server %s)", err, addr)
		case err != nil:
			return &netError{fmt.Errorf("redisstore: read the maxmemory-policy of %s: %w", addr, err)}
		case policy != "noeviction":
			return fmt.Errorf("%w (server %s has %s)", ErrEvictionPolicy, addr, policy)
		}
	}
	return nil
}

// readPolicy asks one node for its maxmemory-policy: CONFIG GET, else INFO memory (which
// managed services that rename or forbid CONFIG usually keep); ErrPolicyUnknown when it
// refuses both.
func readPolicy(ctx context.Context, node rueidis.Client) (string, error) {
	m, err := node.Do(ctx, node.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
	if err == nil {
		if p, ok := m["maxmemory-policy"]; ok {
			return p, nil
		}
	} else if !isReply(err) {
		return "", err
	}
	info, err := node.Do(ctx, node.B().Info().Section("memory").Build()).ToString()
	if err != nil && !isReply(err) {
		return "", err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); ok {
			return v, nil
		}
	}
	return "", ErrPolicyUnknown
}

// isReply reports an error that is Redis's answer (ERR, NOPERM, OOM, ...), not a failure to get
// one.
func isReply(err error) bool {
	_, ok := rueidis.IsRedisErr(err)
	return ok
}
