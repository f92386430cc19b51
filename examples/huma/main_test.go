package main

import (
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/adapters/huma/idemhumatest"
	"github.com/idemgen/idemgen/examples/huma/idem"
	"github.com/idemgen/idemgen/internal/spec"
	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
)

// TestCases runs every request-sequence case (testdata/cases and the conformance service's own)
// against this Huma service on a real PostgreSQL: all of them apply.
func TestCases(t *testing.T) {
	conformancetest.Run(t, "../..", serve, nil)
}

// TestNewcomer: a client whose attempts (1 s) are shorter than the handler (2 s) succeeds, with
// one payment: the operation its first attempt started finishes after it disconnected
// (conformancetest.Newcomer, issue 39).
func TestNewcomer(t *testing.T) {
	conformancetest.Newcomer(t, serve)
}

// TestConform runs idemgen conform against this service, as a user would against theirs:
// every check of conformance.yaml's operations passes, faults included.
func TestConform(t *testing.T) {
	conformancetest.Conform(t, "../..", serve)
}

// TestOpenAPI keeps openapi.yaml, which idemgen generates package idem from, the document the
// API serves (go generate runs it to export the spec; everywhere else it checks it).
// idemgen: these three lines.
func TestOpenAPI(t *testing.T) {
	idemhumatest.Spec(t, newAPI(http.NewServeMux(), &Service{}), "openapi.yaml", idem.Routes())
}

func serve(env conformancetest.Env) (http.Handler, error) {
	return NewServer(env.DB, env.Store, env.Provider, env.Logger)
}

// TestConformExportedSpec runs idemgen conform judged by the spec this service exports from its
// code (openapi.yaml, with idemgen.yaml: the errors in Huma's ErrorModel), faults included.
func TestConformExportedSpec(t *testing.T) {
	conformancetest.ConformSpec(t, "../..", spec.Options{Path: "openapi.yaml", ConfigPath: "idemgen.yaml"}, serve)
}
