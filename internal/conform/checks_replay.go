package conform

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemgen/idemgen/internal/jsonvariant"
	"github.com/idemgen/idemgen/internal/model"
)

// checkFirst sends the operation's request with a fresh key. A 2xx is an execution; a final
// 4xx the service stores and replays (a 404 for a generated id) lets the other checks run on
// it; any other answer means the service refused the request before its key was read, and the
// other checks skip with that answer as the reason.
func checkFirst(ctx context.Context, c *checkRun) {
	o := c.o
	key, ok := c.key()
	if !ok {
		o.unusable = "no key could be made: " + c.res.Why
		return
	}
	req := o.req.keyed(key)
	before, hasBefore := c.effects(ctx)
	e := c.send(ctx, "first request", c.wire(req, spellCanonical))
	if c.noAnswer(e) {
		o.unusable = "the first request got no answer (first-request)"
		return
	}
	o.firstStatus = e.Status
	if why := echoed(o.exp.echo, e); why != "" {
		c.fail([]*Exchange{e}, "%s", why)
	}
	switch {
	case e.replayed():
		c.fail([]*Exchange{e}, "a fresh key's answer is marked Idempotent-Replayed: true")
		o.unusable = "the first request failed (first-request)"
		return
	case e.Status >= 500:
		c.fail([]*Exchange{e}, "a valid request with a fresh key got %d", e.Status)
		o.unusable = "the first request failed (first-request)"
		return
	case e.Status >= 300:
		again := c.send(ctx, "the same request again", c.wire(req, spellCanonical))
		if again.ok() && again.replayed() {
			c.note("the service answers the generated request %d and stores it: the checks run on that answer (give --param or --body %s=… for a request that succeeds)", e.Status, o.op.ID)
			break
		}
		o.unusable = fmt.Sprintf("the service refused the generated request with %d and did not store it (refused before its key was read?): %s; give a request it accepts with --body %s=… or --param NAME=VALUE", e.Status, oneLine(e.RespBody), o.op.ID)
		c.skip("%s", o.unusable)
		c.res.Exchanges = []*Exchange{e}
		return
	}
	if p := o.exp.keyExpiresProblem(e, nil); p != "" && o.exp.final(e.Status) {
		c.fail([]*Exchange{e}, "the first answer, which is stored: %s", p)
	}
	o.first, o.firstReq = e, req
	if !hasBefore {
		return
	}
	if after, ok := c.effects(ctx); ok {
		o.perExec = after - before
		if o.perExec <= 0 {
			c.note("the effects oracle saw no effect of %s (%d): the effect checks of this operation are left out", o.op.ID, o.perExec)
			o.perExec = 0
		} else {
			c.note("one execution makes %d effect(s)", o.perExec)
		}
	}
}

// checkReplay: the same request again is the stored answer, marked, and runs nothing.
func checkReplay(ctx context.Context, c *checkRun) {
	key, ok := c.key()
	if !ok {
		return
	}
	req := c.o.req.keyed(key)
	first := c.execute(ctx, "first request", req)
	if first == nil {
		return
	}
	before, has := c.effects(ctx)
	again := c.send(ctx, "retry", c.wire(req, spellCanonical))
	if why := c.o.sameAnswer(first, again); why != "" {
		c.fail([]*Exchange{first, again}, "the retry is no replay of the first answer: %s", why)
		return
	}
	c.expectEffects(ctx, before, has, 0, "the replay ran the operation again", []*Exchange{first, again})
}

// variant is one other spelling of a request's body.
type variant struct {
	label string
	body  []byte
}

// variants are the other spellings of req's body that must replay it.
func variants(req *request) []variant {
	switch {
	case req.content == nil:
		return nil
	case req.content.Kind == model.ContentJSON:
		out := []variant{
			{"members in reverse order", req.encodeBody(spellReversed)},
			{"indented with newlines", req.encodeBody(spellIndented)},
		}
		base := req.encodeBody(spellCanonical)
		for seed := uint64(1); seed <= 3; seed++ {
			if v, ok := jsonvariant.Of(base, seed); ok && string(v) != string(base) {
				out = append(out, variant{fmt.Sprintf("members, whitespace, escapes and number spellings shuffled (seed %d)", seed), v})
			}
		}
		return out
	case req.content.Kind == model.ContentForm:
		if len(req.form) == 0 {
			return nil
		}
		out := []variant{{"every value percent-encoded", encodeForm(req.form, true)}}
		if len(req.form) > 1 {
			out = append([]variant{{"fields in reverse order", req.encodeBody(spellReversed)}}, out...)
		}
		return out
	}
	return nil
}

