// Command benchreconcile measures reconciliation at scale (the target: a report of one
// million lines against ten million records in under a minute, memory bounded). It fills a fresh
// database in SQL (generate_series) with completed lease-mode records and their provider calls,
// spread over ten days, and a few uncertain ones; writes the provider's report of the most recent
// calls as CSV (a few with another amount, a few failed, a few missing, some foreign charges);
// then, in the same run, times
//
//   - the baseline: reading and classifying the report with a call log that knows no key (the
//     report's own cost: CSV parsing, key checks, the set of keys), and
//   - reconcile.Run against PostgreSQL,
//
// and reports both, their ratio, lines per second, the Go heap's peak during each, and the
// findings, which must be exactly the ones the fill planted.
//
//	scripts/with-postgres.sh go run ./bench/cmd/benchreconcile                (make bench-reconcile)
//	scripts/with-postgres.sh go run ./bench/cmd/benchreconcile -short         (CI: proves it runs)
//
// It prints Markdown to stdout; progress goes to stderr.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/reconcile"
	"github.com/idemgen/idemgen/runtime/store"
)

// config is the run's parameters.
type config struct {
	records, lines int64
	chunk          int64
	batch          int
	// span is how far back the calls' starts go (the newest at the base time).
	span time.Duration
}

func main() {
	var (
		records = flag.Int64("records", 10_000_000, "records (and their provider calls) to fill the database with")
		lines   = flag.Int64("lines", 1_000_000, "lines of the provider's report: the most recent calls")
		batch   = flag.Int("batch", 0, "report lines per call log read (reconcile.Options.BatchSize; 0: its default)")
		short   = flag.Bool("short", false, "smoke mode: 20,000 records, 5,000 lines (CI)")
	)
	flag.Parse()
	cfg := config{records: *records, lines: *lines, chunk: 500_000, batch: *batch, span: 10 * 24 * time.Hour}
	if *short {
		cfg.records, cfg.lines, cfg.chunk = 20_000, 5_000, 10_000
	}
	if cfg.lines > cfg.records {
		fatalf("-lines must not exceed -records")
	}
	server := os.Getenv("DATABASE_URL")
	if server == "" {
		fatalf("DATABASE_URL is not set: run under scripts/with-postgres.sh (make bench-reconcile)")
	}
	if err := run(context.Background(), server, cfg); err != nil {
		fatalf("%v", err)
	}
}

// The planted desynchronisations, by call number g (1..records), among the report's calls.
func uncertain(g int64) bool     { return g%1000 == 7 }  // running, lease ended, charged
func otherAmount(g int64) bool   { return g%200 == 3 }   // charged 1 cent more
func failedAtProv(g int64) bool  { return g%200 == 5 }   // the provider says failed
func missingAtProv(g int64) bool { return g%200 == 9 }   // no line in the report
func amount(g int64) int64       { return 1000 + g%100 } // what the handler recorded
func providerKey(g int64) string { return hex.EncodeToString(sha(g)) }
func sha(g int64) []byte         { s := sha256.Sum256([]byte(fmt.Sprint(g))); return s[:] }

// started is call g's start: the newest (g = records) at base, the oldest span before.
func (c config) started(base time.Time, g int64) time.Time {
	step := c.span.Microseconds() / c.records
	return base.Add(-time.Duration((c.records-g)*step) * time.Microsecond)
}

type result struct {
	fill, report time.Duration
	baseline     measured
	full         []measured // by concurrency
	res          *reconcile.Result
	want         map[reconcile.Class]int64
	tableBytes   int64
}

// measured is one timed pass over the report (conc: its reads in flight).
type measured struct {
	elapsed  time.Duration
	peakHeap uint64
	conc     int
}

