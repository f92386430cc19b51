package conform

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idemgen/idemgen/internal/model"
	"github.com/idemgen/idemgen/runtime/defaults"
)

// checkKeyMissing: without its required key the request is 400 and runs nothing.
func checkKeyMissing(ctx context.Context, c *checkRun) {
	o := c.o
	if !o.op.Settings.Key.Required {
		c.skip("the key is optional (key.required: false): a request without one runs unguarded")
		return
	}
	before, has := c.effects(ctx)
	e := c.send(ctx, "the request without a key", c.wire(o.req.keyed(""), spellCanonical))
	if why := o.exp.keyMissing.judge(e); why != "" {
		c.fail([]*Exchange{e}, "a request without its required key (%s) is not refused: %s", keyWhere(o.op.Settings.Key), why)
		return
	}
	c.expectEffects(ctx, before, has, 0, "the request without a key ran the operation", []*Exchange{e})
}

func keyWhere(k model.KeySettings) string {
	switch k.Carrier {
	case model.CarrierBody:
		return "body member " + k.Pointer
	case model.CarrierForm:
		return "form field " + k.Field
	case model.CarrierQuery:
		return "query parameter " + k.Query
	}
	return "header " + k.Header
}

// badKey is a key the rules refuse, and why.
type badKey struct {
	why string
	// value is the key; twice sends two header lines or query values (value and another
	// valid key); number sends a body key as a JSON number; bare sends value as is where the
	// rules want an sf-string (key.quoted: require).
	value  string
	twice  bool
	number bool
	bare   bool
}

// badKeys are the malformed keys for the operation's key rules: the spec's rule, never
// idemgen's own. A key with a character the key's character set refuses is sent only when the
// declared pattern (if any) refuses it too: under `pattern: ^[!-~]+$` a comma is a valid key
// character by the spec, whatever idemgen's default set says.
func badKeys(o *opRun) ([]badKey, error) {
	k := o.op.Settings.Key
	good, err := o.newKey()
	if err != nil {
		return nil, err
	}
	var out []badKey
	if k.MinLength > 1 {
		out = append(out, badKey{why: fmt.Sprintf("%d characters, under minLength %d", k.MinLength-1, k.MinLength), value: good[:k.MinLength-1]})
	}
	if k.MaxLength > 0 && k.MaxLength < 4096 {
		if long, ok := o.keys.build(patternOr(k.Pattern), k.MaxLength+1); ok {
			out = append(out, badKey{why: fmt.Sprintf("%d characters, over maxLength %d", k.MaxLength+1, k.MaxLength), value: long})
		} else {
			long := fitLength(good, k.MaxLength+1, k.MaxLength+1, o.g)
			out = append(out, badKey{why: fmt.Sprintf("%d characters, over maxLength %d", k.MaxLength+1, k.MaxLength), value: long})
		}
	}
	mid := len(good) / 2
	chars := o.keyChars()
	for _, c := range []struct {
		why string
		s   string
	}{
		{"a space inside (keys are visible ASCII)", " "},
		{"a comma inside (a list separator in a header)", ","},
		{"a non-ASCII character", "é"},
	} {
		v := good[:mid] + c.s + good[min(mid+len(c.s), len(good)):]
		if len(v) > len(good) {
			v = v[:len(good)]
		}
		if chars.allowsText(c.s) || (k.Pattern != "" && o.g.matcher.Match(k.Pattern, v)) {
			continue // a valid key character by the declared rule
		}
		out = append(out, badKey{why: c.why, value: v})
	}
	if k.Pattern != "" {
		for try := 0; try < 50; try++ {
			cand := fitLength(o.g.word(len(good)), len(good), len(good), o.g)
			if try%2 == 1 {
				cand = strings.ToUpper(cand)
			}
			if !o.g.matcher.Match(k.Pattern, cand) {
				out = append(out, badKey{why: fmt.Sprintf("not matching key.pattern %q", k.Pattern), value: cand})
				break
			}
		}
	}
	if k.Quoted == defaults.KeyQuotedRequired.String() {
		out = append(out, badKey{why: "the key sent bare (key.quoted: require: an RFC 8941 quoted string, the IETF draft's syntax)", value: good, bare: true})
	}
	switch k.Carrier {
	case model.CarrierHeader:
		out = append(out, badKey{why: "two " + k.Header + " header lines", value: good, twice: true})
	case model.CarrierQuery:
		out = append(out, badKey{why: "two " + k.Query + " query values", value: good, twice: true})
	case model.CarrierBody:
		out = append(out, badKey{why: "a number, not a string", number: true})
	}
	return out, nil
}

