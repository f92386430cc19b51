// Command benchscale measures the PostgreSQL store at scale: for each table layout
// (the plain table with its sweeper, and the table partitioned by expiry with its partition
// sweeper) it measures new keys and replays on the empty table, fills the table with millions
// of realistic records in SQL (generate_series: mixed operations and tenants, ~200-byte
// responses, expiry spread over 24 hours, plus an hour's worth already expired), measures again
// in the same run, reports heap and index bytes per record, then runs retention (the sweeper's
// row deletes, or the drop of the expired partition) under foreground load and reports its rate
// and the foreground p99 while it runs, with autovacuum's activity.
//
//	scripts/with-postgres.sh go run ./bench/cmd/benchscale -records 10000000   (make bench-scale)
//	scripts/with-postgres.sh go run ./bench/cmd/benchscale -short              (CI: proves it runs)
//
// Operations are store calls as the runtime makes them (no HTTP): a new key is BeginAtomic, the
// handler's business INSERT through the transaction's DBTX, and Commit of a ~200-byte response;
// a replay is BeginAtomic of a key the fill wrote (one SELECT). Each phase runs C closed-loop
// workers for a fixed time. It prints Markdown to stdout; progress goes to stderr.
package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// config is the run's parameters.
type config struct {
	records  int64
	expired  int64
	conc     int
	duration time.Duration
	tenants  int
	layouts  []string
	chunk    int64
}

func main() {
	var (
		records  = flag.Int64("records", 10_000_000, "live records to fill the table with")
		expired  = flag.Int64("expired", 0, "expired records for retention to remove; default records/24 (an hour of a 24 h retention)")
		conc     = flag.Int("concurrency", 16, "closed-loop workers per measurement")
		duration = flag.Duration("duration", 10*time.Second, "time per measurement")
		tenants  = flag.Int("tenants", 1000, "tenants (scopes) the records are spread over")
		layouts  = flag.String("layouts", "plain,partitioned", "table layouts to measure, in order")
		short    = flag.Bool("short", false, "smoke mode: 20,000 records, 1 s measurements (CI)")
	)
	flag.Parse()
	cfg := config{records: *records, expired: *expired, conc: *conc, duration: *duration, tenants: *tenants,
		layouts: strings.Split(*layouts, ","), chunk: 250_000}
	if *short {
		cfg.records, cfg.duration, cfg.conc, cfg.chunk = 20_000, time.Second, 4, 10_000
	}
	if cfg.expired <= 0 {
		cfg.expired = cfg.records / 24
	}
	server := os.Getenv("DATABASE_URL")
	if server == "" {
		fatalf("DATABASE_URL is not set: run under scripts/with-postgres.sh (make bench-scale)")
	}
	ctx := context.Background()
	var reports []*report
	for _, l := range cfg.layouts {
		r, err := runLayout(ctx, server, strings.TrimSpace(l), cfg)
		if err != nil {
			fatalf("%s: %v", l, err)
		}
		reports = append(reports, r)
	}
	printReport(cfg, reports)
}

