package gen

import (
	"reflect"
	"testing"

	"github.com/idemgen/idemgen/runtime/canonical"
)

// TestReadersOfferTheSameChecks: generated code calls the same schema checks on every reader
// (canonical.Decoder for JSON, Params, Form, FormTree, Multipart), so each reader must offer each
// check with the same signature; a check added to one reader only fails here.
func TestReadersOfferTheSameChecks(t *testing.T) {
	checks := []string{"Min", "Max", "ExclusiveMin", "ExclusiveMax", "MinFloat", "MaxFloat", "ExclusiveMinFloat",
		"ExclusiveMaxFloat", "MultipleOf", "MultipleOfFloat", "Length", "Items", "Pattern", "Invalid", "Enum"}
	dec := reflect.TypeFor[*canonical.Decoder]()
	for _, reader := range []reflect.Type{reflect.TypeFor[*Params](), reflect.TypeFor[*Form](), reflect.TypeFor[*FormTree](), reflect.TypeFor[*Multipart]()} {
		for _, name := range checks {
			want, ok := dec.MethodByName(name)
			if !ok {
				t.Fatalf("canonical.Decoder has no %s", name)
			}
			got, ok := reader.MethodByName(name)
			if !ok {
				t.Errorf("%s has no %s", reader, name)
				continue
			}
			// Compare without the receiver.
			if g, w := got.Type.String()[len("func("+reader.String()):], want.Type.String()[len("func("+dec.String()):]; g != w {
				t.Errorf("%s.%s is func(%s, want func(%s", reader, name, g, w)
			}
		}
	}
}
