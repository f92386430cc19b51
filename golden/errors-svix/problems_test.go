package errorssvix

import (
	"encoding/json"
	"testing"

	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/gentest"
)

// Every problem the runtime answers, through the generated writer: in the schema the spec
// declares for the status (HTTPValidationError for 422, HttpErrorOut otherwise, also for 400 and
// 503, which the operation declares no answer for), with no member the schema lacks (Svix's
// SDKs decode strictly), and the headers every error answer has.
func TestProblemsInTheSpecsSchema(t *testing.T) {
	const specPath = "../../testdata/specs/errors-svix.yaml"
	httpError, err := spec.LoadSchema(specPath, "#/components/schemas/HttpErrorOut")
	if err != nil {
		t.Fatal(err)
	}
	validationError, err := spec.LoadSchema(specPath, "#/components/schemas/HTTPValidationError")
	if err != nil {
		t.Fatal(err)
	}
	w := operationV1ApplicationCreate().Profile.Problems
	for _, p := range gentest.Problems() {
		rec := gentest.WriteProblem(w, p)
		schema := httpError
		if p.Status == 422 {
			schema = validationError
		}
		if err := schema.Validate(rec.Body.Bytes(), true); err != nil {
			t.Errorf("%s: %v in %s", p.Name, err, rec.Body)
		}
		if rec.Code != p.Status || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Cache-Control") != "no-store" ||
			(p.RetryAfter > 0) != (rec.Header().Get("Retry-After") != "") {
			t.Errorf("%s: %d %v", p.Name, rec.Code, rec.Header())
		}
		var doc struct{ Code, Detail string }
		if p.Status != 422 && (json.Unmarshal(rec.Body.Bytes(), &doc) != nil || doc.Detail != p.Message() ||
			(doc.Code != p.Name && !(p.Name == "in-flight" && doc.Code == "conflict"))) {
			t.Errorf("%s: %s", p.Name, rec.Body)
		}
	}
}
