package spec

import (
	"maps"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/internal/model"
)

// errorResponses are the error responses op declares (4xx, 5xx, 4XX, 5XX, default), sorted
// by code, each with the shape of its JSON schema, for `idemgen conform` to judge refusals by.
func errorResponses(op *openapi3.Operation, memo map[*openapi3.Schema]*model.Shape) []model.ErrorResponse {
	if op.Responses == nil {
		return nil
	}
	var out []model.ErrorResponse
	for _, code := range slices.Sorted(maps.Keys(op.Responses.Map())) {
		up := strings.ToUpper(code)
		if code != "default" && (len(up) != 3 || (up[0] != '4' && up[0] != '5')) {
			continue
		}
		r := op.Responses.Value(code)
		if r == nil || r.Value == nil {
			continue
		}
		er := model.ErrorResponse{Code: code}
		for _, mt := range slices.Sorted(maps.Keys(r.Value.Content)) {
			lmt := strings.ToLower(strings.TrimSpace(strings.Split(mt, ";")[0]))
			er.MediaTypes = append(er.MediaTypes, lmt)
			if c := r.Value.Content[mt]; er.Shape == nil && isJSONType(lmt) && c != nil && c.Schema != nil {
				er.Shape = shapeOf(c.Schema, memo)
			}
		}
		out = append(out, er)
	}
	return out
}

// shapeOf is the shape of a schema: its type, required members, members, enum and items;
// allOf's members are merged; a oneOf or anyOf is any value (nil). Shapes are shared through
// memo, one per schema, so that a recursive schema is a cycle and a large one (Stripe's error,
// whose members are whole resources) is built once for every operation that declares it.
func shapeOf(ref *openapi3.SchemaRef, memo map[*openapi3.Schema]*model.Shape) *model.Shape {
	if ref == nil || ref.Value == nil {
		return nil
	}
	s := ref.Value
	if len(s.OneOf) > 0 || len(s.AnyOf) > 0 || s.Not != nil {
		return nil
	}
	if sh, ok := memo[s]; ok {
		return sh
	}
	sh := &model.Shape{Nullable: s.Nullable}
	memo[s] = sh
	if s.Type != nil {
		types := s.Type.Slice()
		for _, t := range types {
			if t == openapi3.TypeNull {
				sh.Nullable = true
			} else if sh.Type == "" {
				sh.Type = t
			} else {
				sh.Type = "" // several types: any of them
				break
			}
		}
	}
	for _, v := range s.Enum {
		sh.Enum = append(sh.Enum, valueJSON(v))
	}
	sh.Required = append(sh.Required, s.Required...)
	for name, p := range s.Properties {
		if sh.Properties == nil {
			sh.Properties = map[string]*model.Shape{}
		}
		sh.Properties[name] = shapeOf(p, memo)
	}
	for _, a := range s.AllOf {
		m := shapeOf(a, memo)
		if m == nil {
			continue
		}
		if sh.Type == "" {
			sh.Type = m.Type
		}
		sh.Required = append(sh.Required, m.Required...)
		for name, p := range m.Properties {
			if sh.Properties == nil {
				sh.Properties = map[string]*model.Shape{}
			}
			if _, ok := sh.Properties[name]; !ok {
				sh.Properties[name] = p
			}
		}
	}
	if sh.Type == "" && len(sh.Properties) > 0 {
		sh.Type = openapi3.TypeObject
	}
	if s.Items != nil {
		sh.Items = shapeOf(s.Items, memo)
	}
	return sh
}
