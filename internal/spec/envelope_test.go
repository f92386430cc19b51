package spec

import (
	"context"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/runtime/defaults"
)

// TestEnvelopeSchemas: every row of the contract table declares its error envelope as a valid
// schema with its type member where the row says, so `idemgen spec` can declare it.
func TestEnvelopeSchemas(t *testing.T) {
	for _, row := range defaults.Profiles() {
		env := row.Envelope
		s := &openapi3.Schema{}
		if err := s.UnmarshalJSON([]byte(env.Schema)); err != nil {
			t.Errorf("%s: %v", row.Name, err)
			continue
		}
		if err := s.Validate(context.Background()); err != nil {
			t.Errorf("%s: %v", row.Name, err)
		}
		if env.ContentType == "" || env.SchemaName == "" || env.Writer == "" {
			t.Errorf("%s: an envelope without content type, schema name or writer: %+v", row.Name, env)
		}
		for _, at := range []string{env.TypeAt, env.CodeAt} {
			if at == "" {
				continue
			}
			toks, err := splitPointer(at)
			if err != nil || !matchPointer(&openapi3.SchemaRef{Value: s}, toks) {
				t.Errorf("%s: the envelope schema has no member at %s", row.Name, at)
			}
		}
	}
}