// patternOr is pattern, or any visible characters when there is none.
func patternOr(pattern string) string {
	if pattern == "" {
		return `^[!-~]+$`
	}
	return pattern
}

// checkKeyMalformed: every malformed key is 400 and runs nothing.
func checkKeyMalformed(ctx context.Context, c *checkRun) {
	o := c.o
	bad, err := badKeys(o)
	if err != nil {
		c.skip("%v", err)
		return
	}
	before, has := c.effects(ctx)
	var sent []*Exchange
	for _, b := range bad {
		req := o.req.keyed(b.value)
		switch {
		case b.bare:
			req = o.req.keyedAsSent(b.value)
		case b.twice:
			other, err := o.newKey()
			if err != nil {
				c.skip("%v", err)
				return
			}
			// The second key as the rules want it sent (quoted under key.quoted: require).
			second := o.req.keyed(other)
			if k := o.op.Settings.Key; k.Carrier == model.CarrierQuery {
				req.query = append(req.query, second.query[len(second.query)-1])
			} else {
				req.header = append(req.header, second.header[len(second.header)-1])
			}
		case b.number:
			req.json = setPointer(req.json, o.op.Settings.Key.PointerTokens, json.Number("12345678901234567890"))
		}
		e := c.send(ctx, "a key with "+b.why, c.wire(req, spellCanonical))
		sent = append(sent, e)
		if why := o.exp.keyInvalid.judge(e); why != "" {
			c.fail([]*Exchange{e}, "a key with %s is not refused: %s", b.why, why)
			return
		}
	}
	c.expectEffects(ctx, before, has, 0, "a request with a malformed key ran the operation", sent)
}

// checkKeyReuse: the key of one operation sent to another is a mismatch when both name keys
// per tenant; scope: operation keeps them apart, so the second executes.
func checkKeyReuse(ctx context.Context, c *checkRun) {
	o := c.o
	var other *opRun
	for _, p := range o.r.ops {
		if p != o && p.req != nil && p.op.Settings.Key.Required {
			other = p
			break
		}
	}
	if other == nil {
		c.skip("the spec has no second idempotent operation with a required key to reuse the key on")
		return
	}
	key, ok := c.key()
	if !ok {
		return
	}
	if !validKeyFor(other.op.Settings.Key, key, other) {
		c.skip("a key of %s is not a valid key of %s (their key rules differ)", o.op.ID, other.op.ID)
		return
	}
	first := c.execute(ctx, "first request", o.req.keyed(key))
	if first == nil {
		return
	}
	before, has := c.effects(ctx)
	e := c.send(ctx, "the same key on "+other.op.ID, other.req.keyed(key).wire(spellCanonical, o.r.o.Header))
	// Keys per operation (scope operation) or per endpoint path (scope path) are apart on
	// another operation.
	apart := o.op.Settings.Scope != model.ScopeTenant || other.op.Settings.Scope != model.ScopeTenant
	if apart {
		if c.noAnswer(e, first) {
			return
		}
		if e.replayed() || e.Status >= 500 || o.exp.mismatch.judge(e) == "" {
			c.fail([]*Exchange{first, e}, "with scope: %s the key of %s is another request on %s, got %d", apartScope(o.op, other.op), o.op.ID, other.op.ID, e.Status)
		}
		return
	}
	if why := other.exp.mismatch.judge(e); why != "" {
		if e.ok() && !e.replayed() && e.Status >= 400 && e.Status < 500 {
			// Is it the key, or does the other operation refuse the generated request anyway?
			k2, err := c.o.newKey() // this operation's generator: the other's belongs to its own checks
			if err == nil && validKeyFor(other.op.Settings.Key, k2, other) {
				alone := c.send(ctx, other.op.ID+" with a fresh key", other.req.keyed(k2).wire(spellCanonical, o.r.o.Header))
				if alone.ok() && alone.Status == e.Status {
					c.skip("%s refuses the generated request with a fresh key too (%d): give it one with --body", other.op.ID, e.Status)
					return
				}
			}
		}
		if e.ok() && e.replayed() {
			why = "it replayed the answer of " + o.op.ID
		}
		c.fail([]*Exchange{first, e}, "the key of a %s request reused on %s is no mismatch (a key names one request per tenant): %s", o.op.ID, other.op.ID, why)
		return
	}
	c.expectEffects(ctx, before, has, 0, "the reused key ran "+other.op.ID, []*Exchange{first, e})
}

