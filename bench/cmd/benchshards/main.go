// Command benchshards checks the capacity model of docs/capacity.md on this machine: it drives
// new keys over N PostgreSQL servers, each a shard holding the records of the tenants whose
// scope digest routes to it, and reports per shard what the model predicts per new key.
//
//	bench/shards/run.sh 1 2 4     (make bench-shards: starts 4 throwaway servers, runs k = 1, 2, 4)
//	bench/shards/run.sh -short    (CI: 1 and 2 servers, a few seconds)
//
// The servers come from -urls (or IDEMGEN_SHARD_URLS, space- or comma-separated); a run with k
// shards uses the first k. Each run gets a fresh database on every server, migrated for the
// store and the conformance service's tables. A new key is the request the HTTP harness's
// "A/B ClaimWithStatement, new key" variant sends (POST /v1/payments, the 80-byte payment
// body, a bearer tenant, a fresh Idempotency-Key), served in-process by the same handler
// (baseline.Strategy on pgstore, ClaimWithStatement): no sockets between driver and server,
// only the database connections on loopback.
//
// Routing is the one docs/distributed.md prescribes for Citus: by the record's scope_id,
// store.DigestOf's 64-bit scope digest (pgstore writes it to the scope_id column), here
// uint64(scope_id) mod k. Workers pick a tenant uniformly at random for every request, so a
// shard's share of requests must match its share of tenants. The run stops at -duration or
// -requests, whichever comes first.
//
// Per shard it reports requests, req/s, WAL bytes per new key (pg_current_wal_lsn before and
// after), WAL syncs per new key (pg_stat_wal.wal_sync, PostgreSQL 14 or later), PostgreSQL CPU
// µs per new key (every process of that server, from /proc), and checks that
//   - every request got 201,
//   - each shard's share of requests is its share of tenants within four binomial standard
//     deviations (+0.5 %),
//   - each shard holds exactly the records of its requests, and only records whose scope_id
//     routes to it (the digest the driver routed by is the one pgstore stored).
//
// It prints Markdown to stdout, progress to stderr, and exits 1 when a check fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/bench/internal/baseline"
	"github.com/idemgen/idemgen/bench/internal/procstat"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// paymentBody is the HTTP harness's createPayment body (bench/cmd/benchdrive).
const paymentBody = `{"amount": 1500, "currency": "EUR", "to": "acc_123", "description": "benchmark"}`

type config struct {
	urls     []string
	shards   []int
	tenants  int
	conc     int
	duration time.Duration
	requests int64
}

