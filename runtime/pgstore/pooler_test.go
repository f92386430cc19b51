package pgstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The store behind PgBouncer in transaction pooling mode (scripts/with-pgbouncer.sh; make test
// runs these, and the store suite, the request cases and the fault suite again behind it):
// Open finds the pooler out and refuses what cannot work there with the setting to change, and
// what it accepts holds under the adversary's traffic.

// poolVia returns a pool of maxConns connections on url, closed when the test ends.
func poolVia(t *testing.T, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// withExecMode returns url with its default_query_exec_mode set to mode ("": pgx's default).
func withExecMode(t testing.TB, raw, mode string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("default_query_exec_mode")
	if mode != "" {
		q.Set("default_query_exec_mode", mode)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// pooledDatabase is a fresh migrated database, and its URL through PgBouncer.
func pooledDatabase(t *testing.T) string {
	t.Helper()
	direct := pgtest.NewDatabase(t)
	if pgtest.ViaPgBouncer() {
		direct = directURL(t, direct)
	}
	through := pgtest.PoolerURL(t, direct)
	if err := migrate(context.Background(), poolVia(t, through, 2)); err != nil {
		t.Fatalf("migrate through PgBouncer: %v", err)
	}
	return through
}

// directURL is the URL of a database of the test server without the pooler in between.
func directURL(t *testing.T, anyURL string) string {
	t.Helper()
	server, err := url.Parse(pgtest.ServerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(anyURL)
	if err != nil {
		t.Fatal(err)
	}
	server.Path = u.Path
	return server.String()
}

func TestOpenFindsThePooler(t *testing.T) {
	ctx := context.Background()
	through := pooledDatabase(t)
	st, err := pgstore.Open(ctx, poolVia(t, through, 4), pgstore.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatalf("Open through PgBouncer with default_query_exec_mode=exec: %v", err)
	}
	if st.Pooling() != pgstore.PoolingTransaction {
		t.Errorf("Open through PgBouncer: %v, want PoolingTransaction", st.Pooling())
	}
	st, err = pgstore.Open(ctx, poolVia(t, directURL(t, through), 4), pgstore.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if st.Pooling() != pgstore.PoolingSession {
		t.Errorf("Open on a direct connection: %v, want PoolingSession", st.Pooling())
	}
}

// Behind transaction pooling, pgx's default statement mode prepares statements by name in one
// server session and runs them in another (the adversary's 374 of 400 requests answered 503
// "prepared statement does not exist"), and LockAtRead strands session locks on server
// sessions other clients then get (keys stuck 409 for an hour): Open refuses both, naming the
// setting, before a request runs.
func TestOpenRefusesWhatNeedsASession(t *testing.T) {
	ctx := context.Background()
	through := pooledDatabase(t)
	for _, c := range []struct {
		name, mode string
		opts       pgstore.Options
		want       string // "" accepted
	}{
		{"exec", "exec", pgstore.Options{}, ""},
		{"cache_describe", "cache_describe", pgstore.Options{}, ""},
		{"simple_protocol", "simple_protocol", pgstore.Options{}, ""},
		{"cache_statement", "", pgstore.Options{}, "default_query_exec_mode=exec"},
		{"describe_exec", "describe_exec", pgstore.Options{}, "default_query_exec_mode=exec"},
		{"LockAtRead", "exec", pgstore.Options{Claim: pgstore.ClaimWithStatement{LockAtRead: true}}, "ClaimWithStatement.LockAtRead"},
		{"LockAtRead told session pooling", "exec", pgstore.Options{Claim: pgstore.ClaimWithStatement{LockAtRead: true}, Pooling: pgstore.PoolingSession}, ""},
		{"cache_statement told transaction pooling", "", pgstore.Options{Pooling: pgstore.PoolingTransaction}, "default_query_exec_mode=exec"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Logger = discardLogger()
			_, err := pgstore.Open(ctx, poolVia(t, withExecMode(t, through, c.mode), 4), c.opts)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Open: %v, want a store", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Open: %v, want an error naming %q", err, c.want)
			}
			if c.want == "" || c.opts.Pooling != pgstore.PoolingTransaction {
				return
			}
			// New, told the same, panics with the same message.
			defer func() {
				if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), c.want) {
					t.Errorf("New: panic %v, want one naming %q", p, c.want)
				}
			}()
			pgstore.New(poolVia(t, withExecMode(t, through, c.mode), 4), c.opts)
		})
	}
}

// The adversary's traffic through PgBouncer, on the store Open configures: new keys with
// duplicates at once, atomic (each claim strategy) and lease mode. Nothing answers 5xx, each
// key runs once, no key stays 409 after its request, and no session keeps a lock.
func TestStormBehindPgBouncer(t *testing.T) {
	const keys, copies = 60, 4
	cases := []struct {
		name  string
		tweak func(*setup)
		lease bool
	}{
		{"WithStatement", withStrategy(pgstore.ClaimWithStatement{}), false},
		{"ReadFirst", withStrategy(pgstore.ClaimReadFirst{}), false},
		{"Pipelined", withStrategy(pgstore.ClaimPipelined{}), false},
		{"lease", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			through := pooledDatabase(t)
			e := newEnvAt(t, through, func(s *setup) {
				s.open, s.maxConns = true, 20
				s.store.Logger = discardLogger()
				if c.tweak != nil {
					c.tweak(s)
				}
			})
			if e.st.Pooling() != pgstore.PoolingTransaction {
				t.Fatalf("the store takes PgBouncer for %v", e.st.Pooling())
			}
			p := &provider{}
			var h http.Handler
			if c.lease {
				h = e.leaseHandler(leaseOp(), p)
			} else {
				h = e.atomicHandler(payOp())
			}
			codes := concurrently(keys*copies, func(i int) int {
				return serve(h, req("acme", fmt.Sprintf("k-storm-%04d-aaaaaaaaaa", i%keys), body100, "X-Delay", "20ms")).Code
			})
			seen := map[int]int{}
			for _, code := range codes {
				seen[code]++
			}
			if seen[http.StatusCreated]+seen[http.StatusConflict] != keys*copies || seen[http.StatusCreated] < keys {
				t.Errorf("answers %v, want only 201 (at least one per key) and 409", seen)
			}
			if n := e.payments("acme"); n != keys {
				t.Errorf("%d payments for %d keys", n, keys)
			}
			// Every key replays now: none is stuck in flight.
			for i := range keys {
				w := serve(h, req("acme", fmt.Sprintf("k-storm-%04d-aaaaaaaaaa", i), body100))
				if w.Code != http.StatusCreated || w.Header().Get(runtime.HeaderReplayed) != "true" {
					t.Fatalf("key %d after the storm: %d %s, want its replay", i, w.Code, w.Body)
				}
			}
			if locks := serverAdvisoryLocks(t, directURL(t, through)); locks != 0 {
				t.Errorf("%d advisory locks held after the storm", locks)
			}
		})
	}
}

