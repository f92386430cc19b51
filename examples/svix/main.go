// Command svix serves Svix's "create application" operation from Svix's own OpenAPI document
// (testdata/specs/vendor/svix-server-openapi.json), marked in idemgen.yaml, on PostgreSQL, with
// its errors in the schemas the spec declares, so that Svix's Go SDK reads them as Svix's own.
// svix_test.go drives it with github.com/svix/svix-webhooks.
//
//	DATABASE_URL=postgres://... go run . -addr 127.0.0.1:8071
package main

//go:generate go tool idemgen generate ../../testdata/specs/vendor/svix-server-openapi.json --config idemgen.yaml --out api --package api

import (
	"context"
	"flag"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8071", "listen address")
	flag.Parse()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	h, err := NewHandler(pool, Options{})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, h))
}
