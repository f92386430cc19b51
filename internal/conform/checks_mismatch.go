package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idemgen/idemgen/internal/model"
)

// change is one field of the request changed to another valid value.
type change struct {
	what string // "/amount", "path parameter petId"
	// apply changes a copy of the request.
	apply func(r *request)
	// tokens, old and new are set for a JSON body member (duplicate-members needs them).
	tokens   []string
	old, new any
}

// pickChange finds a field the fingerprint covers and that can take another valid value:
// a body member (required ones first, shallow before deep), else a form field, a query or
// path parameter.
func pickChange(o *opRun, req *request) (change, bool) {
	s := o.op.Settings
	keyTokens := s.Key.PointerTokens
	if req.content != nil && req.content.Kind == model.ContentJSON {
		var found *change
		var walk func(v any, sch *model.Schema, at []string, depth int)
		walk = func(v any, sch *model.Schema, at []string, depth int) {
			if found != nil || depth > 6 {
				return
			}
			obj, ok := v.(map[string]any)
			if !ok {
				return
			}
			// Scalars of this object first, then nested objects.
			for _, k := range orderedMembers(obj, sch) {
				toks := append(append([]string{}, at...), k)
				ps := propSchema(sch, k)
				if excludedPointer(s, toks) || equalTokens(toks, keyTokens) || (ps != nil && ps.Ignore) {
					continue
				}
				switch obj[k].(type) {
				case map[string]any, []any:
					continue
				}
				if nv, ok := o.g.other(ps, obj[k]); ok {
					old := obj[k]
					found = &change{what: "/" + strings.Join(toks, "/"), tokens: toks, old: old, new: nv,
						apply: func(r *request) { r.json = setPointer(r.json, toks, nv) }}
					return
				}
			}
			for _, k := range orderedMembers(obj, sch) {
				toks := append(append([]string{}, at...), k)
				if excludedPointer(s, toks) {
					continue
				}
				walk(obj[k], propSchema(sch, k), toks, depth+1)
			}
		}
		walk(req.json, req.content.Schema, nil, 0)
		if found != nil {
			return *found, true
		}
	}
	if req.content != nil && req.content.Kind == model.ContentForm {
		for i, f := range req.form {
			if f.name == s.Key.Field || excludedField(s, f.name) {
				continue
			}
			var nv any
			var ok bool
			if f.schema != nil {
				cur, _ := decodeValue(f.value)
				if f.schema.Type == model.TypeString || cur == nil {
					cur = f.value
				}
				nv, ok = o.g.other(f.schema, cur)
			} else {
				nv, ok = f.value+"x", true
			}
			if ok {
				name, nth, text := f.name, occurrence(req.form, i), scalarText(nv)
				return change{what: "form field " + f.name, apply: func(r *request) { setNth(r.form, name, nth, text) }}, true
			}
		}
	}
	for i, f := range req.query {
		if nv, ok := o.g.other(f.schema, paramCurrent(f)); ok {
			name, nth, text := f.name, occurrence(req.query, i), scalarText(nv)
			return change{what: "query parameter " + f.name, apply: func(r *request) { setNth(r.query, name, nth, text) }}, true
		}
	}
	for _, p := range o.op.Params {
		// Under scope: path the path's values are part of the key's scope (another path is
		// another request, not the same key's other request), and a fresh parameter names a
		// resource made for the key.
		if p.In != model.InPath || s.Scope == model.ScopePath || req.fresh.serves(p.Name) {
			continue
		}
		cur := req.path[p.Name]
		f := field{name: p.Name, value: cur, schema: p.Schema}
		if nv, ok := o.g.other(p.Schema, paramCurrent(f)); ok {
			name, text := p.Name, scalarText(nv)
			return change{what: "path parameter " + p.Name, apply: func(r *request) { r.path[name] = text }}, true
		}
	}
	return change{}, false
}

