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
