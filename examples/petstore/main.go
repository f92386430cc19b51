// Command petstore is the idemgen example: the Swagger Petstore's pet and store operations,
// with adding a pet, placing an order and starting an adoption (a long-running operation that
// answers 202 with a status resource, run by the worker in worker.go) made safe to retry by
// code idemgen generates from petstore.yaml (package api). It is built the way a user builds a
// service: a spec with `x-idempotent` on its creating operations, a go:generate line, handlers
// that write through the transaction they are given, and a main that connects to PostgreSQL,
// migrates and serves.
//
// Usage:
//
//	DATABASE_URL=postgres://... petstore [-addr 127.0.0.1:8080] [-order-delay 0s] [-adoption-step 2s]
//
// Clients identify themselves with the spec's `api_key` header; it is the idempotency scope, so
// two clients never share keys.
package main

//go:generate go run github.com/idemgen/idemgen/cmd/idemgen generate petstore.yaml --out api --package api --docs

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/pgstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	orderDelay := flag.Duration("order-delay", 0, "make placeOrder take this long before it writes (to watch a concurrent retry get 409)")
	adoptionStep := flag.Duration("adoption-step", 2*time.Second, "how long each of an adoption's three checks takes in the worker")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "petstore: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, options{orderDelay: *orderDelay, adoptionStep: *adoptionStep}); err != nil {
		fmt.Fprintln(os.Stderr, "petstore:", err)
		os.Exit(1)
	}
}

// run connects to DATABASE_URL, migrates the idempotency store and the store's tables, and
// serves until ctx ends.
func run(ctx context.Context, addr string, opts options) error {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		return errors.New("DATABASE_URL is not set (for example postgres://user@127.0.0.1:5432/petstore)")
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrate idempotency store: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		return err
	}
	// Open checks the deployment (a pooler in front, the pool's size) and says what to set.
	st, err := pgstore.Open(ctx, pool, pgstore.Options{})
	if err != nil {
		return err
	}
	handler, rt, err := newServer(st, pool, opts)
	if err != nil {
		return err
	}
	// Expired idempotency records already count as absent; the sweeper reclaims their space.
	go (&pgstore.Sweeper{Pool: pool}).Run(ctx)
	// The worker runs the adoptions that adoptPet enqueues (a long-running operation).
	go newWorker(pool, opts).run(ctx)

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	slog.Info("petstore listening", "addr", "http://"+ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// SIGTERM (a rolling restart): no new keys, the running requests get 10 s, and what they
	// still hold then is handed over, so that their retries proceed on another replica at once.
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.ShutdownServer(shutdown, srv); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
