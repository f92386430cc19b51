package pgstore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Fair shares: no tenant holds more than its share of the handler slots (Options.TenantShare,
// default three quarters, leaving one at least to the others), so another tenant's new key keeps its bound while one tenant's slow requests
// pile up. (Without shares, 60 concurrent 8 s requests of one tenant take every slot of a pool
// of 10, and another tenant's new key waits the whole store timeout and gets 503.)
func TestTenantShareOfHandlerSlots(t *testing.T) {
	e := newEnv(t, func(s *setup) { s.maxConns = 10; s.cfg.StoreTimeout = 2 * time.Second })
	h := e.atomicHandler(payOp())
	const slow = 30
	var wg sync.WaitGroup
	codes := make([]int, slow)
	for i := range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = serve(h, req("tenant-a", fmt.Sprintf("k-slow-%012d", i), body100, "X-Hold", "a")).Code
		}()
	}
	e.gate("a").wait(t)
	// Every slow request has reached its slot or the line (their lookups no longer hold a
	// connection), however slow the machine.
	eventually(t, "tenant-a's requests to reach a slot or the line", func() bool {
		held, waiting := e.st.SlotsForTest()
		return held+waiting == slow
	})
	held := e.pool.Stat().AcquiredConns()

	var others []time.Duration
	for i := range 5 {
		start := time.Now()
		w := summarize(t, serve(h, req(fmt.Sprintf("tenant-b%d", i), "k-other-00000000001", body100)))
		others = append(others, time.Since(start))
		if w.status != 201 {
			t.Errorf("tenant-b%d's new key while tenant-a holds its share: %+v (after %v)", i, w, others[i].Round(time.Millisecond))
		}
	}
	e.gate("a").open()
	wg.Wait()
	statuses := map[int]int{}
	for _, c := range codes {
		statuses[c]++
	}
	t.Logf("tenant-a held %d connections of 10; other tenants' new keys took %v; tenant-a's %d requests: %v", held, others, slow, statuses)
	if held > 7 {
		t.Errorf("tenant-a held %d connections of a pool of 10, want its share (6 of the 9 handler slots) and a lookup's", held)
	}
	if n := e.payments("tenant-a"); n != statuses[201] {
		t.Errorf("tenant-a: %d payments, %d answered 201", n, statuses[201])
	}
}
