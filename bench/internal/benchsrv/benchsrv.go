// Package benchsrv is the benchmark server of bench/cmd/benchserver: it serves, from one
// process, the conformance service (idemgen's generated code on the real runtime) and the
// baselines it is compared with (bench/internal/baseline), so every variant shares the same
// HTTP stack, pool and database:
//
//	/v1/...              the conformance service (atomic and lease operations)
//	/bench/bare          POST: decode and answer, no database
//	/bench/plain         POST: the business insert in a plain transaction
//	/bench/handwritten   POST: the blog recipe (three round trips for a new key, two for a replay)
//	/bench/floor         POST: the plain transaction that also inserts a record of idemgen's size
//	                     into floor_records (a copy of the store's table) under a fresh key: the
//	                     floor for a new key (baseline.Floor)
//	/bench/floor-partitioned
//	                     POST: the same in the database of the partitioned layout (below), whose
//	                     floor_records is partitioned alike
//	/ab/{withstatement,readfirst,pipelined}/v1/payments
//	                     POST: createPayment through the generated code on a runtime with
//	                     ClaimWithStatement / ClaimReadFirst / ClaimPipelined and the same handler (baseline.Strategy)
//	/ab/partitioned/v1/payments
//	                     POST: the same with ClaimWithStatement on the table partitioned by expiry,
//	                     in the database named after DATABASE_URL's with "_partitioned" appended
//	/ab/nocap/v1/payments
//	                     POST: /ab/withstatement's handler on a store without the stored-bytes cap
//	                     (pgstore.Limits.BodyBytes off)
//	/ab/generic/v1/payments
//	                     POST: /ab/withstatement's handler on a pool of its own whose connections
//	                     plan every statement generically (plan_cache_mode = force_generic_plan)
//	/mw/v1/payments      POST: createPayment through runtime.Middleware in front of a net/http handler
//	                     with the same business code (baseline.Middleware), on ClaimWithStatement
//	/mw-lockatread/v1/payments
//	                     POST: the same on ClaimWithStatement{LockAtRead: true} (the read holds the
//	                     claim that the middleware confirms; baseline.MiddlewareWith)
//	/redis/cache/v1/...  with Redis: the conformance service with the Redis replay cache in
//	                     front of PostgreSQL (runtime/redisstore.Cache, no in-process tier)
//	/redis/local/v1/...  the same with the in-process tier (64 MiB)
//	/redis/lease/v1/...  the same service on the Redis lease store paired with PostgreSQL
//	                     (runtime/redisstore.Pair)
//	/_bench/roundtrips   POST: database round trips since the last call (and reset)
//	/_bench/postmaster   GET: the PostgreSQL postmaster's process id (for the database's CPU)
//	/_bench/wal          GET: the server's current WAL position in bytes (for WAL per request)
//	/_bench/redis        GET: the Redis server's CPU seconds so far (INFO cpu); 404 without Redis
//	/debug/pprof/        net/http/pprof, for profiling a run (go tool pprof URL/debug/pprof/profile)
//
// It connects with DATABASE_URL (and to a standalone Redis when Options.Redis names one),
// migrates, and listens until killed. A server built in another module (bench/frameworks, whose
// web frameworks idemgen's module does not depend on) adds its own variants with Options.Mount
// and shares the rest, probes included.
package benchsrv

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/idemgen/idemgen/bench/internal/baseline"
	"github.com/idemgen/idemgen/bench/internal/procstat"
	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// counter counts database round trips: every query, every batch (a pipeline is one), every
// COPY. pgx sends BEGIN and COMMIT as queries, so they count too.
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// Options configures Run.
type Options struct {
	// Addr is the listen address.
	Addr string
	// Conns is the database pool's size.
	Conns int32
	// Redis connects the /redis/ variants to a standalone Redis; no InitAddress: none.
	Redis rueidis.ClientOption
	// Mount, when set, adds a server's own variants to the mux, on the same pool (whose
	// conformance and baseline tables exist).
	Mount func(mux *http.ServeMux, pool *pgxpool.Pool) error
}

