// Package pgtest gives tests a fresh database on the real PostgreSQL server that the project's
// test command starts (scripts/with-postgres.sh exports IDEMGEN_TEST_DATABASE_URL).
//
// Every call to NewDatabase creates a database with a unique name and drops it when the test
// ends, so packages and tests never see each other's rows. Without a server, tests that need one
// fail when IDEMGEN_REQUIRE_DB=1 or CI=true (so CI can never pass by skipping them) and are
// skipped otherwise, with a message naming the command that runs them.
//
// When the server is a Citus coordinator (the citus extension exists in the URL's database, as
// scripts/with-citus.sh makes it), each new database is a Citus database of its own: it is
// created on every node, gets the extension on each, and the coordinator's copy registers the
// workers, so that tests distribute their tables in it (make test-citus).
//
// Behind PgBouncer: scripts/with-pgbouncer.sh starts one in transaction pooling mode in front of
// the server and exports its URL (IDEMGEN_TEST_PGBOUNCER_URL). PoolerURL turns a test database's
// URL into the same database through it; with IDEMGEN_TEST_VIA_PGBOUNCER=1, NewDatabase and
// NewPool hand out those URLs, so that a whole test run (make test's store suite, request
// cases and fault suite, again) goes through the pooler.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvURL is the environment variable holding the test server's connection URL.
const EnvURL = "IDEMGEN_TEST_DATABASE_URL"

// EnvPgBouncerURL holds the URL of a PgBouncer in transaction pooling mode in front of the test
// server (scripts/with-pgbouncer.sh), with the statement mode it needs
// (default_query_exec_mode=exec).
const EnvPgBouncerURL = "IDEMGEN_TEST_PGBOUNCER_URL"

// EnvViaPgBouncer, set to 1, makes NewDatabase and NewPool return databases through the
// PgBouncer of EnvPgBouncerURL.
const EnvViaPgBouncer = "IDEMGEN_TEST_VIA_PGBOUNCER"

// ViaPgBouncer reports whether this run's databases are reached through PgBouncer
// (EnvViaPgBouncer): tests of what only a direct session can do skip then.
func ViaPgBouncer() bool { return os.Getenv(EnvViaPgBouncer) == "1" }

// PoolerURL returns the URL of the database of dbURL (one of NewDatabase's) through the
// PgBouncer of EnvPgBouncerURL, with that URL's parameters (default_query_exec_mode=exec). It
// skips the test when there is none, and fails it when IDEMGEN_REQUIRE_PGBOUNCER=1 or
// EnvViaPgBouncer is set.
func PoolerURL(t testing.TB, dbURL string) string {
	t.Helper()
	raw := os.Getenv(EnvPgBouncerURL)
	if raw == "" {
		msg := EnvPgBouncerURL + " is not set: run the test inside scripts/with-pgbouncer.sh (make test does)"
		if os.Getenv("IDEMGEN_REQUIRE_PGBOUNCER") == "1" || ViaPgBouncer() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	pooler, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", EnvPgBouncerURL, err)
	}
	db, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", redact(dbURL), err)
	}
	pooler.Path = db.Path
	return pooler.String()
}

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
	citus := isCitus(ctx, admin)
	if citus {
		// Citus 12.1 and later create (and drop) the database on every node.
		if _, err := admin.Exec(ctx, "SET citus.enable_create_database_propagation TO on"); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
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
		if citus {
			if _, err := c.Exec(ctx, "SET citus.enable_create_database_propagation TO on"); err != nil {
				t.Logf("pgtest: drop %s: %v", name, err)
			}
		}
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})

	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", EnvURL, err)
	}
	u.Path = "/" + name
	if citus {
		if err := joinCitus(ctx, admin, u); err != nil {
			t.Fatalf("pgtest: citus database %s: %v", name, err)
		}
	}
	if ViaPgBouncer() {
		return PoolerURL(t, u.String())
	}
	return u.String()
}

// isCitus reports whether conn's database has the citus extension.
func isCitus(ctx context.Context, conn *pgx.Conn) bool {
	var ok bool
	err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&ok)
	return err == nil && ok
}

// joinCitus makes the new database at u a Citus database with the nodes that admin's database
// knows: the extension on every node, the coordinator's host, the workers registered.
func joinCitus(ctx context.Context, admin *pgx.Conn, u *url.URL) error {
	rows, err := admin.Query(ctx, "SELECT nodename, nodeport, groupid = 0 FROM pg_dist_node WHERE noderole = 'primary' ORDER BY groupid")
	if err != nil {
		return err
	}
	type node struct {
		host  string
		port  int
		coord bool
	}
	var nodes []node
	for rows.Next() {
		var n node
		if err := rows.Scan(&n.host, &n.port, &n.coord); err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	at := func(n node) string {
		v := *u
		v.Host = n.host + ":" + strconv.Itoa(n.port)
		return v.String()
	}
	exec := func(url string, sqls ...string) error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		for _, q := range sqls {
			if _, err := c.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}
	coordinator := []string{"CREATE EXTENSION IF NOT EXISTS citus"}
	for _, n := range nodes {
		if n.coord {
			coordinator = append(coordinator, fmt.Sprintf("SELECT citus_set_coordinator_host('%s', %d)", n.host, n.port))
			continue
		}
		if err := exec(at(n), "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
			return fmt.Errorf("worker %s:%d: %w", n.host, n.port, err)
		}
		coordinator = append(coordinator, fmt.Sprintf("SELECT citus_add_node('%s', %d)", n.host, n.port))
	}
	return exec(u.String(), coordinator...)
}

// IsCitus reports whether the test server is a Citus coordinator (make test-citus); false
// without a server.
func IsCitus(t testing.TB) bool {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		return false
	}
	defer c.Close(ctx)
	return isCitus(ctx, c)
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
