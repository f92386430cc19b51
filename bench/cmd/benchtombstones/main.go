// Command benchtombstones measures the PostgreSQL store's tombstones (issue 39, docs/runtime.md
// "Tombstones after the retention") at scale, on the plain layout:
//
//   - what a new key pays for writing its record's tombstone at completion: new keys with
//     tombstone 720h against tombstone 0 (none), alternating rounds in one run, the ratio of
//     the medians;
//
//   - bytes per tombstone: the table filled in SQL with N tombstones (generate_series: random
//     digests and fingerprints, completions spread over the last 30 days, a day's worth past
//     their horizon), then VACUUM: heap and each index, divided by the rows;
//
//   - reads at N tombstones: a new key's lookup (no record: the read probes the tombstones too)
//     and a remembered key's (its tombstone answers), against the same lookups on the empty
//     table;
//
//   - the sweeper at N tombstones: Sweeper.SweepOnce deleting the day's worth past their
//     horizon (rows/s, time), then an idle sweep (nothing to delete: the cost of every later
//     minute's sweep).
//
//     scripts/with-postgres.sh go run ./bench/cmd/benchtombstones -tombstones 10000000   (make bench-tombstones)
//     scripts/with-postgres.sh go run ./bench/cmd/benchtombstones -short                 (proves it runs)
//
// It prints Markdown to stdout; progress goes to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
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
	tombstones int64
	conc       int
	duration   time.Duration
	rounds     int
	chunk      int64
}

func main() {
	var (
		n        = flag.Int64("tombstones", 10_000_000, "tombstones to fill the table with")
		conc     = flag.Int("concurrency", 8, "closed-loop workers per measurement")
		duration = flag.Duration("duration", 5*time.Second, "time per measurement")
		rounds   = flag.Int("rounds", 5, "alternating rounds of the new-key A/B")
		short    = flag.Bool("short", false, "smoke mode: 20,000 tombstones, 0.5 s measurements, 1 round")
	)
	flag.Parse()
	cfg := config{tombstones: *n, conc: *conc, duration: *duration, rounds: *rounds, chunk: 500_000}
	if *short {
		cfg.tombstones, cfg.duration, cfg.conc, cfg.rounds, cfg.chunk = 20_000, 500*time.Millisecond, 4, 1, 10_000
	}
	server := os.Getenv("DATABASE_URL")
	if server == "" {
		fatalf("DATABASE_URL is not set: run under scripts/with-postgres.sh (make bench-tombstones)")
	}
	if err := run(context.Background(), server, cfg); err != nil {
		fatalf("%v", err)
	}
}

