package chiexample

import (
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
)

// service is NewRouter on env's store, tables and provider.
func service(env conformancetest.Env) (http.Handler, error) {
	return NewRouter(conformance.Config{Store: env.Store, Tables: env.DB, Provider: env.Provider, Logger: env.Logger})
}

// TestCases runs every request-sequence case against the generated handlers on chi (Register,
// and createRefund mounted by hand in a sub-router) on a real PostgreSQL.
func TestCases(t *testing.T) {
	conformancetest.Run(t, "../..", service, nil)
}

// TestConform runs idemgen conform against this service, as a user would against theirs:
// every check of conformance.yaml's operations passes, faults included.
func TestConform(t *testing.T) {
	conformancetest.Conform(t, "../..", service)
}

// TestNewcomer: a client whose attempts (1 s) are shorter than the handler (2 s) succeeds, with
// one payment: the operation its first attempt started finishes after it disconnected
// (conformancetest.Newcomer, issue 39).
func TestNewcomer(t *testing.T) {
	conformancetest.Newcomer(t, service)
}