// Run connects with DATABASE_URL, migrates, mounts the variants of the package doc (and
// o.Mount's) and serves them on o.Addr until the process is killed.
func Run(o Options) error {
	addr, conns, redisOpt := o.Addr, o.Conns, o.Redis
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	cfg.MaxConns = conns
	var rt counter
	cfg.ConnConfig.Tracer = &rt
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		return err
	}
	if err := conformance.Migrate(ctx, pool); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, baseline.Schema); err != nil {
		return fmt.Errorf("baseline schema: %w", err)
	}
	svc, err := conformance.NewHandler(conformance.Config{Store: pgstore.New(pool, pgstore.Options{}), Tables: pool})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", svc)
	mux.Handle("POST /bench/bare", baseline.Bare())
	mux.Handle("POST /bench/plain", baseline.Plain(pool))
	mux.Handle("POST /bench/handwritten", baseline.Handwritten(pool))
	for _, q := range baseline.FloorSchema(false) {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("floor schema: %w", err)
		}
	}
	mux.Handle("POST /bench/floor", baseline.Floor(pool))
	for _, ab := range []struct {
		name string
		s    pgstore.ClaimStrategy
	}{{"withstatement", pgstore.ClaimWithStatement{}}, {"readfirst", pgstore.ClaimReadFirst{}}, {"pipelined", pgstore.ClaimPipelined{}}} {
		h, err := baseline.Strategy(pool, ab.s)
		if err != nil {
			return err
		}
		mux.Handle("/ab/"+ab.name+"/", http.StripPrefix("/ab/"+ab.name, h))
	}
	// The same A/B handler on the table partitioned by expiry, in a database of its own (the two
	// layouts cannot share one).
	ppool, err := partitionedPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer ppool.Close()
	hp, err := baseline.WithStore(ppool, pgstore.Options{Partitioned: true})
	if err != nil {
		return err
	}
	mux.Handle("/ab/partitioned/", http.StripPrefix("/ab/partitioned", hp))
	for _, q := range baseline.FloorSchema(true) {
		if _, err := ppool.Exec(ctx, q); err != nil {
			return fmt.Errorf("floor schema, partitioned: %w", err)
		}
	}
	mux.Handle("POST /bench/floor-partitioned", baseline.Floor(ppool))
	hn, err := baseline.WithStore(pool, pgstore.Options{Claim: pgstore.ClaimWithStatement{}, Limits: pgstore.Limits{BodyBytes: -1}})
	if err != nil {
		return err
	}
	mux.Handle("/ab/nocap/", http.StripPrefix("/ab/nocap", hn))
	gcfg := cfg.Copy()
	gcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	gpool, err := pgxpool.NewWithConfig(ctx, gcfg)
	if err != nil {
		return fmt.Errorf("generic-plan pool: %w", err)
	}
	defer gpool.Close()
	hg, err := baseline.WithStore(gpool, pgstore.Options{Claim: pgstore.ClaimWithStatement{}})
	if err != nil {
		return err
	}
	mux.Handle("/ab/generic/", http.StripPrefix("/ab/generic", hg))
	mw, err := baseline.Middleware(pool)
	if err != nil {
		return err
	}
	mux.Handle("/mw/", http.StripPrefix("/mw", mw))
	mwl, err := baseline.MiddlewareWith(pool, pgstore.ClaimWithStatement{LockAtRead: true})
	if err != nil {
		return err
	}
	mux.Handle("/mw-lockatread/", http.StripPrefix("/mw-lockatread", mwl))
	if len(redisOpt.InitAddress) > 0 {
		if err := mountRedis(mux, pool, redisOpt); err != nil {
			return err
		}
	}
	if o.Mount != nil {
		if err := o.Mount(mux, pool); err != nil {
			return err
		}
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /_bench/postmaster", func(w http.ResponseWriter, r *http.Request) {
		var backend int
		if err := pool.QueryRow(r.Context(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		ppid, err := procstat.Parent(backend)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, ppid)
	})
	mux.HandleFunc("GET /_bench/wal", func(w http.ResponseWriter, r *http.Request) {
		var lsn int64
		if err := pool.QueryRow(r.Context(), "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").Scan(&lsn); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, lsn)
	})
	mux.HandleFunc("POST /_bench/roundtrips", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int64{"RoundTrips": rt.n.Swap(0)})
	})
	log.Printf("listening on %s", addr)
	return http.ListenAndServe(addr, mux)
}

// partitionedPool connects to the database named after cfg's with "_partitioned" appended,
// created if missing, with the partitioned layout and the conformance schema (its payments
// table), on the same tracer and pool size.
func partitionedPool(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	name := cfg.ConnConfig.Database + "_partitioned"
	admin, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err == nil && !exists {
		_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	}
	admin.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("partitioned database: %w", err)
	}
	pcfg := cfg.Copy()
	pcfg.ConnConfig.Database = name
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	if err := pgstore.MigratePartitioned(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	if err := conformance.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// mountRedis mounts the Redis variants of the conformance service and /_bench/redis.
func mountRedis(mux *http.ServeMux, pool *pgxpool.Pool, opt rueidis.ClientOption) error {
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	leases, err := redisstore.New(rdb, redisstore.Options{Prefix: "bench:lease:"})
	if err != nil {
		return err
	}
	pg := pgstore.New(pool, pgstore.Options{Limits: pgstore.Limits{Records: -1}}) // the load runs far above the default records cap
	for _, v := range []struct {
		name  string
		store store.Transactional[pgstore.DBTX]
	}{
		{"cache", redisstore.NewCache[pgstore.DBTX](pg, rdb, redisstore.CacheOptions{Prefix: "bench:cache:"})},
		{"local", redisstore.NewCache[pgstore.DBTX](pg, rdb, redisstore.CacheOptions{Prefix: "bench:local:", LocalBytes: 64 << 20})},
		{"lease", redisstore.Pair[pgstore.DBTX](leases, pg)},
	} {
		h, err := conformance.NewHandler(conformance.Config{Store: v.store, Tables: pool})
		if err != nil {
			return err
		}
		mux.Handle("/redis/"+v.name+"/", http.StripPrefix("/redis/"+v.name, h))
	}
	mux.HandleFunc("GET /_bench/redis", func(w http.ResponseWriter, r *http.Request) {
		info, err := rdb.Do(r.Context(), rdb.B().Info().Section("cpu").Build()).ToString()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		var total float64
		for _, line := range strings.Split(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
				x, _ := strconv.ParseFloat(v, 64)
				total += x
			}
		}
		fmt.Fprint(w, total)
	})
	return nil
}
