package main

import (
	"testing"

	"github.com/idemgen/idemgen/internal/conformance/conformancetest"
)

// TestCases runs every request-sequence case (testdata/cases and the conformance service's own)
// against this service on a real PostgreSQL.
func TestCases(t *testing.T) {
	conformancetest.Run(t, "../..", NewHandler, nil)
}
