package spec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"
)

// ValidateJSON checks the JSON document doc against the schema that ref names
// ("#/components/schemas/HttpErrorOut") in the spec at path, with kin-openapi's validator. With
// strict, an object member its schema does not declare is an error too, as for the SDKs that
// decode strictly (Svix's). Tests use it to hold generated error documents to the spec.
func ValidateJSON(path, ref string, doc []byte, strict bool) error {
	l := openapi3.NewLoader()
	l.IsExternalRefsAllowed = true
	t, err := l.LoadFromFile(path)
	if err != nil {
		return fmt.Errorf("load %s: %w", path, err)
	}
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	if !ok || t.Components == nil || t.Components.Schemas[name] == nil {
		return fmt.Errorf("%s names no schema of %s", ref, path)
	}
	return validate(t.Components.Schemas[name].Value, doc, strict)
}

// ValidateJSONSchema is ValidateJSON for a schema written out (YAML or JSON), such as one an
// errors mapping writes for a spec that declares none.
func ValidateJSONSchema(schema []byte, doc []byte, strict bool) error {
	var v any
	if err := yaml.Unmarshal(schema, &v); err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s := &openapi3.Schema{}
	if err := s.UnmarshalJSON(raw); err != nil {
		return err
	}
	if err := s.Validate(context.Background()); err != nil {
		return fmt.Errorf("the schema: %w", err)
	}
	return validate(s, doc, strict)
}

func validate(s *openapi3.Schema, doc []byte, strict bool) error {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.VisitJSON(v); err != nil {
		return err
	}
	if strict {
		return undeclared(s, v, "")
	}
	return nil
}

// undeclared reports the first object member, at any depth, that its schema does not declare.
func undeclared(s *openapi3.Schema, v any, at string) error {
	if s == nil {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		if len(s.Properties) == 0 {
			return nil
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			p := s.Properties[k]
			if p == nil {
				return errors.New("member " + at + "/" + k + " is not in the schema")
			}
			if err := undeclared(p.Value, x[k], at+"/"+k); err != nil {
				return err
			}
		}
	case []any:
		if s.Items == nil {
			return nil
		}
		for i, it := range x {
			if err := undeclared(s.Items.Value, it, fmt.Sprintf("%s/%d", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}
