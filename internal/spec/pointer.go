package spec

import (
	"strconv"

	"github.com/getkin/kin-openapi/openapi3"
)

// matchPointer reports whether the JSON pointer tokens can match something in a request body of
// schema ref: a declared property, any key of a map (additionalProperties), any element of an
// array ("*" or an index), anything below a free-form value, or any branch of a oneOf/anyOf.
// "*" stands for every array element or map value (docs/design.md section 2).
func matchPointer(ref *openapi3.SchemaRef, tokens []string) bool {
	if ref == nil || ref.Value == nil {
		return false
	}
	if len(tokens) == 0 {
		return true
	}
	s := ref.Value
	for _, b := range append(append([]*openapi3.SchemaRef{}, s.OneOf...), s.AnyOf...) {
		if matchPointer(b, tokens) {
			return true
		}
	}
	tok, rest := tokens[0], tokens[1:]
	props, _ := objectParts(s, src{})
	for _, p := range props {
		if p.name == tok {
			return matchPointer(p.ref, rest)
		}
	}
	if ap := s.AdditionalProperties; ap.Schema != nil {
		return matchPointer(ap.Schema, rest)
	} else if ap.Has != nil && *ap.Has {
		return true
	}
	if s.Items != nil {
		if _, err := strconv.Atoi(tok); err == nil || tok == "*" {
			return matchPointer(s.Items, rest)
		}
	}
	return freeForm(s)
}

// freeForm reports whether a schema says nothing about the value's shape, so any pointer below
// it may match.
func freeForm(s *openapi3.Schema) bool {
	return s.Type.IsEmpty() && len(s.Properties) == 0 && len(s.AllOf) == 0 && len(s.OneOf) == 0 &&
		len(s.AnyOf) == 0 && s.Items == nil && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil
}

// findProperty follows named properties only (a key lives at a fixed place) and returns the
// schema found and whether every step was required.
func findProperty(ref *openapi3.SchemaRef, tokens []string) (*openapi3.SchemaRef, bool) {
	if ref == nil || ref.Value == nil {
		return nil, false
	}
	if len(tokens) == 0 {
		return ref, true
	}
	s := ref.Value
	props, required := objectParts(s, src{})
	for _, p := range props {
		if p.name == tokens[0] {
			got, req := findProperty(p.ref, tokens[1:])
			return got, req && required[p.name]
		}
	}
	// Through a oneOf/anyOf: the first member's declaration, required when every member
	// declares and requires it (a body of any of its shapes then carries it).
	var found *openapi3.SchemaRef
	members := append(append([]*openapi3.SchemaRef{}, s.OneOf...), s.AnyOf...)
	every := len(members) > 0
	for _, b := range members {
		got, req := findProperty(b, tokens)
		if found == nil {
			found = got
		}
		every = every && got != nil && req
	}
	return found, found != nil && every
}

// isStringSchema reports whether a schema's only non-null type is string.
func isStringSchema(ref *openapi3.SchemaRef) bool {
	if ref == nil || ref.Value == nil {
		return false
	}
	if member, _, _, ok := nullUnion(ref.Value); ok {
		return isStringSchema(member) // anyOf: [{type: string}, {type: 'null'}]
	}
	n := 0
	for _, t := range ref.Value.Type.Slice() {
		switch t {
		case "null":
		case "string":
			n++
		default:
			return false
		}
	}
	return n == 1
}
