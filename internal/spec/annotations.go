package spec

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/idemgen/idemgen/internal/diag"
	"github.com/idemgen/idemgen/internal/model"
)

// Other tools' idempotency and retry extensions (docs/cli.md, "Other tools' annotations").
const (
	extFernIdempotent = "x-fern-idempotent"          // Fern: on an operation, true marks it
	extFernHeaders    = "x-fern-idempotency-headers" // Fern: at the root, the headers its SDKs send on marked operations
	extXIdempotency   = "x-idempotency"              // on an operation: x-idempotent's fields, in that spelling
	extSpeakeasyRetry = "x-speakeasy-retries"        // Speakeasy: a client retry policy (root or operation)
)

// specMark names the extension that marks an operation in the spec itself: x-idempotent, else
// x-idempotency written on the operation. An operation with both gets an error at the second
// (x-idempotent is read).
func (b *builder) specMark(o *opSource) (name string, src model.MarkSource, ok bool) {
	_, own := o.op.Extensions["x-idempotent"]
	_, alt := o.op.Extensions[extXIdempotency]
	switch {
	case own && alt:
		b.d.Errorf(o.at.at(extXIdempotency).loc(), "duplicate-mark", "%s %s is marked by both x-idempotent and x-idempotency; keep one (x-idempotent is read)", o.m.Method, o.m.Path)
		return "x-idempotent", model.MarkSpec, true
	case own:
		return "x-idempotent", model.MarkSpec, true
	case alt:
		b.note(o, extXIdempotency, "openapi-proposal", "mark", o.at.at(extXIdempotency).loc())
		return extXIdempotency, model.MarkXIdempotency, true
	}
	return "", "", false
}

// fernMark reads Fern's x-fern-idempotent on an operation: true marks it, with the key header
// the document's x-fern-idempotency-headers declares (the first whose name is a recognised
// idempotency key header, else the first), required unless Fern's entry says optional: true.
// ok is false when the operation has no such extension.
func (b *builder) fernMark(o *opSource) (marked bool, lay *layer, loc diag.Loc, ok bool) {
	v, has := o.op.Extensions[extFernIdempotent]
	if !has {
		return false, nil, diag.Loc{}, false
	}
	at := o.at.at(extFernIdempotent)
	loc = at.loc()
	on, isBool := v.(bool)
	if !isBool {
		b.d.Errorf(loc, "wrong-type", "%s must be true or false, not %v", extFernIdempotent, v)
		return false, nil, loc, true
	}
	b.note(o, extFernIdempotent, "fern", "mark", loc)
	if !on {
		return false, nil, loc, true
	}
	lay = &layer{locs: map[string]diag.Loc{}}
	header, optional, hloc, found := b.fernHeader()
	if !found {
		b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "fern-no-idempotency-headers", Loc: loc,
			Message: fmt.Sprintf("%s %s is x-fern-idempotent, but the document declares no x-fern-idempotency-headers, so Fern's SDKs send no key; idemgen expects it in %s", o.m.Method, o.m.Path, defaultHeader),
			Hint:    "declare the header at the document's root: x-fern-idempotency-headers: [{header: Idempotency-Key, name: idempotency_key}]"})
		return true, lay, loc, true
	}
	b.note(o, extFernHeaders, "fern", "key", hloc)
	lay.keyHeader = &header
	lay.locs["key/header"] = hloc
	if optional {
		no := false
		lay.keyRequired = &no
	}
	return true, lay, loc, true
}

// fernHeader reads the document's x-fern-idempotency-headers (reported once when malformed).
func (b *builder) fernHeader() (header string, optional bool, loc diag.Loc, ok bool) {
	v, has := b.doc.Extensions[extFernHeaders]
	if !has {
		return "", false, diag.Loc{}, false
	}
	at := b.l.lc.rootOf(b.l.root).at(extFernHeaders)
	n, base := b.extension(v, at)
	if n.Kind != yaml.SequenceNode {
		b.fernOnce(base, "%s must be a list of {header, name} entries, not %s", extFernHeaders, describe(n))
		return "", false, base, false
	}
	type entry struct {
		header   string
		optional bool
		loc      diag.Loc
	}
	var entries []entry
	for _, item := range n.Content {
		if item.Kind != yaml.MappingNode {
			continue
		}
		e := entry{loc: base}
		if item.Line > 0 {
			e.loc.Line, e.loc.Column = item.Line, item.Column
		}
		for i := 0; i+1 < len(item.Content); i += 2 {
			switch k, val := item.Content[i].Value, item.Content[i+1]; k {
			case "header":
				e.header = val.Value
			case "optional":
				e.optional = val.Value == "true"
			}
		}
		if validToken(e.header) {
			entries = append(entries, e)
		}
	}
	if len(entries) == 0 {
		b.fernOnce(base, "%s names no header (each entry needs header: NAME)", extFernHeaders)
		return "", false, base, false
	}
	pick := entries[0]
	for _, e := range entries {
		if isKeyHeader(e.header) {
			pick = e
			break
		}
	}
	return pick.header, pick.optional, pick.loc, true
}

// fernOnce reports a malformed x-fern-idempotency-headers once per run.
func (b *builder) fernOnce(loc diag.Loc, format string, args ...any) {
	if b.fernReported {
		return
	}
	b.fernReported = true
	b.d.Errorf(loc, "wrong-type", format, args...)
}

// annotations records the retry policies of other tools that apply to an operation: Speakeasy's
// x-speakeasy-retries on the operation or at the document's root. They mark nothing: a client
// that retries without an idempotency key can run an operation twice, which check says for an
// unmarked unsafe operation with its own policy (retriesWithoutKey).
func (b *builder) annotations(o *opSource) {
	if _, ok := o.op.Extensions[extSpeakeasyRetry]; ok {
		b.note(o, extSpeakeasyRetry, "speakeasy", "retries", o.at.at(extSpeakeasyRetry).loc())
	} else if _, ok := b.doc.Extensions[extSpeakeasyRetry]; ok {
		b.note(o, extSpeakeasyRetry, "speakeasy", "retries", b.l.lc.rootOf(b.l.root).at(extSpeakeasyRetry).loc())
	}
}

// note adds an annotation to the operation.
func (b *builder) note(o *opSource, ext, tool, read string, loc diag.Loc) {
	o.m.Annotations = append(o.m.Annotations, model.Annotation{Extension: ext, Tool: tool, Read: read, Loc: loc})
}

// retriesWithoutKey warns about an unmarked POST, PUT, PATCH or DELETE operation whose own
// x-speakeasy-retries makes Speakeasy's SDKs retry it: without an idempotency key a retry after
// a lost response runs it again.
func (b *builder) retriesWithoutKey(o *opSource) {
	if _, ok := o.op.Extensions[extSpeakeasyRetry]; !ok || !unsafeMethod(o.m.Method) {
		return
	}
	selector := o.m.ID
	if o.m.IDDerived {
		selector = o.m.Method + " " + o.m.Path
	}
	b.d.Add(diag.Diagnostic{Severity: diag.Warning, Code: "retries-without-key", Loc: o.at.at(extSpeakeasyRetry).loc(),
		Message: fmt.Sprintf("%s %s has x-speakeasy-retries, so Speakeasy's SDKs retry it, but it is not marked idempotent: a retry after a lost response runs it again", o.m.Method, o.m.Path),
		Hint:    "mark it (x-idempotent, or in idemgen.yaml):\n" + strings.TrimSuffix(fmt.Sprintf("operations:\n  %q: true\n", selector), "\n")})
}
