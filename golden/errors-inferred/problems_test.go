package errorsinferred

import (
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/gentest"
)

// A spec that declares its error answers' schemas and no errors mapping answers every problem
// in them: the mapping the loader inferred writes each problem's document in the schema the
// spec declares for its status (HTTPValidationError for 422, HttpErrorOut for the rest), as
// application/json, and none as an RFC 9457 problem the API's clients do not expect.
func TestProblemsInTheDeclaredSchemas(t *testing.T) {
	const file = "../../testdata/specs/errors-inferred.yaml"
	errOut, err := spec.LoadSchema(file, "#/components/schemas/HttpErrorOut")
	if err != nil {
		t.Fatal(err)
	}
	validation, err := spec.LoadSchema(file, "#/components/schemas/HTTPValidationError")
	if err != nil {
		t.Fatal(err)
	}
	op := operationV1ApplicationCreate()
	if op.Profile == nil || op.Profile.Problems == nil {
		t.Fatal("no errors mapping was inferred: the operation answers RFC 9457 problems")
	}
	w := op.Profile.Problems
	for _, p := range gentest.Problems() {
		got := gentest.WriteProblem(w, p)
		schema := errOut
		if got.Code == 422 {
			schema = validation
		}
		if err := schema.Validate(got.Body.Bytes(), true); err != nil {
			t.Errorf("%s (%d): %v in %s", p.Name, got.Code, err, got.Body)
		}
		if ct := got.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: Content-Type %q", p.Name, ct)
		}
	}
}
