// Command stripe serves 22 POST operations of Stripe's own OpenAPI document
// (testdata/specs/vendor/stripe-spec3.yaml), marked in idemgen.yaml with `profile: stripe`, on
// PostgreSQL: a server that Stripe's SDKs talk to as they talk to Stripe, including their
// retries. stripe_test.go drives it with stripe-go v82 through a proxy that drops responses.
//
//	DATABASE_URL=postgres://... go run . -addr 127.0.0.1:12111
//
// and point a Stripe SDK at http://127.0.0.1:12111 (stripe-go: BackendConfig.URL). docs/stripe.md
// describes the profile.
package main

//go:generate go tool idemgen generate ../../testdata/specs/vendor/stripe-spec3.yaml --config idemgen.yaml --out api --package api

import (
	"context"
	"flag"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:12111", "listen address")
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
