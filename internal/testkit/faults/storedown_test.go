package faults

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Scenario 3: PostgreSQL stopped, then frozen with SIGSTOP, under load, on a private server. Two
// replicas serve a steady load of clients, each sending new keys and retrying every answer that
// is not definitive. Every answer must be a success, a replay, 409 or 503 — never a 500, never a
// hung request, never a second execution — and every request answered "outcome unknown" must
// resolve on retry (a replay when its commit had applied, a first execution when not).
func TestStoreDown(t *testing.T) {
	c := newCluster(t)
	for _, mode := range []string{"atomic", "lease"} {
		t.Run(mode, func(t *testing.T) { storeDown(t, c, mode) })
	}
	t.Run("lease-stopped-in-call-phase", func(t *testing.T) { stoppedInCallPhase(t, c) })
}

// stoppedInCallPhase is the moment of scenario 3 that matters most for lease mode, made
// deterministic: PostgreSQL stops while a request is in its call phase, after the provider call.
// The completion cannot be stored; the answer must not say "not processed" (the provider was
// charged), and the retry, after the lease, takes over and completes once.
func stoppedInCallPhase(t *testing.T, c *cluster) {
	w := newWorld(t, c.database("faults_callphase"))
	lease := time.Second
	a := w.replica("A", func(rc *replicaConfig) { rc.StoreTimeout, rc.Lease = time.Second, lease })
	h := NewHistory()
	cl := NewClient(h, 30*time.Second)
	defer cl.Close()
	ctx := context.Background()
	began := time.Now()
	r := &Request{Logical: cl.NextLogical(), Mode: "lease", Tenant: "tS", Key: w.key("callphase"), Amount: 100,
		Headers: map[string]string{"X-Hold": "call", "X-Delay": "300ms"}}
	done := make(chan Attempt, 1)
	go func() { done <- cl.Send(ctx, a.target(), r) }()
	a.awaitHandler(done)
	c.stop()
	first := <-done
	c.start()
	retry := &Request{Logical: r.Logical, Mode: "lease", Tenant: r.Tenant, Key: r.Key, Amount: r.Amount}
	final := cl.Run(ctx, retry, Policy{Pick: func(int) Target { return a.target() }, MaxBackoff: 100 * time.Millisecond, Deadline: 60 * time.Second})
	cl.Send(ctx, a.target(), retry)
	w.verify("storedown/lease-stopped-in-call-phase", h, time.Since(began),
		AuditOptions{Allowed: []Kind{KindOK, KindReplay, KindConflict, KindUnavailable, KindUnknown}, Settled: true}, ModelOptions{},
		fmt.Sprintf("stopped after the provider call: the client got %d %s (%s); the retry: %s", first.Status, first.Kind, first.Detail, final.Kind))
	if first.Kind == KindUnavailable {
		t.Errorf("a request whose provider call was made was answered %d %q", first.Status, first.Detail)
	}
}

// database creates a database on the private server and returns its URL.
func (c *cluster) database(name string) string {
	c.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.url())
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		c.t.Fatal(err)
	}
	u, _ := url.Parse(c.url())
	u.Path = "/" + name
	return u.String()
}

