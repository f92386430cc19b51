package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
)

// Scenario 1: a storm of same-key requests across two replica processes (each its own runtime
// and pool) against one database, in atomic and lease mode. One request in twenty carries
// another body. Every client retries its 409s until it has a definitive answer, then the
// history is audited and checked.
func TestStorm(t *testing.T) {
	for _, mode := range []string{"atomic", "lease"} {
		t.Run(mode, func(t *testing.T) { storm(t, mode) })
	}
}

func storm(t *testing.T, mode string) {
	w := newWorld(t, pgtest.NewDatabase(t))
	reps := []*replica{w.replica("A", nil), w.replica("B", nil)}
	h := NewHistory()
	c := NewClient(h, 30*time.Second)
	defer c.Close()
	ctx := context.Background()
	rounds, n := pick(1, 5), pick(200, 500)
	began := time.Now()
	for round := range rounds {
		key := w.key(fmt.Sprintf("storm-%s-%d", mode, round))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			amount := int64(100)
			if i%20 == 7 {
				amount = 200
			}
			r := &Request{Logical: c.NextLogical(), Mode: mode, Tenant: "tA", Key: key, Amount: amount,
				Headers: map[string]string{"X-Delay": "100ms"}}
			p := Policy{Pick: func(k int) Target { return reps[(i+k)%2].target() }, MaxBackoff: 50 * time.Millisecond, Deadline: 20 * time.Second}
			wg.Go(func() {
				<-start
				c.Run(ctx, r, p)
			})
		}
		close(start)
		wg.Wait()
	}
	attempts := h.Attempts()
	byReplica := map[string]map[Kind]int{}
	for _, a := range attempts {
		if byReplica[a.Replica] == nil {
			byReplica[a.Replica] = map[Kind]int{}
		}
		byReplica[a.Replica][a.Kind]++
	}
	w.verify("storm/"+mode, h, time.Since(began),
		AuditOptions{Allowed: []Kind{KindOK, KindReplay, KindConflict, KindMismatch}, Settled: true},
		ModelOptions{},
		fmt.Sprintf("%d rounds of %d same-key requests (1 in 20 with another body) over 2 replicas; per replica: A %v, B %v",
			rounds, n, kinds(byReplica["A"]), kinds(byReplica["B"])))
	if rows := len(w.effects().Rows); rows != rounds {
		t.Errorf("executions = %d, want %d (one per key)", rows, rounds)
	}
}

func kinds(m map[Kind]int) string {
	s := ""
	for k := KindOK; k <= KindOther; k++ {
		if m[k] > 0 {
			s += fmt.Sprintf(" %s=%d", k, m[k])
		}
	}
	if s == "" {
		return "{}"
	}
	return "{" + s[1:] + "}"
}
