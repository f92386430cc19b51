// Package pgtest gives tests a fresh database on the real PostgreSQL server that the project's
// test command starts (scripts/with-postgres.sh exports IDEMGEN_TEST_DATABASE_URL).
//
// Every call to NewDatabase creates a database with a unique name and drops it when the test
// ends, so packages and tests never see each other's rows. Without a server, tests that need one
// fail when IDEMGEN_REQUIRE_DB=1 or CI=true (so CI can never pass by skipping them) and are
// skipped otherwise, with a message naming the command that runs them.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvURL is the environment variable holding the test server's connection URL.
const EnvURL = "IDEMGEN_TEST_DATABASE_URL"

// ServerURL returns the URL of the test server, or skips (fails under CI) when there is none.
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		msg := EnvURL + " is not set: run the tests with `make test` (or scripts/with-postgres.sh go test ./...)"
		if os.Getenv("IDEMGEN_REQUIRE_DB") == "1" || os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return u
}

// NewDatabase creates an empty database for this test and returns its connection URL. The
// database is dropped (connections terminated) when the test and its subtests have finished.
func NewDatabase(t testing.TB) string {
	t.Helper()
	server := ServerURL(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("pgtest: random name: %v", err)
	}
	name := "idemgen_test_" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("pgtest: connect %s: %v", redact(server), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})

	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

// NewPool creates a fresh database (NewDatabase) and a pool of at most maxConns connections
// to it, closed when the test ends.
func NewPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewDatabase(t))
	if err != nil {
		t.Fatalf("pgtest: pool config: %v", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
