package chiexample

import (
	"testing"

	"github.com/idemgen/idemgen/internal/conformance/conformancetest"
)

// TestCases runs every request-sequence case against the generated handlers on chi (Register,
// and createRefund mounted by hand in a sub-router) on a real PostgreSQL.
func TestCases(t *testing.T) {
	conformancetest.Run(t, "../..", NewRouter, nil)
}

// TestConform runs idemgen conform against this service, as a user would against theirs:
// every check of conformance.yaml's operations passes, faults included.
func TestConform(t *testing.T) {
	conformancetest.Conform(t, "../..", NewRouter)
}