// apartScope names the scope that keeps a and b's keys apart (a's, unless it is tenant).
func apartScope(a, b *model.Operation) model.Scope {
	if a.Settings.Scope != model.ScopeTenant {
		return a.Settings.Scope
	}
	return b.Settings.Scope
}

// validKeyFor reports whether key is valid by the key rules k of operation o: its length, its
// characters (o's set) and k's pattern.
func validKeyFor(k model.KeySettings, key string, o *opRun) bool {
	if len(key) < k.MinLength || (k.MaxLength > 0 && len(key) > k.MaxLength) {
		return false
	}
	if !o.keyChars().allowsText(key) {
		return false
	}
	return k.Pattern == "" || o.g.matcher.Match(k.Pattern, key)
}

// checkUnrouted: a request to a path no route takes (the router's 404) leaves nothing under
// its key, so the real request with that key executes.
func checkUnrouted(ctx context.Context, c *checkRun) {
	o := c.o
	key, ok := c.key()
	if !ok {
		return
	}
	req := o.req.keyed(key)
	w := c.wire(req, spellCanonical)
	path, query, _ := strings.Cut(w.target, "?")
	w.target = path + "/conform-no-such-route"
	if query != "" {
		w.target += "?" + query
	}
	for _, p := range o.r.doc.Operations {
		if templateMatches(p.Path, path+"/conform-no-such-route") && p.Method == o.op.Method {
			c.skip("%s %s would be routed to %s", o.op.Method, w.target, p.ID)
			return
		}
	}
	stray := c.send(ctx, "the request to a path no route takes", w)
	if c.noAnswer(stray) {
		return
	}
	if stray.Status < 400 {
		c.note("%s answered %d", w.target, stray.Status)
	}
	e := c.send(ctx, "the real request with the same key", c.wire(req, spellCanonical))
	switch {
	case c.noAnswer(e, stray):
	case e.replayed():
		c.fail([]*Exchange{stray, e}, "the real request replays the answer to the unrouted path (%d): the router's answer was stored under the key", e.Status)
	case o.exp.mismatch.judge(e) == "":
		c.fail([]*Exchange{stray, e}, "the real request is a mismatch: the unrouted request left a record under the key")
	case e.Status >= 500:
		c.fail([]*Exchange{stray, e}, "the real request got %d", e.Status)
	}
}

// templateMatches reports whether a path template (/v1/payments/{id}) matches a path.
func templateMatches(tmpl, path string) bool {
	ts, ps := strings.Split(strings.Trim(tmpl, "/"), "/"), strings.Split(strings.Trim(path, "/"), "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if strings.HasPrefix(ts[i], "{") && strings.HasSuffix(ts[i], "}") {
			continue
		}
		if ts[i] != ps[i] {
			return false
		}
	}
	return true
}
