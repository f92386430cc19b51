// Command huma serves the conformance payments API as a code-first Huma (v2) service does: the
// operations, their request and response types, and their idempotency (x-idempotent in each
// marked operation's Extensions) are Go code, and the OpenAPI document is an output of it.
// Huma binds and validates the requests, its error model (huma.ErrorModel, RFC 9457) is the
// API's, a Huma middleware authenticates. idemgen makes the marked operations safe to retry with
// the Huma adapter (github.com/idemgen/idemgen/adapters/huma) and the operation table it
// generates from the exported spec (package idem); idemgen.yaml maps idemgen's own errors onto
// Huma's ErrorModel. The lines that adoption added are marked "idemgen:".
//
//	DATABASE_URL=postgres://... go run . -addr 127.0.0.1:8080
//
// docs/integrate.md walks through the same steps for a service of your own.
package main

// idemgen: export the spec from the API (TestOpenAPI), then generate the operation table from it.
//go:generate go test -count=1 -run ^TestOpenAPI$ .
//go:generate go tool idemgen generate openapi.yaml --config idemgen.yaml --target middleware --out idem --package idem

import (
	"context"
	"flag"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	if err := conformance.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	h, err := NewServer(pool, pgstore.New(pool, pgstore.Options{}), conformance.NewProvider(), nil)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(*addr, h))
}
