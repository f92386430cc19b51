package spec

import (
	"github.com/idemgen/idemgen/internal/model"
)

// A JSON request body is not always read as its schema says on its own:
//   - a JSON merge patch (RFC 7396; an application/merge-patch+json body, or body.nulls: clear)
//     may send null for every optional member, meaning "remove it" (section 2: a null member
//     removes the target's), and nested objects are merge patches too;
//   - under body.unknown: accept, undeclared members are accepted and fingerprinted even
//     where the schema says additionalProperties: false (the Agentic Commerce Protocol asks
//     implementations to ignore unknown fields, and its extension fields to count in the
//     request's equivalence, agentic-checkout RFC section 6.7).
//
// The loader gives such a body a copy of its schema graph that says so (Schema.MergePatch,
// Property.Nullable, ClosedObject cleared), so that the generator plans it like any schema and
// never looks at media types or settings for it: the copy's optional members have three states
// (absent, null, a value), as the handler and the fingerprint then tell them apart. A schema
// reached both as itself and as a copy becomes two Go types.

// variant is how a body is read beyond its schema.
type variant struct {
	patch bool // JSON merge patch: optional members and map values may be null
	open  bool // undeclared members accepted even in closed objects
}

// variantKey memoizes one copy per schema and variant.
type variantKey struct {
	s *model.Schema
	v variant
}

// bodyVariant is how operation op reads its JSON content c.
func bodyVariant(op *model.Operation, c *model.Content) variant {
	return variant{
		patch: c.MediaType == mediaMergePatch || op.Settings.Body.Nulls == model.NullsClear,
		open:  op.Settings.Body.Unknown == model.UnknownAccept,
	}
}

// mediaMergePatch is the JSON merge patch media type (RFC 7396 section 4).
const mediaMergePatch = "application/merge-patch+json"

// applyBodyVariants replaces the schema of every JSON request body that is read beyond its
// schema with the copy that says how. It runs once every operation is built, before Go names are
// given to schemas.
func (c *schemaConverter) applyBodyVariants(ops []*model.Operation) {
	for _, op := range ops {
		if op.Body == nil {
			continue
		}
		for _, ct := range op.Body.Contents {
			if ct.Kind != model.ContentJSON || ct.Schema == nil {
				continue
			}
			if v := bodyVariant(op, ct); v != (variant{}) {
				ct.Schema = c.variantOf(ct.Schema, v)
			}
		}
	}
}

// variantOf returns s as read under v: s itself where v changes nothing below it (a scalar, a
// schema-less or oneOf/anyOf value, which keeps null as canonical JSON), else a copy.
func (c *schemaConverter) variantOf(s *model.Schema, v variant) *model.Schema {
	if s == nil || !c.variantChanges(s, v, map[*model.Schema]bool{}) {
		return s
	}
	k := variantKey{s, v}
	if m, ok := c.variants[k]; ok {
		return m
	}
	m := new(model.Schema)
	*m = *s
	c.variants[k] = m // before the members, so that a recursive reference finds it
	if ps, ok := c.problems[s]; ok {
		c.problems[m] = ps // reported where written, once (diagnostics are deduplicated)
	}
	if m.Name != "" {
		c.named = append(c.named, m)
		c.variantOrigin[m] = s
		c.variantForm[m] = v
	}
	m.MergePatch = s.MergePatch || v.patch && s.Type == model.TypeObject
	m.Opened = s.Opened || v.open && s.ClosedObject
	if v.open {
		m.ClosedObject = false
	}
	if len(s.Properties) > 0 {
		m.Properties = make([]*model.Property, len(s.Properties))
		for i, p := range s.Properties {
			cp := *p
			cp.Schema = c.variantOf(p.Schema, v)
			if v.patch && !cp.Required && !cp.Schema.Nullable {
				cp.Nullable = true // RFC 7396 section 2: null removes the member
			}
			m.Properties[i] = &cp
		}
	}
	if s.AdditionalProperties != nil {
		// A map's values may be null too (MergePatch says so for the map: null removes the key,
		// RFC 7396 section 2), and an object value is a merge patch of the target's.
		m.AdditionalProperties = c.variantOf(s.AdditionalProperties, v)
	}
	if s.Items != nil {
		// An array replaces the target's whole (RFC 7396 section 2): its elements are values,
		// not merge patches; only undeclared members stay accepted below it.
		m.Items = c.variantOf(s.Items, variant{open: v.open})
	}
	return m
}

// variantChanges reports whether reading s under v changes s or a schema below it.
func (c *schemaConverter) variantChanges(s *model.Schema, v variant, seen map[*model.Schema]bool) bool {
	if s == nil || seen[s] {
		return false
	}
	seen[s] = true
	switch {
	case v.patch && s.Type == model.TypeObject && (len(s.Properties) > 0 || s.AdditionalProperties != nil):
		return true
	case v.open && s.ClosedObject:
		return true
	}
	for _, p := range s.Properties {
		if c.variantChanges(p.Schema, v, seen) {
			return true
		}
	}
	return c.variantChanges(s.AdditionalProperties, v, seen) || c.variantChanges(s.Items, variant{open: v.open}, seen)
}
