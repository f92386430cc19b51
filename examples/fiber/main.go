// Command fiber serves the conformance payments API (testdata/specs/conformance.yaml) as an
// existing fiber v2 service does, on fasthttp: its own request structs bound with
// c.BodyParser and checked by its own rules, its own errors returned from the handlers and
// rendered by its own ErrorHandler (RFC 9457 problem+json), its own authentication middleware,
// SQL through a pool. idemgen makes the marked operations safe to retry with the fiber adapter
// (github.com/idemgen/idemgen/adapters/fiber) and the operation table it generates from the
// spec (package idem, `idemgen generate --target middleware`); the lines that adoption added
// are marked "idemgen:" in server.go and payments.go.
//
//	DATABASE_URL=postgres://... go run . -addr 127.0.0.1:8080
//
// docs/integrate.md walks through the same steps for a service of your own.
package main

//go:generate go tool idemgen generate ../../testdata/specs/conformance.yaml --target middleware --out idem --package idem

import (
	"context"
	"flag"
	"log"
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
	app, err := NewServer(pool, pgstore.New(pool, pgstore.Options{}), conformance.NewProvider(), nil)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(app.Listen(*addr))
}
