package conform

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// sendCopies sends n copies of w at once (released together) and waits for all of them.
func (c *checkRun) sendCopies(ctx context.Context, label string, w *wire, n int) []*Exchange {
	out := make([]*Exchange, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = c.send(ctx, fmt.Sprintf("%s %d of %d", label, i+1, n), w)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// withHeader returns w with the header lines of h added (a test knob).
func withHeader(w *wire, h http.Header) *wire {
	c := *w
	c.header = append(append([]field{}, w.header...), headerFields(h)...)
	return &c
}

// checkConcurrent: N copies at once execute once. Every 2xx carries the same resource (the
// same body, or the same id), every other answer is 409 with Retry-After; a later retry
// replays the execution; the effects oracle counts one execution.
func checkConcurrent(ctx context.Context, c *checkRun) {
	o := c.o
	key, ok := c.key()
	if !ok {
		return
	}
	req := o.req.keyed(key)
	w := c.wire(req, spellCanonical)
	if o.r.o.DelayHeader != nil {
		w = withHeader(w, o.r.o.DelayHeader)
	}
	n := o.r.o.Duplicates
	before, has := c.effects(ctx)
	copies := c.sendCopies(ctx, "copy", w, n)
	var executed, replays, conflicts []*Exchange
	for _, e := range copies {
		if c.noAnswer(e) {
			return
		}
		switch {
		case e.replayed():
			replays = append(replays, e)
		case e.Status == http.StatusConflict:
			conflicts = append(conflicts, e)
		case e.Status >= 500:
			c.fail([]*Exchange{e}, "a copy got %d", e.Status)
			return
		default:
			executed = append(executed, e)
		}
	}
	summary := distribution(copies)
	if u := o.usedUp(copies...); u != nil {
		c.skipUsedUp(ctx, fmt.Sprintf("%d copies at once (%s): a copy", n, summary), u)
		return
	}
	if len(executed) > 1 {
		a, b := executed[0], executed[1]
		if string(a.respBodyRaw) != string(b.respBodyRaw) {
			c.fail([]*Exchange{a, b}, "%d copies at once (%s): %d answers are executions, not replays, with different bodies: the operation ran more than once", n, summary, len(executed))
		} else {
			c.fail([]*Exchange{a, b}, "%d copies at once (%s): %d answers are executions (no Idempotent-Replayed) of the same key", n, summary, len(executed))
		}
		return
	}
	// Every 2xx (executed or replayed) must carry the one resource.
	var twoxx []*Exchange
	for _, e := range append(append([]*Exchange{}, executed...), replays...) {
		if e.Status/100 == 2 {
			twoxx = append(twoxx, e)
		}
	}
	for _, e := range twoxx[min(1, len(twoxx)):] {
		if !sameResource(twoxx[0], e) {
			c.fail([]*Exchange{twoxx[0], e}, "%d copies at once (%s): two 2xx answers carry different resources: a copy was answered before the execution ended with something that is not its answer", n, summary)
			return
		}
	}
	for _, e := range conflicts {
		if why := o.exp.inFlight.judge(e); why != "" {
			c.fail([]*Exchange{e}, "%d copies at once (%s): a copy met the first in flight and got %s", n, summary, why)
			return
		}
	}
	for _, e := range replays {
		if len(executed) == 1 && e.Status != executed[0].Status {
			c.fail([]*Exchange{executed[0], e}, "%d copies at once (%s): a replay's status %d differs from the execution's %d", n, summary, e.Status, executed[0].Status)
			return
		}
	}
	if len(executed) == 0 && len(replays) == 0 {
		c.note("no copy executed within the request timeout (%s)", summary)
	}
	if len(conflicts) == 0 {
		if o.r.o.DelayHeader == nil {
			c.note("no copy met the first in flight (%s); give --delay-header to make the handler slow enough", summary)
		} else {
			c.note("no copy met the first in flight (%s)", summary)
		}
	} else {
		c.note("%s", summary)
	}
	c.expectEffects(ctx, before, has, 1, fmt.Sprintf("%d copies at once", n), copies[:min(2, len(copies))])
	if len(executed) == 1 {
		again := c.retryUntilFinal(ctx, "a later retry", c.wire(req, spellCanonical), 5*time.Second)
		if why := o.sameAnswer(executed[0], again); why != "" {
			c.fail([]*Exchange{executed[0], again}, "after the copies, a retry is no replay of the execution: %s", why)
		}
	}
}

// sameResource reports whether two 2xx answers carry the same resource: the same body bytes,
// or JSON bodies with the same id member.
func sameResource(a, b *Exchange) bool {
	if string(a.respBodyRaw) == string(b.respBodyRaw) {
		return true
	}
	ia, oka := answerValue(a.respBodyRaw, []string{"id"})
	ib, okb := answerValue(b.respBodyRaw, []string{"id"})
	return oka && okb && ia != nil && jsonText(ia) == jsonText(ib)
}

// distribution counts answers by status and replay: "201 ×1, 409 ×6, replayed 201 ×1".
func distribution(es []*Exchange) string {
	counts := map[string]int{}
	for _, e := range es {
		k := fmt.Sprint(e.Status)
		if !e.ok() {
			k = "no answer"
		} else if e.replayed() {
			k = "replayed " + k
		}
		counts[k]++
	}
	keys := sortedKeys(counts)
	sort.SliceStable(keys, func(i, j int) bool {
		return !strings.HasPrefix(keys[i], "replayed") && strings.HasPrefix(keys[j], "replayed")
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

// retryUntilFinal sends w until the answer is not 409 in flight, honouring Retry-After (at
// most one second a time), for at most patience.
func (c *checkRun) retryUntilFinal(ctx context.Context, label string, w *wire, patience time.Duration) *Exchange {
	deadline := time.Now().Add(patience)
	for {
		e := c.send(ctx, label, w)
		if !e.ok() || e.Status != http.StatusConflict || time.Now().After(deadline) || !waitRetryAfter(ctx, e) {
			return e
		}
	}
}

// waitRetryAfter waits as a client does after e, a 409 in flight: its Retry-After, at most one
// second (100 ms without one). false when ctx ended first.
func waitRetryAfter(ctx context.Context, e *Exchange) bool {
	wait := 100 * time.Millisecond
	if d, err := time.ParseDuration(e.header("Retry-After") + "s"); err == nil && d > 0 {
		wait = min(d, time.Second)
	}
	select {
	case <-time.After(wait):
		return true
	case <-ctx.Done():
		return false
	}
}