// occurrence is which of the fields named like fields[i] it is (0 for the first). A change
// names its field by name and occurrence, not by index: placing the key (request.keyed) moves
// a form's key field to the end, so an index picked before would point at another field.
func occurrence(fields []field, i int) int {
	n := 0
	for _, f := range fields[:i] {
		if f.name == fields[i].name {
			n++
		}
	}
	return n
}

// setNth sets the value of the nth field named name (see occurrence).
func setNth(fields []field, name string, nth int, value string) {
	for i := range fields {
		if fields[i].name != name {
			continue
		}
		if nth == 0 {
			fields[i].value = value
			return
		}
		nth--
	}
}

// paramCurrent is a parameter's value as its schema reads it.
func paramCurrent(f field) any {
	if f.schema != nil && f.schema.Type != model.TypeString {
		if v, ok := decodeValue(f.value); ok {
			return v
		}
	}
	return f.value
}

// orderedMembers lists obj's members, required ones first, each group sorted.
func orderedMembers(obj map[string]any, s *model.Schema) []string {
	var req, rest []string
	for _, k := range sortedKeys(obj) {
		isReq := false
		if s != nil {
			for _, p := range s.Properties {
				isReq = isReq || (p.Name == k && p.Required)
			}
		}
		if isReq {
			req = append(req, k)
		} else {
			rest = append(rest, k)
		}
	}
	return append(req, rest...)
}

