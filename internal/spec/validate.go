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

// Schema is a JSON schema of a spec, loaded once to hold many JSON documents to it: tests use
// it to check generated error documents against the schema a spec (or an errors mapping)
// declares.
type Schema struct{ s *openapi3.Schema }

// LoadSchema loads the spec at path and returns the schema that ref names
// ("#/components/schemas/HttpErrorOut").
func LoadSchema(path, ref string) (*Schema, error) {
	l := openapi3.NewLoader()
	l.IsExternalRefsAllowed = true
	t, err := l.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	if !ok || t.Components == nil || t.Components.Schemas[name] == nil || t.Components.Schemas[name].Value == nil {
		return nil, fmt.Errorf("%s names no schema of %s", ref, path)
	}
	return &Schema{t.Components.Schemas[name].Value}, nil
}

// ParseSchema reads a schema written out (YAML or JSON), such as one an errors mapping writes
// for a spec that declares none.
func ParseSchema(schema []byte) (*Schema, error) {
	var v any
	if err := yaml.Unmarshal(schema, &v); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s := &openapi3.Schema{}
	if err := s.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	if err := s.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the schema: %w", err)
	}
	return &Schema{s}, nil
}

// Validate checks the JSON document doc against the schema with kin-openapi's validator. With
// strict, an object member its schema does not declare is an error too, as for the SDKs that
// decode strictly (Svix's).
func (s *Schema) Validate(doc []byte, strict bool) error { return validate(s.s, doc, strict) }

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
