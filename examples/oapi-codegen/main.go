// Command oapi-codegen serves the conformance payments API (testdata/specs/conformance.yaml) as
// an oapi-codegen v2.8.2 strict server on net/http, made safe to retry by idemgen's middleware:
// the server's own handlers, request and response types stay as oapi-codegen generates them,
// and idemgen contributes only its operation table and decoders (`--target middleware`).
//
//	DATABASE_URL=postgres://... go run . -addr 127.0.0.1:8080
//
// docs/integrate.md walks through the same steps for a service of your own.
package main

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config api/oapi-codegen.yaml ../../testdata/specs/conformance.yaml
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
