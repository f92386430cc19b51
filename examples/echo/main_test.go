package main

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/conformance"
	"github.com/idemgen/idemgen/internal/conformance/conformancetest"
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

func service(pool *pgxpool.Pool, provider *conformance.Provider, log *slog.Logger) (http.Handler, error) {
	return NewServer(pool, provider, log)
}
