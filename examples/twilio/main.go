// Command twilio serves Twilio's "create payments" operation from Twilio's own OpenAPI document
// (testdata/specs/vendor/twilio-api-v2010.yaml), marked in idemgen.yaml, on PostgreSQL, with its
// errors in the shape Twilio's SDKs read (the errors mapping writes it: Twilio's spec declares
// none). twilio_test.go drives it with github.com/twilio/twilio-go.
//
//	DATABASE_URL=postgres://... go run . -addr 127.0.0.1:8072
package main

//go:generate go tool idemgen generate ../../testdata/specs/vendor/twilio-api-v2010.yaml --config idemgen.yaml --out api --package api

import (
	"context"
	"flag"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8072", "listen address")
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