// checkEquivalent: the same request spelt otherwise replays.
func checkEquivalent(ctx context.Context, c *checkRun) {
	o := c.o
	if o.op.Settings.Fingerprint.Body == model.BodyRaw {
		c.skip("fingerprint.body: raw: only the same bytes are the same request")
		return
	}
	key, ok := c.key()
	if !ok {
		return
	}
	req := o.req.keyed(key)
	vs := variants(req)
	if len(vs) == 0 {
		c.skip("the request has no body that can be spelt otherwise (%s)", bodyKind(req))
		return
	}
	first := c.execute(ctx, "first request", req)
	if first == nil {
		return
	}
	before, has := c.effects(ctx)
	for _, v := range vs {
		w := c.wire(req, spellCanonical)
		w.body = v.body
		e := c.send(ctx, "the same request, "+v.label, w)
		if why := o.sameAnswer(first, e); why != "" {
			c.fail([]*Exchange{first, e}, "the same request with %s is no replay: %s", v.label, why)
			return
		}
	}
	c.expectEffects(ctx, before, has, 0, "an equivalent spelling ran the operation again", nil)
}

func bodyKind(req *request) string {
	if req.content == nil {
		return "no body"
	}
	return req.content.MediaType
}

// excludedTarget is a change of a field the fingerprint leaves out.
type excludedTarget struct {
	tokens []string
	schema *model.Schema
	raw    string
}

// excludedTargets are the exclusions of the operation the request can carry: each exclude
// pointer whose wildcards the request's value resolves, and each property marked
// x-idempotency-ignore at the top level or in a required object.
func excludedTargets(req *request) []excludedTarget {
	if req.content == nil || req.content.Kind != model.ContentJSON {
		return nil
	}
	var out []excludedTarget
	for _, p := range req.op.Settings.Fingerprint.Exclude {
		if strings.Contains(p.Raw, "*") {
			continue // needs an element to change; the plain pointers cover the rule
		}
		out = append(out, excludedTarget{tokens: p.Tokens, schema: schemaAt(req.content.Schema, p.Tokens), raw: p.Raw})
	}
	var walk func(s *model.Schema, at []string, depth int)
	walk = func(s *model.Schema, at []string, depth int) {
		if s == nil || depth > 4 || s.Type != model.TypeObject {
			return
		}
		for _, p := range s.Properties {
			toks := append(append([]string{}, at...), p.Name)
			if p.Ignore {
				out = append(out, excludedTarget{tokens: toks, schema: p.Schema, raw: "/" + strings.Join(toks, "/")})
				continue
			}
			if _, present := getPointer(req.json, toks); present {
				walk(p.Schema, toks, depth+1)
			}
		}
	}
	walk(req.content.Schema, nil, 0)
	return out
}

// schemaAt is the schema at tokens under s (nil when unknown).
func schemaAt(s *model.Schema, tokens []string) *model.Schema {
	for _, t := range tokens {
		if s == nil {
			return nil
		}
		switch s.Type {
		case model.TypeArray:
			s = s.Items
		default:
			s = propSchema(s, t)
		}
	}
	return s
}

// checkExcluded: a change confined to excluded fields replays.
func checkExcluded(ctx context.Context, c *checkRun) {
	o := c.o
	targets := excludedTargets(o.req)
	if len(targets) == 0 {
		c.skip("the operation's fingerprint excludes no field of a JSON body (fingerprint.exclude, x-idempotency-ignore)")
		return
	}
	key, ok := c.key()
	if !ok {
		return
	}
	first := o.req.keyed(key)
	second := first.clone()
	var changed []string
	for _, t := range targets {
		a, err := o.g.value(t.schema, t.raw)
		if err != nil {
			continue
		}
		b, ok := o.g.other(t.schema, a)
		if !ok {
			continue
		}
		first.json = setPointer(first.json, t.tokens, a)
		second.json = setPointer(second.json, t.tokens, b)
		changed = append(changed, t.raw)
	}
	if len(changed) == 0 {
		c.skip("no other value of the excluded fields could be made")
		return
	}
	e1 := c.execute(ctx, "first request", first)
	if e1 == nil {
		return
	}
	before, has := c.effects(ctx)
	e2 := c.send(ctx, "the same request with "+strings.Join(changed, ", ")+" changed", c.wire(second, spellCanonical))
	if why := o.sameAnswer(e1, e2); why != "" {
		c.fail([]*Exchange{e1, e2}, "a change of %s, which the fingerprint excludes, is no replay: %s", strings.Join(changed, ", "), why)
		return
	}
	c.expectEffects(ctx, before, has, 0, "a change of an excluded field ran the operation again", []*Exchange{e1, e2})
}

var _ = http.StatusOK