func run(ctx context.Context, server string, cfg config) error {
	dbURL, err := freshDatabase(ctx, server, "idemgen_reconcile_bench")
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		return err
	}
	r := &result{}
	var base time.Time
	if err := pool.QueryRow(ctx, "SELECT date_trunc('second', now())").Scan(&base); err != nil {
		return err
	}
	progress("fill: %d records and calls", cfg.records)
	start := time.Now()
	if err := fillAll(ctx, pool, cfg, base); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	for _, t := range []string{"idempotency_records", "idempotency_provider_calls"} {
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+t); err != nil {
			return err
		}
	}
	r.fill = time.Since(start)
	if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('idempotency_records') + pg_total_relation_size('idempotency_provider_calls')`).Scan(&r.tableBytes); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "benchreconcile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "report.csv")
	start = time.Now()
	if r.want, err = writeReport(file, cfg, base); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	r.report = time.Since(start)

	opts := reconcile.Options{BatchSize: cfg.batch, Margin: 5 * time.Minute}
	progress("baseline: the report alone")
	if r.baseline, _, err = measure(ctx, nobody{}, file, opts); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	st := pgstore.New(pool, pgstore.Options{})
	for _, conc := range []int{1, 4} { // reconcile.Options.Concurrency
		progress("reconcile: %d lines against %d records, %d reads in flight", cfg.lines, cfg.records, conc)
		opts.Concurrency = conc
		m, res, err := measure(ctx, st, file, opts)
		if err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		for c, n := range r.want {
			if res.Counts[c] != n {
				return fmt.Errorf("found %d %s, the fill planted %d (counts %v)", res.Counts[c], c, n, res.Counts)
			}
		}
		m.conc = conc
		r.full, r.res = append(r.full, m), res
	}
	printReport(cfg, r)
	return nil
}

// measure runs reconcile.Run over file and samples the Go heap meanwhile.
func measure(ctx context.Context, src store.Reconcilable, file string, opts reconcile.Options) (measured, *reconcile.Result, error) {
	goruntime.GC()
	f, err := os.Open(file)
	if err != nil {
		return measured{}, nil, err
	}
	defer f.Close()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms goruntime.MemStats
		for {
			goruntime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	res, err := reconcile.Run(ctx, src, f, opts)
	m := measured{elapsed: time.Since(start)}
	close(stop)
	wg.Wait()
	m.peakHeap = peak.Load()
	return m, res, err
}

// nobody is a call log that knows no call: the baseline's.
type nobody struct{}

func (nobody) FindCalls(context.Context, []string) ([]store.CallRecord, error) { return nil, nil }
func (nobody) ScanCalls(context.Context, time.Time, time.Time, func(*store.CallRecord) error) error {
	return nil
}
func (nobody) Resolve(context.Context, store.Resolution) (store.Resolved, error) {
	return store.Resolved{}, errors.New("read only")
}

// fill writes records and calls from..to: completed lease-mode records (201) and their settled
// calls, and, for the planted uncertain ones, running records whose lease ended an hour ago
// with their calls still started. Digests are made up (md5 of the number): reconciliation only
// joins calls and records on them.
func fill(ctx context.Context, pool *pgxpool.Pool, cfg config, base time.Time, from, to int64) error {
	step := cfg.span.Microseconds() / cfg.records
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO idempotency_records
	(scope_id, key_id, created_at, expires_at, locked_until, fencing_token, fingerprint, fingerprint_version,
	 response_status, body_omitted, operation, response_headers, response_body)
SELECT g % 1000, md5('r' || g)::uuid, s, s + interval '30 days',
	CASE WHEN g % 1000 = 7 THEN $4::timestamptz - interval '1 hour' ELSE s END, 1, sha256(int8send(g)), 1,
	CASE WHEN g % 1000 = 7 THEN 0 ELSE 201 END, false, 'createCharge',
	CASE WHEN g % 1000 = 7 THEN '\x'::bytea ELSE convert_to('{"Content-Type":["application/json"]}', 'UTF8') END,
	CASE WHEN g % 1000 = 7 THEN '\x'::bytea ELSE convert_to('{"id":"ch_' || g || '","amount":' || (1000 + g % 100) || ',"currency":"EUR","status":"succeeded"}', 'UTF8') END
FROM (SELECT g, $4::timestamptz - (($3::bigint - g) * $5::bigint) * interval '1 microsecond' AS s
      FROM generate_series($1::bigint, $2::bigint) g) x`, from, to, cfg.records, base, step)
	b.Queue(`INSERT INTO idempotency_provider_calls (provider_key, scope_id, key_id, label, operation, fingerprint,
	fingerprint_version, fencing_token, retention_us, amount, currency, started_at, outcome, response_status, settled_at)
SELECT sha256(convert_to(g::text, 'UTF8')), g % 1000, md5('r' || g)::uuid, 'charge', 'createCharge', sha256(int8send(g)),
	1, 1, 86400000000, 1000 + g % 100, 'EUR', s,
	CASE WHEN g % 1000 = 7 THEN 0 ELSE 1 END, CASE WHEN g % 1000 = 7 THEN 0 ELSE 201 END,
	CASE WHEN g % 1000 = 7 THEN NULL ELSE s END
FROM (SELECT g, $4::timestamptz - (($3::bigint - g) * $5::bigint) * interval '1 microsecond' AS s
      FROM generate_series($1::bigint, $2::bigint) g) x`, from, to, cfg.records, base, step)
	return pool.SendBatch(ctx, b).Close()
}