func main() {
	var (
		urls     = flag.String("urls", os.Getenv("IDEMGEN_SHARD_URLS"), "PostgreSQL server URLs, space- or comma-separated (default $IDEMGEN_SHARD_URLS)")
		shards   = flag.String("shards", "", "shard counts to run, comma-separated (default: 1 up to every server, doubling)")
		tenants  = flag.Int("tenants", 256, "tenants (scopes) spread over the shards")
		conc     = flag.Int("concurrency", 16, "closed-loop workers, over all shards")
		duration = flag.Duration("duration", 10*time.Second, "time per run")
		requests = flag.Int64("requests", 1_000_000, "at most this many new keys per run")
		short    = flag.Bool("short", false, "CI's smoke mode: 1 and 2 shards, 64 tenants, 2 s or 4,000 requests per run")
	)
	flag.Parse()
	cfg := config{tenants: *tenants, conc: *conc, duration: *duration, requests: *requests}
	cfg.urls = strings.FieldsFunc(*urls, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' })
	if len(cfg.urls) == 0 {
		fatalf("no servers: pass -urls or set IDEMGEN_SHARD_URLS (bench/shards/run.sh does)")
	}
	if *short {
		cfg.tenants, cfg.duration, cfg.requests, cfg.conc = 64, 2*time.Second, 4000, 8
		*shards = "1,2"
	}
	var err error
	if cfg.shards, err = shardCounts(*shards, len(cfg.urls)); err != nil {
		fatalf("-shards: %v", err)
	}
	if cfg.tenants < 1 || cfg.conc < 1 || cfg.requests < 1 {
		fatalf("-tenants, -concurrency and -requests must be positive")
	}

	ctx := context.Background()
	load0 := loadAvg()
	fmt.Printf("Load average at the start: %s. %d tenants, %d workers, at most %v or %d new keys per run.\n\n",
		load0, cfg.tenants, cfg.conc, cfg.duration, cfg.requests)
	printHeader()
	failed := false
	for _, k := range cfg.shards {
		progress("%d shard(s)", k)
		r, err := runShards(ctx, cfg, k)
		if err != nil {
			fatalf("%d shards: %v", k, err)
		}
		r.print()
		for _, p := range r.problems {
			fmt.Fprintf(os.Stderr, "benchshards: %d shards: %s\n", k, p)
			failed = true
		}
	}
	fmt.Printf("\nLoad average at the end: %s.\n", loadAvg())
	if failed {
		os.Exit(1)
	}
}

// shardCounts parses -shards, defaulting to 1, 2, 4, … up to n, then n.
func shardCounts(s string, n int) ([]int, error) {
	if s == "" {
		var ks []int
		for k := 1; k < n; k *= 2 {
			ks = append(ks, k)
		}
		return append(ks, n), nil
	}
	var ks []int
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			return nil, fmt.Errorf("%q is not a shard count", f)
		}
		if k > n {
			return nil, fmt.Errorf("%d shards need %d servers, %d given", k, k, n)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// route is the shard of a tenant among k: its scope digest, the column a Citus deployment
// distributes the records by, modulo k.
func route(tenant string, k int) int {
	return int(uint64(store.DigestOf(store.ID{Scope: tenant}).Scope) % uint64(k))
}

func tenantName(i int) string { return fmt.Sprintf("tenant-%04d", i) }

// shard is one server of a run.
type shard struct {
	pool       *pgxpool.Pool
	url        string
	handler    http.Handler
	postmaster int
	tenants    int
	requests   atomic.Int64
	bad        atomic.Int64
	lastBad    atomic.Value // string: the last non-201 answer

	wal0, wal1   int64
	sync0, sync1 int64
	cpu0, cpu1   time.Duration
}

// result is one run's measurement.
type result struct {
	k        int
	shards   []*shard
	total    int64
	elapsed  time.Duration
	appCPU   time.Duration
	problems []string
}

func runShards(ctx context.Context, cfg config, k int) (*result, error) {
	r := &result{k: k}
	name := fmt.Sprintf("benchshards_%d", k)
	for i := range k {
		s, err := openShard(ctx, cfg.urls[i], name, cfg.conc)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		defer s.pool.Close()
		r.shards = append(r.shards, s)
	}
	tenants := make([]string, cfg.tenants)
	for i := range tenants {
		tenants[i] = tenantName(i)
		r.shards[route(tenants[i], k)].tenants++
	}
	// Pending statistics of the migration's connections reach pg_stat_wal when they end; the
	// setup pools are closed, and this leaves them time to land before the first reading.
	time.Sleep(1100 * time.Millisecond)
	for _, s := range r.shards {
		if err := s.read(ctx, &s.wal0, &s.sync0); err != nil {
			return nil, err
		}
		s.cpu0 = procstat.TreeCPUTime(s.postmaster)
	}

	app0 := procstat.CPUTime(os.Getpid())
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var issued atomic.Int64
	deadline := time.Now().Add(cfg.duration)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				n := issued.Add(1)
				if n > cfg.requests {
					return
				}
				t := tenants[rand.IntN(len(tenants))]
				s := r.shards[route(t, k)]
				s.newKey(ctx, t, fmt.Sprintf("key-%s-%d-%d", run, w, n))
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.appCPU = procstat.CPUTime(os.Getpid()) - app0
	for _, s := range r.shards {
		s.cpu1 = procstat.TreeCPUTime(s.postmaster)
		var sync int64
		if err := s.read(ctx, &s.wal1, &sync); err != nil {
			return nil, err
		}
		r.total += s.requests.Load()
	}
	// pg_stat_wal counts a backend's syncs when it flushes its statistics (at most once a
	// second while busy, and when it exits): close the pools and wait, then read again.
	for _, s := range r.shards {
		s.pool.Close()
	}
	time.Sleep(1100 * time.Millisecond)
	for _, s := range r.shards {
		var wal int64
		if err := s.read(ctx, &wal, &s.sync1); err != nil {
			return nil, err
		}
	}
	r.check(ctx, cfg)
	return r, nil
}

// openShard makes a fresh database on the server, migrates it, and serves the A/B
// ClaimWithStatement createPayment on a pool of conc connections, opened before the run.
func openShard(ctx context.Context, server, name string, conc int) (*shard, error) {
	u, err := freshDatabase(ctx, server, name)
	if err != nil {
		return nil, err
	}
	setup, err := pgxpool.New(ctx, u)
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	if err := pgstore.Migrate(ctx, setup); err != nil {
		return nil, err
	}
	if err := conformance.Migrate(ctx, setup); err != nil {
		return nil, err
	}
	var backend int
	if err := setup.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return nil, err
	}
	postmaster, err := procstat.Parent(backend)
	if err != nil {
		return nil, fmt.Errorf("the server's CPU is read from /proc: %w", err)
	}
	pcfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns, pcfg.MinConns = int32(conc), int32(conc)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	// Open every connection now, so that no backend starts (and is counted) during the run.
	conns := make([]*pgxpool.Conn, conc)
	for i := range conns {
		if conns[i], err = pool.Acquire(ctx); err != nil {
			pool.Close()
			return nil, err
		}
	}
	for _, c := range conns {
		c.Release()
	}
	h, err := baseline.Strategy(pool, pgstore.ClaimWithStatement{})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &shard{pool: pool, url: u, handler: h, postmaster: postmaster}, nil
}

// newKey sends one createPayment with a fresh key to the shard's handler.
func (s *shard) newKey(ctx context.Context, tenant, key string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/payments", strings.NewReader(paymentBody))
	req.Header.Set("Authorization", "Bearer "+tenant)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	s.handler.ServeHTTP(w, req)
	s.requests.Add(1)
	if w.Code != http.StatusCreated {
		s.bad.Add(1)
		s.lastBad.Store(fmt.Sprintf("%d %s", w.Code, strings.TrimSpace(w.Body.String())))
	}
}

// read takes the server's WAL position in bytes and its WAL sync count, on a connection of its
// own (the shard's pool may be closed).
func (s *shard) read(ctx context.Context, wal, syncs *int64) error {
	c, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.QueryRow(ctx, "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, wal_sync FROM pg_stat_wal").Scan(wal, syncs)
}

// check records the run's failed checks in r.problems.
func (r *result) check(ctx context.Context, cfg config) {
	for i, s := range r.shards {
		n := s.requests.Load()
		if bad := s.bad.Load(); bad > 0 {
			r.problems = append(r.problems, fmt.Sprintf("shard %d: %d of %d requests were not 201 (last: %v)", i, bad, n, s.lastBad.Load()))
		}
		if r.total > 0 {
			p := float64(s.tenants) / float64(cfg.tenants)
			got := float64(n) / float64(r.total)
			if tol := shareTolerance(p, r.total); math.Abs(got-p) > tol {
				r.problems = append(r.problems, fmt.Sprintf("shard %d: %.1f%% of the requests for %.1f%% of the tenants (tolerance ±%.1f%%)", i, 100*got, 100*p, 100*tol))
			}
		}
		records, misrouted, err := s.records(ctx, i, r.k)
		switch {
		case err != nil:
			r.problems = append(r.problems, fmt.Sprintf("shard %d: counting records: %v", i, err))
		case records != n-s.bad.Load():
			r.problems = append(r.problems, fmt.Sprintf("shard %d: %d records for %d new keys answered 201", i, records, n-s.bad.Load()))
		case misrouted > 0:
			r.problems = append(r.problems, fmt.Sprintf("shard %d: %d records whose scope_id routes to another shard", i, misrouted))
		}
	}
}

// shareTolerance is how far a shard's share of n uniformly routed requests may stray from its
// share p of the tenants: four binomial standard deviations, plus half a percent.
func shareTolerance(p float64, n int64) float64 {
	return 4*math.Sqrt(p*(1-p)/float64(n)) + 0.005
}

// records counts the shard's records and those among them whose scope_id would route to
// another of k shards.
func (s *shard) records(ctx context.Context, i, k int) (records, misrouted int64, err error) {
	c, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT scope_id, count(*) FROM idempotency_records GROUP BY scope_id")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var scope, n int64
		if err := rows.Scan(&scope, &n); err != nil {
			return 0, 0, err
		}
		records += n
		if int(uint64(scope)%uint64(k)) != i {
			misrouted += n
		}
	}
	return records, misrouted, rows.Err()
}