// phase is one measurement: operations per second and latency quantiles.
type phase struct {
	ops      int64
	errs     int64
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (p phase) rate() float64 { return float64(p.ops) / p.elapsed.Seconds() }

// report is what one layout measured.
type report struct {
	layout                   string
	fill                     time.Duration
	emptyNew, emptyReplay    phase
	fullNew, fullReplay      phase
	beforeRetention, during  phase
	retention                time.Duration
	removed                  int64
	heap, index, toast       int64
	rows                     int64
	response                 float64
	deadAfter                int64
	autovacuums, autoanalyze int64
	vacuumNote               string
}

func runLayout(ctx context.Context, server, layout string, cfg config) (*report, error) {
	if layout != "plain" && layout != "partitioned" {
		return nil, fmt.Errorf("unknown layout %q", layout)
	}
	r := &report{layout: layout}
	dbURL, err := freshDatabase(ctx, server, "idemgen_scale_"+layout)
	if err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = int32(cfg.conc + 8)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	partitioned := layout == "partitioned"
	if partitioned {
		err = pgstore.MigratePartitioned(ctx, pool)
	} else {
		err = pgstore.Migrate(ctx, pool)
	}
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (id bigserial PRIMARY KEY, tenant text NOT NULL, amount bigint NOT NULL)`); err != nil {
		return nil, fmt.Errorf("bench schema: %w", err)
	}
	st := pgstore.New(pool, pgstore.Options{Partitioned: partitioned, ReservedConns: -1, Limits: pgstore.Limits{Records: -1}})
	if err := checkDigestSQL(ctx, pool); err != nil {
		return nil, err
	}

	progress("%s: empty table", layout)
	// A few filled records so that replays have something to read on the "empty" table too.
	if err := fill(ctx, pool, cfg, 1, 1000, false); err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE idempotency_records"); err != nil {
		return nil, err
	}
	warm := cfg
	warm.duration = cfg.duration / 5
	_ = measure(ctx, warm, newKeys(st, "warm-up")) // connections, caches, plans
	_ = measure(ctx, warm, replays(st, cfg, 1000))
	r.emptyNew = measure(ctx, cfg, newKeys(st, "empty"))
	r.emptyReplay = measure(ctx, cfg, replays(st, cfg, 1000))

	progress("%s: filling %d live and %d expired records", layout, cfg.records, cfg.expired)
	start := time.Now()
	if partitioned {
		if err := pastPartition(ctx, pool); err != nil {
			return nil, err
		}
	}
	if err := fillAll(ctx, pool, cfg); err != nil {
		return nil, err
	}
	r.fill = time.Since(start)
	progress("%s: filled in %v; VACUUM ANALYZE", layout, r.fill.Round(time.Second))
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE idempotency_records"); err != nil {
		return nil, err
	}
	if err := sizes(ctx, pool, r); err != nil {
		return nil, err
	}
	av0, an0, err := autovacuum(ctx, pool)
	if err != nil {
		return nil, err
	}

	progress("%s: full table", layout)
	r.fullNew = measure(ctx, cfg, newKeys(st, "full"))
	r.fullReplay = measure(ctx, cfg, replays(st, cfg, cfg.records))

	progress("%s: retention under load", layout)
	r.beforeRetention = measure(ctx, cfg, newKeys(st, "before"))
	var (
		wg      sync.WaitGroup
		retErr  error
		removed int64
		took    time.Duration
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(cfg.duration / 10)
		t0 := time.Now()
		if partitioned {
			removed, retErr = (&pgstore.PartitionSweeper{Pool: pool}).SweepOnce(ctx)
		} else {
			removed, retErr = (&pgstore.Sweeper{Pool: pool}).SweepOnce(ctx)
		}
		took = time.Since(t0)
		close(stop)
	}()
	r.during = measureUntil(ctx, cfg, newKeys(st, "during"), stop)
	wg.Wait()
	if retErr != nil {
		return nil, fmt.Errorf("retention: %w", retErr)
	}
	r.retention, r.removed = took, removed
	if partitioned {
		// The partition sweeper reports the planner's estimate; count what went.
		var left int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_records WHERE expires_at <= now() - interval '1 minute'").Scan(&left); err != nil {
			return nil, err
		}
		r.vacuumNote = fmt.Sprintf("%d expired rows left", left)
	}
	// Give autovacuum a moment to react, as it would in service, then read its counters.
	time.Sleep(min(cfg.duration, 5*time.Second))
	av1, an1, err := autovacuum(ctx, pool)
	if err != nil {
		return nil, err
	}
	r.autovacuums, r.autoanalyze = av1-av0, an1-an0
	if err := pool.QueryRow(ctx, `SELECT COALESCE(sum(n_dead_tup), 0) FROM pg_stat_user_tables
		WHERE relname LIKE 'idempotency\_records%'`).Scan(&r.deadAfter); err != nil {
		return nil, err
	}
	return r, nil
}

// freshDatabase drops and creates database name on the server and returns its URL.
func freshDatabase(ctx context.Context, server, name string) (string, error) {
	c, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// checkDigestSQL checks that the fill's SQL digests are pgstore.Digest's, so that the records
// it writes are the ones the store reads.
func checkDigestSQL(ctx context.Context, pool *pgxpool.Pool) error {
	id := store.ID{Scope: "tenant-7", Key: "key-abc"}
	scope, key := pgstore.Digest(id)
	var gotScope int64
	var gotKey [16]byte
	if err := pool.QueryRow(ctx, "SELECT "+sqlScopeID+", "+sqlKeyID+" FROM (SELECT $1::text AS s, $2::text AS k) x", id.Scope, id.Key).Scan(&gotScope, &gotKey); err != nil {
		return err
	}
	if gotScope != scope || gotKey != key {
		return errors.New("the fill's SQL digests differ from pgstore.Digest")
	}
	return nil
}

// sqlScopeID and sqlKeyID are pgstore.Digest in SQL, of the columns s (scope) and k (key):
// SHA-256 over "idemgen/scope/v1\x00" and the scope, and over "idemgen/record/v1\x00", the
// scope's length (big-endian int8), the scope and the key (docs/runtime.md shows them too).
const (
	sqlScopeID = `('x' || encode(substr(sha256('\x6964656d67656e2f73636f70652f763100'::bytea || convert_to(s, 'UTF8')), 1, 8), 'hex'))::bit(64)::bigint`
	sqlKeyID   = `encode(substr(sha256('\x6964656d67656e2f7265636f72642f763100'::bytea || int8send(octet_length(s)::bigint)
		|| convert_to(s, 'UTF8') || convert_to(k, 'UTF8')), 1, 16), 'hex')::uuid`
)

// Record g of the fill: tenant g mod tenants, key "key-" + md5(g), one of five operations, a
// ~200-byte JSON body and a Location header; live records expire uniformly over the next 24 h,
// expired ones over the last hour of yesterday (UTC), so that on the partitioned layout they
// fill yesterday's partition, which retention then drops.
func scopeOf(cfg config, g int64) string { return fmt.Sprintf("tenant-%d", g%int64(cfg.tenants)) }
func keyOf(g int64) string {
	s := md5.Sum([]byte(fmt.Sprint(g)))
	return "key-" + hex.EncodeToString(s[:])
}

// fill inserts records from..to in one statement.
func fill(ctx context.Context, pool *pgxpool.Pool, cfg config, from, to int64, expired bool) error {
	expiry := `now() + interval '1 minute' + (g % 86400) * interval '1 second'`
	if expired {
		expiry = `date_trunc('day', now()) - interval '1 hour' + (g % 3600) * interval '1 second'`
	}
	_, err := pool.Exec(ctx, `INSERT INTO idempotency_records
	(scope_id, key_id, created_at, expires_at, locked_until, fencing_token, fingerprint, fingerprint_version,
	 response_status, body_omitted, operation, response_headers, response_body)
SELECT `+sqlScopeID+`, `+sqlKeyID+`, e - interval '24 hours', e, e - interval '24 hours', g,
	sha256(int8send(g)), 1, CASE WHEN g % 10 = 0 THEN 200 ELSE 201 END, false,
	(ARRAY['createPayment','capturePayment','createRefund','createCustomer','createTransfer'])[1 + g % 5],
	convert_to('{"Content-Type":["application/json"],"Location":["/v1/payments/pay_' || m || '"]}', 'UTF8'),
	convert_to('{"id":"pay_' || m || '","object":"payment","amount":' || (g % 100000) ||
		',"currency":"eur","status":"succeeded","customer":"cus_' || md5(m) ||
		'","description":"order ' || substr(md5(k), 1, 12) || '","created":' || extract(epoch from now())::bigint || '}', 'UTF8')
FROM (SELECT g, 'tenant-' || (g % $3) AS s, 'key-' || md5(g::text) AS k, md5(g::text || 'p') AS m,
             `+expiry+` AS e
      FROM generate_series($1::bigint, $2::bigint) g) x`, from, to, cfg.tenants)
	return err
}

// fillAll writes the live records 1001..records and the expired ones, in chunks, on two
// connections at once (random keys make the primary key's inserts random, as in service).
func fillAll(ctx context.Context, pool *pgxpool.Pool, cfg config) error {
	type chunk struct {
		from, to int64
		expired  bool
	}
	chunks := make(chan chunk)
	go func() {
		defer close(chunks)
		for from := int64(1001); from <= cfg.records; from += cfg.chunk {
			chunks <- chunk{from, min(from+cfg.chunk-1, cfg.records), false}
		}
		for from := int64(1); from <= cfg.expired; from += cfg.chunk {
			chunks <- chunk{cfg.records + from, cfg.records + min(from+cfg.chunk-1, cfg.expired), true}
		}
	}()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		done atomic.Int64
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range chunks {
				if err := fill(ctx, pool, cfg, c.from, c.to, c.expired); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				progress("  %d records", done.Add(c.to-c.from+1))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pastPartition adds, to the partitioned layout, yesterday's partition (UTC days, the
// PartitionSweeper's default width), where the expired records go: its range has ended, so
// retention drops it.
func pastPartition(ctx context.Context, pool *pgxpool.Pool) error {
	var day time.Time
	if err := pool.QueryRow(ctx, "SELECT date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 day'").Scan(&day); err != nil {
		return err
	}
	name := "idempotency_records_p" + day.UTC().Format("20060102t1504")
	if _, err := pool.Exec(ctx, "CREATE TABLE "+name+" (LIKE idempotency_records)"); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, "ALTER TABLE idempotency_records ATTACH PARTITION "+name+" FOR VALUES FROM ('"+
		day.UTC().Format(time.RFC3339)+"') TO ('"+day.Add(24*time.Hour).UTC().Format(time.RFC3339)+"')")
	return err
}

// sizes reads heap, index and TOAST bytes of the records (every partition) and the stored
// response's mean size.
func sizes(ctx context.Context, pool *pgxpool.Pool, r *report) error {
	err := pool.QueryRow(ctx, `SELECT COALESCE(sum(pg_relation_size(c.oid)), 0),
		COALESCE(sum(pg_indexes_size(c.oid)), 0),
		COALESCE(sum(pg_total_relation_size(c.oid) - pg_relation_size(c.oid) - pg_indexes_size(c.oid)), 0)
	FROM pg_class c WHERE c.relkind = 'r' AND (c.relname = 'idempotency_records' OR c.relname LIKE 'idempotency\_records\_p%')`).
		Scan(&r.heap, &r.index, &r.toast)
	if err != nil {
		return err
	}
	return pool.QueryRow(ctx, `SELECT count(*), avg(2 + length(response_headers) + length(response_body)) FROM idempotency_records`).
		Scan(&r.rows, &r.response)
}

// autovacuum sums autovacuum and autoanalyze runs on the records' tables.
func autovacuum(ctx context.Context, pool *pgxpool.Pool) (vac, an int64, err error) {
	err = pool.QueryRow(ctx, `SELECT COALESCE(sum(autovacuum_count), 0), COALESCE(sum(autoanalyze_count), 0)
	FROM pg_stat_user_tables WHERE relname LIKE 'idempotency\_records%'`).Scan(&vac, &an)
	return vac, an, err
}

// op is one operation of a measurement; worker w, n-th call.
type op func(ctx context.Context, w int, n int64) error

// response is the ~200-byte response each new key stores, like the fill's.
func response() store.Response {
	return store.Response{Status: 201, Header: []byte(`{"Content-Type":["application/json"],"Location":["/v1/payments/pay_0123456789abcdef0123456789abcdef"]}`),
		Body: []byte(`{"id":"pay_0123456789abcdef0123456789abcdef","object":"payment","amount":1500,"currency":"eur","status":"succeeded","customer":"cus_0123456789abcdef0123456789abcdef","description":"order 0123456789ab","created":1764547200}`)}
}

// newKeys is a new key per call: claim, the handler's INSERT, commit.
func newKeys(st *pgstore.Store, label string) op {
	run := fmt.Sprintf("%s-%d", label, time.Now().UnixNano())
	return func(ctx context.Context, w int, n int64) error {
		tenant := fmt.Sprintf("tenant-%d", rand.IntN(1000))
		c := claimOf(tenant, fmt.Sprintf("new-%s-%d-%d", run, w, n))
		tx, rec, err := st.BeginAtomic(ctx, c)
		if err != nil {
			return err
		}
		if rec != nil {
			return errors.New("a new key found a record")
		}
		if _, err := tx.DB().Exec(ctx, "INSERT INTO payments (tenant, amount) VALUES ($1, $2)", tenant, 1500); err != nil {
			_ = tx.Abort(ctx)
			return err
		}
		return tx.Commit(ctx, response())
	}
}

// replays reads a random filled record per call. Past the first thousand it picks records that
// expire at least two hours after the fill (g mod 86400 ≥ 7200): those are still live however
// long the fill took.
func replays(st *pgstore.Store, cfg config, upto int64) op {
	return func(ctx context.Context, _ int, _ int64) error {
		g := 1 + rand.Int64N(upto)
		for upto > 86400 && g%86400 < 7200 {
			g = 1 + rand.Int64N(upto)
		}
		tx, rec, err := st.BeginAtomic(ctx, claimOf(scopeOf(cfg, g), keyOf(g)))
		if err != nil {
			return err
		}
		if tx != nil {
			_ = tx.Abort(ctx)
		}
		if rec == nil {
			return fmt.Errorf("record %d not found", g)
		}
		return nil
	}
}

func claimOf(scope, key string) store.Claim {
	return store.Claim{ID: store.ID{Scope: scope, Key: key}, Operation: "createPayment",
		Fingerprint: canonical.Fingerprint{Version: canonical.Version}, Retention: 24 * time.Hour}
}

func measure(ctx context.Context, cfg config, f op) phase {
	return measureUntil(ctx, cfg, f, nil)
}

// measureUntil runs f on cfg.conc workers for cfg.duration, or until stop closes (but at least
// cfg.duration when stop is nil).
func measureUntil(ctx context.Context, cfg config, f op, stop <-chan struct{}) phase {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if stop == nil {
		t := make(chan struct{})
		time.AfterFunc(cfg.duration, func() { close(t) })
		stop = t
	}
	var (
		ops, errs atomic.Int64
		mu        sync.Mutex
		lat       []time.Duration
		wg        sync.WaitGroup
		firstErr  atomic.Value
	)
	start := time.Now()
	for w := range cfg.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for n := int64(0); ; n++ {
				select {
				case <-stop:
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
					return
				default:
				}
				t0 := time.Now()
				octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
				err := f(octx, w, n)
				ocancel()
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				mine = append(mine, time.Since(t0))
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	p := phase{ops: ops.Load(), errs: errs.Load(), elapsed: time.Since(start)}
	if e := firstErr.Load(); e != nil {
		progress("  %d errors, the first: %v", p.errs, e)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		p.p50, p.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return p
}

func printReport(cfg config, rs []*report) {
	fmt.Printf("### Scale: %s live records (+%s expired), %d tenants, %d workers × %v per measurement\n\n",
		thousands(cfg.records), thousands(cfg.expired), cfg.tenants, cfg.conc, cfg.duration)
	fmt.Println("| layout | measurement | empty table | full table | full / empty |")
	fmt.Println("|---|---|---:|---:|---:|")
	for _, r := range rs {
		row := func(name string, e, f float64, unit string) {
			fmt.Printf("| %s | %s | %.0f%s | %.0f%s | %.2f |\n", r.layout, name, e, unit, f, unit, f/e)
		}
		row("new key, ops/s", r.emptyNew.rate(), r.fullNew.rate(), "")
		row("new key, p99 ms", ms(r.emptyNew.p99), ms(r.fullNew.p99), "")
		row("replay, ops/s", r.emptyReplay.rate(), r.fullReplay.rate(), "")
		fmt.Printf("| %s | replay, p99 ms | %.2f | %.2f | %.2f |\n", r.layout, ms(r.emptyReplay.p99), ms(r.fullReplay.p99), ms(r.fullReplay.p99)/ms(r.emptyReplay.p99))
	}
	fmt.Println()
	fmt.Println("| layout | fill | rows | heap B/record | index B/record | TOAST B/record | total B/record | stored response B | total − response B |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		n := float64(r.rows)
		total := float64(r.heap+r.index+r.toast) / n
		fmt.Printf("| %s | %v (%.0f rows/s) | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", r.layout, r.fill.Round(time.Second),
			float64(cfg.records+cfg.expired)/r.fill.Seconds(), thousands(r.rows), float64(r.heap)/n, float64(r.index)/n, float64(r.toast)/n,
			total, r.response, total-r.response)
	}
	fmt.Println()
	fmt.Println("| layout | retention | removed | took | rows/s | new key p99 before, ms | p99 while it ran, ms | ops/s before | ops/s while it ran | autovacuum / autoanalyze runs | dead tuples after |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		how := "Sweeper: DELETE batches of 500"
		if r.layout == "partitioned" {
			how = "PartitionSweeper: DETACH CONCURRENTLY + DROP (rows: estimate; " + r.vacuumNote + ")"
		}
		fmt.Printf("| %s | %s | %s | %v | %.0f | %.2f | %.2f | %.0f | %.0f | %d / %d | %s |\n", r.layout, how, thousands(r.removed),
			r.retention.Round(time.Millisecond), float64(r.removed)/r.retention.Seconds(), ms(r.beforeRetention.p99), ms(r.during.p99),
			r.beforeRetention.rate(), r.during.rate(), r.autovacuums, r.autoanalyze, thousands(r.deadAfter))
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func thousands(n int64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchscale: "+format+"\n", args...)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchscale: "+format+"\n", args...)
	os.Exit(1)
}
