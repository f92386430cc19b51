package main

import (
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
)

// TestCases runs every request-sequence case (testdata/cases and the conformance service's own)
// against this echo service on a real PostgreSQL: all of them apply.
func TestCases(t *testing.T) {
	conformancetest.Run(t, "../..", service, nil)
}

// TestConform runs idemgen conform against this service, as a user would against theirs:
// every check of conformance.yaml's operations passes, faults included.
func TestConform(t *testing.T) {
	conformancetest.Conform(t, "../..", service)
}

// service is NewServer on env's database, store, provider and logger.
func service(env conformancetest.Env) (http.Handler, error) {
	return NewServer(env.DB, env.Store, env.Provider, env.Logger)
}

// TestNewcomer: a client whose attempts (1 s) are shorter than the handler (2 s) succeeds, with
// one payment: the operation its first attempt started finishes after it disconnected
// (conformancetest.Newcomer, issue 39).
func TestNewcomer(t *testing.T) {
	conformancetest.Newcomer(t, service)
}