func printHeader() {
	fmt.Println("| shards | shard | tenants (share) | new keys (share) | new keys/s | WAL B/new key | WAL syncs/new key | PostgreSQL CPU µs/new key |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|")
}

func (r *result) print() {
	var tenants int
	for _, s := range r.shards {
		tenants += s.tenants
	}
	sec := r.elapsed.Seconds()
	var wal, syncs int64
	var cpu time.Duration
	for i, s := range r.shards {
		n := s.requests.Load()
		w, y, c := s.wal1-s.wal0, s.sync1-s.sync0, s.cpu1-s.cpu0
		wal, syncs, cpu = wal+w, syncs+y, cpu+c
		fmt.Printf("| %d | %d | %d (%.1f%%) | %d (%.1f%%) | %.0f | %s | %s | %s |\n", r.k, i, s.tenants,
			pct(int64(s.tenants), int64(tenants)), n, pct(n, r.total), float64(n)/sec,
			per(float64(w), n, "%.0f"), per(float64(y), n, "%.2f"), per(float64(c.Microseconds()), n, "%.0f"))
	}
	fmt.Printf("| %d | all | %d | %d in %.1f s | %.0f | %s | %s | %s (+ %s in the driver and handlers) |\n", r.k, tenants, r.total, sec,
		float64(r.total)/sec, per(float64(wal), r.total, "%.0f"), per(float64(syncs), r.total, "%.2f"),
		per(float64(cpu.Microseconds()), r.total, "%.0f"), per(float64(r.appCPU.Microseconds()), r.total, "%.0f"))
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func per(x float64, n int64, format string) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf(format, x/float64(n))
}

// freshDatabase drops and creates database name on the server and returns its URL.
func freshDatabase(ctx context.Context, server, name string) (string, error) {
	c, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop database: %w", err)
	}
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// loadAvg is the first three fields of /proc/loadavg, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchshards: "+format+"\n", args...)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchshards: "+format+"\n", args...)
	os.Exit(1)
}
