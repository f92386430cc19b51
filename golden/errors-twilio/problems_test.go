package errorstwilio

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/gentest"
)

// Every problem the runtime answers, through the generated writer, in the schema the config's
// errors mapping writes (Twilio's spec declares none), with the status in the document as in
// Twilio's errors.
func TestProblemsInTheMappingsSchema(t *testing.T) {
	cfg, err := os.ReadFile("../../testdata/specs/errors-twilio.config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The schema as the config writes it: the block under "- schema:", dedented.
	block := regexp.MustCompile(`(?s)- schema:\n(.*?)\n        body:`).FindSubmatch(cfg)
	if block == nil {
		t.Fatal("no schema in the config")
	}
	schema, err := spec.ParseSchema(regexp.MustCompile(`(?m)^ {10}`).ReplaceAll(block[1], nil))
	if err != nil {
		t.Fatal(err)
	}
	w := operationCreatePayments().Profile.Problems
	for _, p := range gentest.Problems() {
		rec := gentest.WriteProblem(w, p)
		if err := schema.Validate(rec.Body.Bytes(), true); err != nil {
			t.Errorf("%s: %v in %s", p.Name, err, rec.Body)
		}
		var doc struct {
			Code    int
			Message string
			Status  int
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Status != p.Status || rec.Code != p.Status ||
			doc.Message != p.Message() || doc.Code < 20000 || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s %v", p.Name, rec.Code, rec.Body, err)
		}
	}
}
