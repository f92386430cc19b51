package conform

import (
	"context"
)

// checkTenants: a key is unique per tenant. The same key and request under another tenant is
// another request (it executes), and another tenant's other body under the same key is no
// mismatch.
func checkTenants(ctx context.Context, c *checkRun) {
	o := c.o
	if o.r.o.TenantHeader == nil {
		c.skip("needs --tenant-header: the credentials of a second tenant")
		return
	}
	key, ok := c.key()
	if !ok {
		return
	}
	req := o.req.keyed(key)
	a := c.execute(ctx, "tenant A's request", req)
	if a == nil {
		return
	}
	before, has := c.effects(ctx)
	b := c.send(ctx, "tenant B, the same key and request", req.wire(spellCanonical, o.r.o.TenantHeader))
	if c.noAnswer(b, a) {
		return
	}
	if b.replayed() {
		c.fail([]*Exchange{a, b}, "tenant B got tenant A's answer replayed: keys are not scoped by tenant (a tenant can read another's responses)")
		return
	}
	if a.Status/100 == 2 && refusedTenant(b.Status) {
		// Tenant B may not act on tenant A's resource (a session in the path): the refusal
		// is the service's to give, and the key's isolation cannot be seen through it.
		c.note("tenant B is refused tenant A's request (%d): another tenant may not act on this resource, so only the absence of a replay was checked", b.Status)
		return
	}
	if b.Status >= 500 || o.exp.mismatch.judge(b) == "" {
		c.fail([]*Exchange{a, b}, "tenant B's request with tenant A's key got %d", b.Status)
		return
	}
	if ia, ok := answerValue(a.respBodyRaw, []string{"id"}); ok && ia != nil && a.Status/100 == 2 && !req.names("id") {
		if ib, ok := answerValue(b.respBodyRaw, []string{"id"}); ok && jsonText(ia) == jsonText(ib) {
			c.fail([]*Exchange{a, b}, "tenant B's answer carries tenant A's resource (id %s)", jsonText(ia))
			return
		}
	}
	c.expectEffects(ctx, before, has, 1, "tenant B's request", []*Exchange{a, b})
	ch, ok := pickChange(o, o.req)
	if !ok {
		return
	}
	key2, ok := c.key()
	if !ok {
		return
	}
	req2 := o.req.keyed(key2)
	a2 := c.execute(ctx, "tenant A's request", req2)
	if a2 == nil {
		return
	}
	other := req2.clone()
	ch.apply(other)
	b2 := c.send(ctx, "tenant B, the same key, "+ch.what+" changed", other.wire(spellCanonical, o.r.o.TenantHeader))
	if c.noAnswer(b2, a2) || (a2.Status/100 == 2 && refusedTenant(b2.Status)) {
		return
	}
	if o.exp.mismatch.judge(b2) == "" || b2.replayed() {
		c.fail([]*Exchange{a2, b2}, "tenant B's other request under tenant A's key is refused or replayed (%d): keys are not scoped by tenant", b2.Status)
	}
}

// refusedTenant reports whether status refuses a tenant access to a resource (RFC 9110
// sections 15.5.2, 15.5.4, 15.5.5): 401, 403 or 404.
func refusedTenant(status int) bool { return status == 401 || status == 403 || status == 404 }
