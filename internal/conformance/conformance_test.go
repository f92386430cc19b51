package conformance_test

import (
	"testing"

	"github.com/idemgen/idemgen/internal/conformance"
	"github.com/idemgen/idemgen/internal/conformance/conformancetest"
)

// TestCases runs every request-sequence case against the conformance service on a real
// PostgreSQL: the shared cases (testdata/cases), the service's own (testdata/cases here), and
// the cases in $IDEMGEN_CASES (conformancetest.EnvCases). Each case is a subtest named after its
// file. The example services of examples/ run the same cases through conformancetest.Run.
func TestCases(t *testing.T) {
	conformancetest.Run(t, "../..", conformance.NewHandler, nil)
}

// TestConform runs idemgen conform against the conformance service: every check passes.
func TestConform(t *testing.T) {
	conformancetest.Conform(t, "../..", conformance.NewHandler)
}