func run(ctx context.Context, server string, cfg config) error {
	dbURL, err := freshDatabase(ctx, server, "idemgen_tombstones")
	if err != nil {
		return err
	}
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	pcfg.MaxConns = int32(cfg.conc + 4)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (id bigserial PRIMARY KEY, tenant text NOT NULL, amount bigint NOT NULL)`); err != nil {
		return err
	}
	st := pgstore.New(pool, pgstore.Options{ReservedConns: -1, Limits: pgstore.Limits{Records: -1}})

	progress("new keys: tombstone 720h against none, %d alternating rounds", cfg.rounds)
	warm := cfg
	warm.duration = cfg.duration / 5
	_ = measure(ctx, warm, newKeys(st, "warm", 720*time.Hour))
	var with, without, ratios []float64
	var walWith, walWithout, opsWith, opsWithout int64
	walled := func(label string, tomb time.Duration, wal, ops *int64) phase {
		before := walBytes(ctx, pool)
		p := measure(ctx, cfg, newKeys(st, label, tomb))
		*wal += walBytes(ctx, pool) - before
		*ops += p.ops
		return p
	}
	for i := range cfg.rounds {
		// Alternate which goes first, so that a drift of the machine's load favours neither.
		var w, o phase
		if i%2 == 0 {
			w = walled(fmt.Sprintf("with-%d", i), 720*time.Hour, &walWith, &opsWith)
			o = walled(fmt.Sprintf("without-%d", i), 0, &walWithout, &opsWithout)
		} else {
			o = walled(fmt.Sprintf("without-%d", i), 0, &walWithout, &opsWithout)
			w = walled(fmt.Sprintf("with-%d", i), 720*time.Hour, &walWith, &opsWith)
		}
		if w.errs > 0 || o.errs > 0 {
			return fmt.Errorf("new keys failed: %d and %d errors (%v)", w.errs, o.errs, w.err)
		}
		with, without = append(with, w.rate()), append(without, o.rate())
		ratios = append(ratios, w.rate()/o.rate())
	}
	keep := fmt.Sprintf("tenant-keep-%d", time.Now().UnixNano())
	if err := remember(ctx, st, keep); err != nil {
		return err
	}
	empty := lookups(ctx, st, cfg, keep)
	if _, err := pool.Exec(ctx, "TRUNCATE idempotency_tombstones, idempotency_records, payments"); err != nil {
		return err
	}

	progress("filling %d tombstones", cfg.tombstones)
	start := time.Now()
	if err := fill(ctx, pool, cfg); err != nil {
		return err
	}
	fillTime := time.Since(start)
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE idempotency_tombstones"); err != nil {
		return err
	}
	b, err := sizes(ctx, pool)
	if err != nil {
		return err
	}
	if err := remember(ctx, st, keep); err != nil {
		return err
	}
	full := lookups(ctx, st, cfg, keep)

	progress("sweeping the tombstones past their horizon")
	sw := &sweepReport{}
	sweeper := &pgstore.Sweeper{Pool: pool, Observer: sw}
	start = time.Now()
	if _, err := sweeper.SweepOnce(ctx); err != nil {
		return err
	}
	sweep, swept := time.Since(start), sw.last.Tombstones
	start = time.Now()
	if _, err := sweeper.SweepOnce(ctx); err != nil {
		return err
	}
	idle := time.Since(start)

	fmt.Printf("### Tombstones: %d on the plain table (`make bench-tombstones`)\n\n", b.rows)
	fmt.Printf("Filled in %s. %d workers, %s per measurement.\n\n", fillTime.Round(time.Second), cfg.conc, cfg.duration)
	fmt.Printf("| bytes per tombstone | heap | primary key | forget_at index | total |\n|---|---:|---:|---:|---:|\n")
	per := func(n int64) string { return fmt.Sprintf("%.1f", float64(n)/float64(b.rows)) }
	fmt.Printf("| measured (relation size / rows) | %s | %s | %s | %s |\n\n", per(b.heap), per(b.pkey), per(b.forget), per(b.heap+b.pkey+b.forget))
	fmt.Printf("| new keys/s (medians of %d rounds) | with a tombstone | without | ratio (median of the rounds' ratios; min–max) |\n|---|---:|---:|---:|\n", cfg.rounds)
	fmt.Printf("| BeginAtomic + INSERT + Commit | %.0f | %.0f | %.3f (%.3f–%.3f) |\n", median(with), median(without), median(ratios), slices.Min(ratios), slices.Max(ratios))
	if opsWith > 0 && opsWithout > 0 {
		ww, wo := float64(walWith)/float64(opsWith), float64(walWithout)/float64(opsWithout)
		fmt.Printf("| WAL bytes per new key (pg_stat_wal) | %.0f | %.0f | %.3f |\n", ww, wo, ww/wo)
	}
	fmt.Println()
	fmt.Printf("| lookup (p50 / p99) | empty table | at %d tombstones |\n|---|---:|---:|\n", b.rows)
	fmt.Printf("| a new key (no record: the read probes the tombstones) | %s | %s |\n", empty.fresh, full.fresh)
	fmt.Printf("| a remembered key (its tombstone answers) | %s | %s |\n\n", empty.remembered, full.remembered)
	fmt.Printf("| sweeper at %d tombstones | time | tombstones deleted | per second |\n|---|---:|---:|---:|\n", b.rows)
	fmt.Printf("| the day's worth past their horizon | %s | %d | %.0f |\n", sweep.Round(time.Millisecond), swept, float64(swept)/sweep.Seconds())
	fmt.Printf("| an idle sweep (nothing to delete) | %s | 0 | |\n", idle.Round(time.Microsecond))
	return nil
}

// fill writes cfg.tombstones tombstones in chunks: digests and fingerprints random, completions
// uniform over the last 30 days, forget_at 30 days after completion, and a day's worth more that
// completed 30 to 31 days ago (past their horizon: the sweeper's work).
func fill(ctx context.Context, pool *pgxpool.Pool, cfg config) error {
	total := cfg.tombstones + cfg.tombstones/30
	for from := int64(1); from <= total; from += cfg.chunk {
		to := min(from+cfg.chunk-1, total)
		past := cfg.tombstones
		_, err := pool.Exec(ctx, `INSERT INTO idempotency_tombstones
	(scope_id, key_id, completed_at, forget_at, fingerprint_version, status_class, fingerprint)
SELECT (random() * 9.2e18)::bigint, gen_random_uuid(), c, c + interval '30 days', 1,
	CASE WHEN g % 10 = 0 THEN 4 ELSE 2 END, substring(uuid_send(gen_random_uuid()) from 1 for 16)
FROM generate_series($1::bigint, $2::bigint) AS g,
	LATERAL (SELECT now() - CASE WHEN g > $3 THEN interval '30 days' + random() * interval '1 day'
		ELSE random() * interval '30 days' END AS c) AS t`, from, to, past)
		if err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		progress("  %d/%d", to, total)
	}
	return nil
}

// walBytes is the server's WAL written so far (pg_stat_wal, PostgreSQL 14 and later; 0 when
// unknown).
func walBytes(ctx context.Context, pool *pgxpool.Pool) int64 {
	var n int64
	_ = pool.QueryRow(ctx, "SELECT wal_bytes::bigint FROM pg_stat_wal").Scan(&n)
	return n
}

// bytes are the tombstones' relation sizes after VACUUM.
type bytes struct{ rows, heap, pkey, forget int64 }

func sizes(ctx context.Context, pool *pgxpool.Pool) (bytes, error) {
	var b bytes
	err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM idempotency_tombstones),
	pg_relation_size('idempotency_tombstones'), pg_relation_size('idempotency_tombstones_pkey'),
	pg_relation_size('idempotency_tombstones_forget_at_idx')`).Scan(&b.rows, &b.heap, &b.pkey, &b.forget)
	return b, err
}