func equalTokens(a, b []string) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// excludedPointer reports whether tokens fall under a fingerprint exclusion.
func excludedPointer(s model.Settings, tokens []string) bool {
	for _, p := range s.Fingerprint.Exclude {
		if len(p.Tokens) > len(tokens) {
			continue
		}
		match := true
		for i, t := range p.Tokens {
			if t != "*" && t != tokens[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func excludedField(s model.Settings, name string) bool {
	for _, p := range s.Fingerprint.Exclude {
		if p.Raw == name {
			return true
		}
	}
	return false
}

// checkMismatch: a changed field under the same key is refused, runs nothing, and leaves the
// first answer in place.
func checkMismatch(ctx context.Context, c *checkRun) {
	o := c.o
	ch, ok := pickChange(o, o.req)
	if !ok {
		c.skip("no field of the request can take another valid value (nothing to change)")
		return
	}
	key, ok := c.key()
	if !ok {
		return
	}
	req := o.req.keyed(key)
	first := c.execute(ctx, "first request", req)
	if first == nil {
		return
	}
	changed := req.clone()
	ch.apply(changed)
	before, has := c.effects(ctx)
	e := c.send(ctx, "the same key, "+ch.what+" changed", c.wire(changed, spellCanonical))
	if why := o.exp.mismatch.judge(e); why != "" {
		if e.ok() && e.replayed() {
			why = "it replayed the first answer: the fingerprint does not cover " + ch.what
		}
		c.fail([]*Exchange{first, e}, "a changed %s under the same key is no mismatch: %s", ch.what, why)
		return
	}
	c.expectEffects(ctx, before, has, 0, "the mismatch ran the operation", []*Exchange{first, e})
	again := c.send(ctx, "the first request again", c.wire(req, spellCanonical))
	if why := o.sameAnswer(first, again); why != "" {
		c.fail([]*Exchange{first, e, again}, "after the mismatch, the first request no longer replays: %s", why)
	}
}

// checkDuplicateMembers: a JSON body naming a member twice is refused, or the value the
// handler used (as its answer shows it) is the value under which a retry replays. A decoder
// that keeps the last value behind a fingerprint that kept the first charges one amount and
// replays it to a request for another.
func checkDuplicateMembers(ctx context.Context, c *checkRun) {
	o := c.o
	if o.req.content == nil || o.req.content.Kind != model.ContentJSON {
		c.skip("the request has no JSON body (%s)", bodyKind(o.req))
		return
	}
	ch, ok := pickChange(o, o.req)
	if !ok || ch.tokens == nil {
		c.skip("no body member can take another valid value")
		return
	}
	key, ok := c.key()
	if !ok {
		return
	}
	req := o.req.keyed(key)
	firstWins, lastWins := req.clone(), req.clone()
	lastWins.json = setPointer(lastWins.json, ch.tokens, ch.new)
	dup := duplicateMember(req.json, ch.tokens, ch.old, ch.new)
	w := c.wire(req, spellCanonical)
	w.body = dup
	e := c.send(ctx, fmt.Sprintf("%s written twice (%s, then %s)", ch.what, jsonText(ch.old), jsonText(ch.new)), w)
	if c.noAnswer(e) {
		return
	}
	if e.Status >= 400 && e.Status < 500 && !e.replayed() {
		c.note("the body with %s twice is refused (%d)", ch.what, e.Status)
		return
	}
	if e.Status >= 500 {
		c.fail([]*Exchange{e}, "a body with %s twice got %d", ch.what, e.Status)
		return
	}
	// The service took it: which value did the handler use, and which does the key remember?
	used, shown := answerValue(e.respBodyRaw, ch.tokens)
	eFirst := c.send(ctx, fmt.Sprintf("the same key, %s once: %s", ch.what, jsonText(ch.old)), c.wire(firstWins, spellCanonical))
	eLast := c.send(ctx, fmt.Sprintf("the same key, %s once: %s", ch.what, jsonText(ch.new)), c.wire(lastWins, spellCanonical))
	firstReplays := eFirst.ok() && eFirst.replayed()
	lastReplays := eLast.ok() && eLast.replayed()
	switch {
	case firstReplays && lastReplays:
		c.fail([]*Exchange{e, eFirst, eLast}, "both %s values replay the answer to the body that named it twice: the fingerprint does not cover it", ch.what)
	case !shown:
		c.note("the answer does not show %s, so which value the handler used is not known", ch.what)
	case firstReplays && jsonText(used) != jsonText(ch.old):
		c.fail([]*Exchange{e, eFirst}, "decoder differential: the handler used %s = %s (its answer shows it) but the key remembers %s = %s: a retry asking for %s replays an answer for %s",
			ch.what, jsonText(used), ch.what, jsonText(ch.old), jsonText(ch.old), jsonText(used))
	case lastReplays && jsonText(used) != jsonText(ch.new):
		c.fail([]*Exchange{e, eLast}, "decoder differential: the handler used %s = %s (its answer shows it) but the key remembers %s = %s: a retry asking for %s replays an answer for %s",
			ch.what, jsonText(used), ch.what, jsonText(ch.new), jsonText(ch.new), jsonText(used))
	}
}

// duplicateMember writes v with the member at tokens written twice: first a, then b.
func duplicateMember(v any, tokens []string, a, b any) []byte {
	parent, _ := getPointer(v, tokens[:len(tokens)-1])
	obj, _ := parent.(map[string]any)
	name := tokens[len(tokens)-1]
	const mark = "\x00conform-dup\x00"
	saved := obj[name]
	obj[name] = mark
	text := writeJSON(nil, v, spellCanonical, "")
	obj[name] = saved
	pair := fmt.Sprintf("%s,%s:%s", jsonText(a), appendJSONString(nil, name), jsonText(b))
	return bytes.Replace(text, appendJSONString(nil, mark), []byte(pair), 1)
}

// answerValue is the value at tokens in a JSON answer (the last token alone at the top level,
// when the answer is not shaped like the request).
func answerValue(body []byte, tokens []string) (any, bool) {
	v, ok := decodeValue(string(body))
	if !ok {
		return nil, false
	}
	if got, ok := getPointer(v, tokens); ok {
		return got, true
	}
	if got, ok := getPointer(v, tokens[len(tokens)-1:]); ok {
		return got, true
	}
	return nil, false
}

func jsonText(v any) string {
	return string(writeJSON(nil, v, spellCanonical, ""))
}

var _ = json.Number("")