// serverAdvisoryLocks counts the advisory locks held in direct's database (other tests run
// beside this one on the server), read without the pooler, and logs their holders.
func serverAdvisoryLocks(t *testing.T, direct string) int {
	t.Helper()
	rows, err := poolVia(t, direct, 1).Query(context.Background(), `SELECT l.pid, coalesce(a.state, ''), coalesce(a.query, ''),
		coalesce(a.xact_start::text, '') FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var pid int
		var state, query, xact string
		if err := rows.Scan(&pid, &state, &query, &xact); err != nil {
			t.Fatal(err)
		}
		t.Logf("advisory lock held by pid %d (%s since %s): %.200s", pid, state, xact, query)
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// The partition sweeper through PgBouncer keeps no state in a session: the adversary saw its
// session lock_timeout (200 ms) on other clients' statements for 11 s, and its session lock on
// an idle server session. Another client runs statements throughout the sweep, on whichever
// server session the pooler gives it (often the one the sweeper just left): none of them sees
// a lock_timeout, and no lock is left once the sweep is done.
func TestPartitionSweeperBehindPgBouncer(t *testing.T) {
	ctx := context.Background()
	direct := pgtest.NewDatabase(t)
	if pgtest.ViaPgBouncer() {
		direct = directURL(t, direct)
	}
	through := pgtest.PoolerURL(t, direct)
	sweeperPool := poolVia(t, through, 2)
	sw := &pgstore.PartitionSweeper{Pool: sweeperPool, LockTimeout: 200 * time.Millisecond}
	if err := pgstore.MigratePartitioned(ctx, sweeperPool); err != nil {
		t.Fatal(err)
	}
	// Partitions whose range ended (hours of two days ago: the sweeper's own partitions start
	// today): created by hand the way the sweeper names and marks them.
	admin := poolVia(t, direct, 2)
	for i := 1; i <= 3; i++ {
		start := time.Now().UTC().Truncate(24 * time.Hour).Add(-24*time.Hour - time.Duration(i)*time.Hour)
		name := "idempotency_records_p" + start.Format("20060102t1504")
		for _, q := range []string{
			fmt.Sprintf(`CREATE TABLE %s (LIKE idempotency_records)`, name),
			fmt.Sprintf(`COMMENT ON TABLE %s IS 'idemgen partition %s of idempotency_records'`, name, name),
			fmt.Sprintf(`ALTER TABLE idempotency_records ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')`,
				name, start.Format(time.RFC3339), start.Add(time.Hour).Format(time.RFC3339)),
		} {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	other := poolVia(t, through, 4)
	stop := make(chan struct{})
	var (
		mu      sync.Mutex
		leaked  []string
		checked int
	)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var lt string
				if err := other.QueryRow(ctx, "SHOW lock_timeout").Scan(&lt); err != nil {
					continue
				}
				mu.Lock()
				checked++
				if lt != "0" {
					leaked = append(leaked, lt)
				}
				mu.Unlock()
			}
		}()
	}
	dropped, err := sw.SweepOnce(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	var left int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname LIKE 'idempotency\_records\_p%'
		AND relname < 'idempotency_records_p' || to_char(now() AT TIME ZONE 'UTC' - interval '1 day', 'YYYYMMDD')`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d ended partitions left after the sweep (dropped rows %d)", left, dropped)
	}
	if len(leaked) > 0 {
		t.Errorf("%d of %d statements of another client ran under the sweeper's lock_timeout (%s)", len(leaked), checked, leaked[0])
	}
	if locks := serverAdvisoryLocks(t, direct); locks != 0 {
		t.Errorf("%d advisory locks held after the sweep", locks)
	}
}

// Open warns about a pool smaller than the expected concurrency, with the figure to set.
func TestOpenWarnsAboutASmallPool(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t) // pgxpool's default size, max(4, CPUs)
	for _, c := range []struct {
		name string
		opts pgstore.Options
		want string
	}{
		{"default size", pgstore.Options{}, "Options.Concurrency"},
		{"below concurrency", pgstore.Options{Concurrency: 40, ReservedConns: 2}, "pool_max_conns=42"},
		{"enough", pgstore.Options{Concurrency: 1}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			c.opts.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
			if _, err := pgstore.Open(ctx, pool, c.opts); err != nil {
				t.Fatal(err)
			}
			switch {
			case c.want == "" && buf.Len() > 0:
				t.Errorf("warned: %s", buf.String())
			case c.want != "" && !strings.Contains(buf.String(), c.want):
				t.Errorf("logged %q, want a warning naming %q", buf.String(), c.want)
			}
		})
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
