// Command charges is idemgen's reconciliation example: a payment API whose createCharge charges
// a card at a provider in lease mode (code generated from charges.yaml, package api), and the
// daily reconciliation of the provider's report against its records (runtime/reconcile), which
// finds the charges whose requests ended without knowing what the provider did.
//
// Usage:
//
//	DATABASE_URL=postgres://... charges [-addr 127.0.0.1:8080] [-provider URL] [-report FILE] [-reconcile-every 24h]
//
// Without -provider it runs a fake provider in the same process and keeps its report in -report
// (default charges-report.csv), as a provider's daily export would be (a restart reads the
// charges back from it); -reconcile-every runs
// the reconciliation job on that file. Clients name their merchant account in X-Account (the
// idempotency scope).
package main

//go:generate go run github.com/idemgen/idemgen/cmd/idemgen generate charges.yaml --out api --package api --docs

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	providerURL := flag.String("provider", "", "the payment provider's base URL (default: a fake provider in this process)")
	report := flag.String("report", "charges-report.csv", "the provider's report file: written by the fake provider, read by the reconciliation job")
	every := flag.Duration("reconcile-every", 0, "run the reconciliation job on -report this often (0: never; `idemgen reconcile` does the same by hand)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "charges: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *providerURL, *report, *every); err != nil {
		fmt.Fprintln(os.Stderr, "charges:", err)
		os.Exit(1)
	}
}

// run connects to DATABASE_URL, migrates, and serves until ctx ends.
func run(ctx context.Context, addr, providerURL, report string, every time.Duration) error {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		return errors.New("DATABASE_URL is not set (for example postgres://user@127.0.0.1:5432/charges)")
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if err := migrate(ctx, pool); err != nil {
		return err
	}
	if providerURL == "" {
		fake := newProvider()
		if err := fake.loadReport(report); err != nil {
			return fmt.Errorf("fake provider: %w", err)
		}
		fake.report = report
		srv := httptest.NewServer(fake)
		defer srv.Close()
		providerURL = srv.URL
		slog.Info("fake provider", "url", srv.URL, "report", report)
	}
	// Open checks the deployment (a pooler in front, the pool's size) and says what to set.
	st, err := pgstore.Open(ctx, pool, pgstore.Options{})
	if err != nil {
		return err
	}
	handler, rt, err := newServer(&service{pool: pool, store: st, provider: &providerClient{url: providerURL, http: &http.Client{Timeout: 10 * time.Second}}})
	if err != nil {
		return err
	}
	go (&pgstore.Sweeper{Pool: pool}).Run(ctx)
	if every > 0 {
		go reconcileEvery(ctx, st, report, every)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return serve(ctx, ln, handler, rt)
}

// serve serves handler on ln until ctx ends, then shuts the server and rt down: no new keys,
// 10 s for the running requests, and a lease still in its call phase then is handed over, so
// that the charge's retry proceeds on another replica at once (the provider deduplicates it).
func serve(ctx context.Context, ln net.Listener, handler http.Handler, rt *runtime.Runtime) error {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	slog.Info("charges listening", "addr", "http://"+ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return rt.ShutdownServer(shutdown, srv)
}
