package conformance_test

import (
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
)

// service is the conformance service on env's store, tables and provider.
func service(env conformancetest.Env) (http.Handler, error) {
	return conformance.NewHandler(conformance.Config{Store: env.Store, Tables: env.DB, Provider: env.Provider, Logger: env.Logger})
}

// TestCases runs every request-sequence case against the conformance service on a real
// PostgreSQL: the shared cases (testdata/cases), the service's own (testdata/cases here), and
// the cases in $IDEMGEN_CASES (conformancetest.EnvCases). Each case is a subtest named after its
// file. The example services of examples/ run the same cases through conformancetest.Run.
func TestCases(t *testing.T) {
	conformancetest.Run(t, "../../..", service, nil)
}

// TestConform runs idemgen conform against the conformance service: every check passes.
func TestConform(t *testing.T) {
	conformancetest.Conform(t, "../../..", service)
}

// TestNewcomer: a client whose attempts (1 s) are shorter than the handler (2 s) succeeds, with
// one payment: the operation its first attempt started finishes after it disconnected
// (conformancetest.Newcomer, issue 39).
func TestNewcomer(t *testing.T) {
	conformancetest.Newcomer(t, service)
}
