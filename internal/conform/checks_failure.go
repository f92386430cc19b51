package conform

import (
	"context"
	"net/http"
	"time"

	"github.com/idemgen/idemgen/internal/model"
)

// serverError sends req with the fail knob and returns the 5xx, or nil after skipping or
// failing the check.
func (c *checkRun) serverError(ctx context.Context, req *request) *Exchange {
	if c.o.r.o.FailHeader == nil {
		c.skip("needs --fail-header: a request header that makes the service fail with a 5xx after doing its work (X-Test-Fail: 500)")
		return nil
	}
	e := c.send(ctx, "the request with the fail knob", withHeader(c.wire(req, spellCanonical), c.o.r.o.FailHeader))
	if c.noAnswer(e) {
		return nil
	}
	if e.Status < 500 {
		c.skip("the fail knob (--fail-header) did not make a 5xx: got %d", e.Status)
		return nil
	}
	return e
}

// releaseWait is how long a key may stay in flight after a 5xx before 5xx-releases-key fails.
const releaseWait = 3 * time.Second

// check5xxNotStored: after a 5xx the same request executes again, never a replay of the 5xx.
func check5xxNotStored(ctx context.Context, c *checkRun) {
	key, ok := c.key()
	if !ok {
		return
	}
	req := c.o.req.keyed(key)
	fail := c.serverError(ctx, req)
	if fail == nil {
		return
	}
	e := c.retryUntilFinal(ctx, "the retry without the knob", c.wire(req, spellCanonical), releaseWait)
	switch {
	case c.noAnswer(e, fail):
	case e.replayed() || (e.Status == fail.Status && string(e.respBodyRaw) == string(fail.respBodyRaw)):
		c.fail([]*Exchange{fail, e}, "the retry after a %d replays it: a server error was stored under the key, so the client can never complete the request", fail.Status)
	case e.Status == http.StatusConflict:
		c.skip("the key stayed in flight after the %d (see 5xx-releases-key)", fail.Status)
	case e.Status >= 500:
		c.fail([]*Exchange{fail, e}, "the retry after a %d got %d", fail.Status, e.Status)
	}
}

// check5xxReleases: after a 5xx the key is free at once: the retry is not held in flight.
func check5xxReleases(ctx context.Context, c *checkRun) {
	key, ok := c.key()
	if !ok {
		return
	}
	req := c.o.req.keyed(key)
	fail := c.serverError(ctx, req)
	if fail == nil {
		return
	}
	began := time.Now()
	e := c.retryUntilFinal(ctx, "the retry without the knob", c.wire(req, spellCanonical), releaseWait)
	if c.noAnswer(e, fail) {
		return
	}
	if e.Status == http.StatusConflict {
		c.fail([]*Exchange{fail, e}, "the key is still in flight %v after the %d: the failed request never released it (a lock without an expiry?)", time.Since(began).Round(100*time.Millisecond), fail.Status)
		return
	}
	if waited := time.Since(began); waited > 500*time.Millisecond {
		c.note("the key was held for %v after the %d", waited.Round(10*time.Millisecond), fail.Status)
	}
}

// check5xxRollsBack: a 5xx leaves no effect (atomic mode: its writes commit with the record or
// not at all), and its retry leaves exactly one execution's effects (lease mode: the provider
// call of the failed attempt is made again under the same provider key).
func check5xxRollsBack(ctx context.Context, c *checkRun) {
	o := c.o
	if o.r.o.Effects == nil {
		c.skip("needs --effects-cmd: an effects oracle to see what the 5xx left behind")
		return
	}
	if o.perExec == 0 {
		c.skip("the effects oracle saw no effect of this operation (first-request)")
		return
	}
	key, ok := c.key()
	if !ok {
		return
	}
	req := o.req.keyed(key)
	before, has := c.effects(ctx)
	fail := c.serverError(ctx, req)
	if fail == nil || !has {
		return
	}
	if o.op.Settings.Mode == model.ModeAtomic {
		c.expectEffects(ctx, before, has, 0, "the 5xx left effects behind (completion in a transaction of its own?)", []*Exchange{fail})
		if c.failed() {
			return
		}
	}
	e := c.retryUntilFinal(ctx, "the retry without the knob", c.wire(req, spellCanonical), releaseWait)
	if c.noAnswer(e, fail) {
		return
	}
	if u := o.usedUp(e); u != nil {
		c.skipUsedUp(ctx, "the retry after the 5xx", u)
		return
	}
	c.expectEffects(ctx, before, has, 1, "a 5xx and its retry", []*Exchange{fail, e})
}