// fillAll fills in chunks on two connections.
func fillAll(ctx context.Context, pool *pgxpool.Pool, cfg config, base time.Time) error {
	chunks := make(chan [2]int64)
	go func() {
		defer close(chunks)
		for from := int64(1); from <= cfg.records; from += cfg.chunk {
			chunks <- [2]int64{from, min(from+cfg.chunk-1, cfg.records)}
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
				if err := fill(ctx, pool, cfg, base, c[0], c[1]); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				progress("  %d", done.Add(c[1]-c[0]+1))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeReport writes the provider's report of the calls records-lines+1..records, as a
// provider's CSV export (its charge id, the key, amount in minor units, currency, status, time),
// plus one foreign charge (not a provider key of idemgen's) per thousand lines, and returns the
// findings it planted.
func writeReport(file string, cfg config, base time.Time) (map[reconcile.Class]int64, error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, "id,idempotency_key,amount,currency,status,created")
	want := map[reconcile.Class]int64{}
	first := cfg.records - cfg.lines + 1
	var firstAt, lastAt time.Time
	for g := first; g <= cfg.records; g++ {
		at := cfg.started(base, g).Add(time.Second)
		if missingAtProv(g) {
			continue
		}
		if firstAt.IsZero() {
			firstAt = at
		}
		lastAt = at
		a, status := amount(g), "succeeded"
		switch {
		case uncertain(g):
			want[reconcile.ChargedNoRecord]++
		case otherAmount(g):
			a++
			want[reconcile.AmountMismatch]++
		case failedAtProv(g):
			status = "failed"
			want[reconcile.RecordNoCharge]++
		}
		fmt.Fprintf(w, "ch_%d,%s,%d,eur,%s,%s\n", g, providerKey(g), a, status, at.Format(time.RFC3339Nano))
		if g%1000 == 0 {
			fmt.Fprintf(w, "ch_manual_%d,,500,eur,succeeded,%s\n", g, at.Format(time.RFC3339Nano))
		}
	}
	// The calls the report does not mention, started in the record-side window
	// [first line, last line - margin): completed ones are record_no_charge.
	for g := first; g <= cfg.records; g++ {
		s := cfg.started(base, g)
		if missingAtProv(g) && !s.Before(firstAt) && s.Before(lastAt.Add(-5*time.Minute)) {
			want[reconcile.RecordNoCharge]++
		}
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return want, f.Close()
}

func printReport(cfg config, r *result) {
	fmt.Printf("### Reconciliation: %d report lines against %d records\n\n", cfg.lines, cfg.records)
	fmt.Printf("Fill %v (records and calls, %.1f GB with indexes); report written in %v.\n\n", r.fill.Round(time.Second),
		float64(r.tableBytes)/1e9, r.report.Round(time.Millisecond))
	row := func(name string, m measured) {
		fmt.Printf("| %s | %.2f s | %.0f | %.1f MB | %.1fx |\n", name, m.elapsed.Seconds(), float64(r.res.Lines)/m.elapsed.Seconds(),
			float64(m.peakHeap)/1e6, m.elapsed.Seconds()/r.baseline.elapsed.Seconds())
	}
	fmt.Println("| pass | time | lines/s | Go heap peak | / baseline |")
	fmt.Println("|---|---|---|---|---|")
	row("baseline: the report alone (no call log)", r.baseline)
	for _, m := range r.full {
		row(fmt.Sprintf("reconcile.Run on PostgreSQL, %d reads in flight", m.conc), m)
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("\nProcess peak RSS %.0f MB (the whole run). Findings: ", float64(ru.Maxrss)/1e3)
	for _, c := range reconcile.Classes {
		fmt.Printf("%s %d, ", c, r.res.Counts[c])
	}
	fmt.Printf("matched %d, foreign %d; window %s to %s.\n", r.res.Matched, r.res.Foreign,
		r.res.Window.From.Format(time.RFC3339), r.res.Window.To.Format(time.RFC3339))
}

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

func progress(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "benchreconcile: "+format+"\n", a...)
	os.Exit(1)
}