// remember completes one record of tenant's key "kept" with a one-microsecond retention and a
// tombstone, so that its lookups meet the tombstone.
func remember(ctx context.Context, st *pgstore.Store, tenant string) error {
	c := claimOf(tenant, "kept", 720*time.Hour)
	c.Retention = time.Microsecond
	tx, rec, err := st.BeginAtomic(ctx, c)
	if err != nil || rec != nil {
		return fmt.Errorf("remember: %v %v", rec, err)
	}
	if err := tx.Commit(ctx, response()); err != nil {
		return err
	}
	time.Sleep(10 * time.Millisecond)
	rec2, found, err := st.Get(ctx, c.ID)
	if err != nil || !found || rec2.State != store.Expired {
		return fmt.Errorf("remember: the tombstone did not answer: %+v %v %v", rec2, found, err)
	}
	return nil
}

// lookupTimes are the lookups' latencies.
type lookupTimes struct{ fresh, remembered string }

func lookups(ctx context.Context, st *pgstore.Store, cfg config, tenant string) lookupTimes {
	fresh := measure(ctx, cfg, func(ctx context.Context, w int, n int64) error {
		_, found, err := st.Get(ctx, store.ID{Scope: "tenant-1", Key: fmt.Sprintf("fresh-%d-%d-%d", w, n, rand.Int64())})
		if err == nil && found {
			err = errors.New("a fresh key found a record")
		}
		return err
	})
	kept := measure(ctx, cfg, func(ctx context.Context, _ int, _ int64) error {
		rec, found, err := st.Get(ctx, store.ID{Scope: tenant, Key: "kept"})
		if err == nil && (!found || rec.State != store.Expired) {
			err = errors.New("the remembered key has no tombstone")
		}
		return err
	})
	return lookupTimes{fresh: fresh.String(), remembered: kept.String()}
}

func claimOf(scope, key string, tombstone time.Duration) store.Claim {
	return store.Claim{ID: store.ID{Scope: scope, Key: key}, Operation: "createPayment",
		Fingerprint: canonical.Fingerprint{Version: canonical.Version, Sum: [32]byte{1, 2, 3}}, Retention: 24 * time.Hour, Tombstone: tombstone}
}

func response() store.Response {
	return store.Response{Status: 201, Header: []byte(`{"Content-Type":["application/json"],"Location":["/v1/payments/pay_0123456789abcdef0123456789abcdef"]}`),
		Body: []byte(`{"id":"pay_0123456789abcdef0123456789abcdef","object":"payment","amount":1500,"currency":"eur","status":"succeeded","created":1764547200}`)}
}

// newKeys is a new key per call: claim, the handler's INSERT, commit, with tombstone.
func newKeys(st *pgstore.Store, label string, tombstone time.Duration) op {
	run := fmt.Sprintf("%s-%d", label, time.Now().UnixNano())
	return func(ctx context.Context, w int, n int64) error {
		tenant := fmt.Sprintf("tenant-%d", rand.IntN(1000))
		tx, rec, err := st.BeginAtomic(ctx, claimOf(tenant, fmt.Sprintf("new-%s-%d-%d", run, w, n), tombstone))
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

// op is one operation of a measurement: worker w's n-th call.
type op func(ctx context.Context, w int, n int64) error

// phase is one measurement's result.
type phase struct {
	ops, errs int64
	elapsed   time.Duration
	p50, p99  time.Duration
	err       error
}

func (p phase) rate() float64 { return float64(p.ops) / p.elapsed.Seconds() }

func (p phase) String() string {
	return fmt.Sprintf("%s / %s", p.p50.Round(time.Microsecond), p.p99.Round(time.Microsecond))
}

// measure runs f on cfg.conc closed-loop workers for cfg.duration.
func measure(ctx context.Context, cfg config, f op) phase {
	var (
		ops, errs atomic.Int64
		mu        sync.Mutex
		lat       []time.Duration
		wg        sync.WaitGroup
		first     error
	)
	stop := time.Now().Add(cfg.duration)
	start := time.Now()
	for w := range cfg.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for n := int64(0); time.Now().Before(stop); n++ {
				t := time.Now()
				if err := f(ctx, w, n); err != nil {
					errs.Add(1)
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					continue
				}
				mine = append(mine, time.Since(t))
				ops.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	p := phase{ops: ops.Load(), errs: errs.Load(), elapsed: time.Since(start), err: first}
	slices.Sort(lat)
	if len(lat) > 0 {
		p.p50, p.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return p
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// sweepReport keeps the last store.SweepReport.
type sweepReport struct{ last store.SweepReport }

func (s *sweepReport) Swept(int64)                   {}
func (s *sweepReport) SweepDone(r store.SweepReport) { s.last = r }

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

func progress(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchtombstones: "+format+"\n", args...)
	os.Exit(1)
}
