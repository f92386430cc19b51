// Command ogen serves the conformance payments API (testdata/specs/conformance.yaml) as an
// ogen v1.24.0 server, made safe to retry by idemgen's middleware wrapped around it: the
// server's handlers and types stay as ogen generates them, and idemgen contributes only its
// operation table and decoders (`--target middleware`). ogen v1.24.0 refuses the spec's
// bracketed form fields (anyOf of an object and the empty string, style deepObject), so ogen
// works from ogen-spec.yaml, the spec without them, while idemgen's middleware, generated from
// the full spec, still decodes, checks and fingerprints them; every case passes.
//
//	DATABASE_URL=postgres://... go run . -addr 127.0.0.1:8080
//
// docs/integrate.md walks through the same steps for a service of your own.
package main

//go:generate go run github.com/ogen-go/ogen/cmd/ogen@v1.24.0 --config ogen.yml --target api --package api --clean ogen-spec.yaml
//go:generate go tool idemgen generate ../../testdata/specs/conformance.yaml --target middleware --out idem --package idem

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
	h, err := NewHandler(pool, pgstore.New(pool, pgstore.Options{}), conformance.NewProvider(), nil)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, h))
}