func storeDown(t *testing.T, c *cluster, mode string) {
	w := newWorld(t, c.database("faults_"+mode))
	storeTimeout := pick(time.Second, 2*time.Second)
	lease := pick(time.Second, 2*time.Second)
	cfg := func(rc *replicaConfig) { rc.StoreTimeout, rc.Lease, rc.MaxConns = storeTimeout, lease, 10 }
	reps := []*replica{w.replica("A", cfg), w.replica("B", cfg)}
	h := NewHistory()
	cl := NewClient(h, 30*time.Second)
	defer cl.Close()
	ctx := context.Background()

	clients := pick(8, 32)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	var logicals []*Request
	began := time.Now()
	for i := range clients {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				r := &Request{Logical: cl.NextLogical(), Mode: mode, Tenant: "tS", Amount: int64(100 + i),
					Headers: map[string]string{"X-Delay": "20ms"}}
				r.Key = w.key(fmt.Sprintf("sd-%s-%d", mode, r.Logical))
				mu.Lock()
				logicals = append(logicals, r)
				mu.Unlock()
				cl.Run(ctx, r, Policy{Pick: func(k int) Target { return reps[(i+n+k)%2].target() },
					MaxBackoff: 200 * time.Millisecond, Deadline: 90 * time.Second})
			}
		})
	}
	// answered counts answers of kinds ks to attempts called after from.
	answered := func(from time.Duration, ks ...Kind) int {
		return h.Count(func(a *Attempt) bool {
			if a.Call < from {
				return false
			}
			for _, k := range ks {
				if a.Kind == k {
					return true
				}
			}
			return false
		})
	}
	served := func(from time.Duration) func() bool {
		return func() bool { return answered(from, KindOK, KindReplay) >= 20 }
	}
	// faulty holds a fault for at least d and until the load has met it (n answers 503).
	faulty := func(from time.Duration, d time.Duration, n int) {
		timer := time.NewTimer(d)
		<-timer.C
		eventually(t, "the load to meet the fault", 30*time.Second, func() bool {
			return answered(from, KindUnavailable, KindUnknown) >= n
		})
	}
	var phases []string
	phase := func(name string, from time.Duration) {
		phases = append(phases, fmt.Sprintf("%s %.2fs–%.2fs", name, from.Seconds(), h.Now().Seconds()))
	}

	eventually(t, "the load to start", 30*time.Second, served(0))
	tStop := h.Now()
	c.stop()
	faulty(tStop, pick(500*time.Millisecond, 5*time.Second), clients)
	phase("stopped", tStop)
	tUp := h.Now()
	c.start()
	eventually(t, "the service to recover after the restart", 60*time.Second, served(tUp))
	tFreeze := h.Now()
	frozen := c.freeze()
	// Longer than the store timeout, so that commits in flight at the freeze time out.
	faulty(tFreeze, pick(storeTimeout+500*time.Millisecond, 8*time.Second), clients)
	c.thaw()
	phase(fmt.Sprintf("frozen (%d processes)", frozen), tFreeze)
	tThaw := h.Now()
	eventually(t, "the service to recover after the thaw", 60*time.Second, served(tThaw))
	stop.Store(true)
	wg.Wait()

	// Each logical request asks once more: it must replay the response its client got.
	var cw sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, r := range logicals {
		cw.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cl.Send(ctx, reps[i%2].target(), r)
		})
	}
	cw.Wait()

	attempts := h.Attempts()
	unknown503, hung := 0, 0
	resolved := map[string]int{}
	for _, a := range attempts {
		switch {
		case a.Kind == KindUnknown && a.Status == 0:
			hung++
			t.Errorf("%s got no answer: %s", a.ID, a.Detail)
		case a.Kind == KindUnknown:
			unknown503++
			// How the retry resolved it: the first definitive answer of its logical request.
			d := firstDefinitiveAfter(attempts, a)
			switch {
			case d == nil:
				resolved["unresolved"]++
				t.Errorf("%s (503 outcome unknown) was never resolved by a retry", a.ID)
			case d.Kind == KindReplay && d.ExecAttempt == a.ID:
				resolved["it had committed: replayed"]++
			case d.Kind == KindOK:
				resolved["it had not committed: ran once"]++
			default:
				resolved[fmt.Sprintf("%s of %s", d.Kind, d.ExecAttempt)]++
			}
		}
	}
	var res []string
	for k, n := range resolved {
		res = append(res, fmt.Sprintf("%s %d", k, n))
	}
	w.verify("storedown/"+mode, h, time.Since(began),
		AuditOptions{Allowed: []Kind{KindOK, KindReplay, KindConflict, KindUnavailable, KindUnknown}, Settled: true},
		ModelOptions{},
		fmt.Sprintf("%d clients over 2 replicas, StoreTimeout %v; phases: %s", clients, storeTimeout, strings.Join(phases, ", ")),
		fmt.Sprintf("503 not processed: %d; 503 outcome unknown: %d (%s); no answer: %d",
			h.Count(func(a *Attempt) bool { return a.Kind == KindUnavailable }), unknown503, strings.Join(res, ", "), hung))
}

// firstDefinitiveAfter returns the first definitive answer of a's logical request called after
// a, or nil.
func firstDefinitiveAfter(attempts []Attempt, a Attempt) *Attempt {
	for i := range attempts {
		b := &attempts[i]
		if b.Logical == a.Logical && b.Call > a.Call && b.Kind.Definitive() {
			return b
		}
	}
	return nil
}
