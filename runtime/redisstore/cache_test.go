package redisstore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/internal/testkit/redistest"
	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// statements counts what a pool sends PostgreSQL: every query and every batch.
type statements struct{ n atomic.Int64 }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}
func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.n.Add(1)
	return ctx
}
func (s *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// countedPG returns a PostgreSQL store on a fresh database whose statements are counted.
func countedPG(t *testing.T) (*pgstore.Store, *statements) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	st := &statements{}
	cfg.ConnConfig.Tracer = st
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pgstore.New(pool, pgstore.Options{}), st
}

func atomicClaim(key, body string, retention time.Duration) store.Claim {
	return store.Claim{
		ID:          store.ID{Scope: "tenant-1", Key: key},
		Operation:   "createPayment",
		Fingerprint: canonical.Fingerprint{Version: canonical.Version, Sum: sha256.Sum256([]byte(body))},
		Retention:   retention,
	}
}

func created(body string) store.Response {
	return store.Response{Status: 201, Header: []byte(`{"Content-Type":["application/json"]}`), Body: []byte(body)}
}

// commit runs an atomic-mode request for c on s to its commit.
func commit(t *testing.T, s store.Transactional[pgstore.DBTX], c store.Claim, resp store.Response) {
	t.Helper()
	ctx := context.Background()
	tx, rec, err := s.BeginAtomic(ctx, c)
	if err != nil || tx == nil {
		t.Fatalf("BeginAtomic: record %+v, %v", rec, err)
	}
	tx.HandlerContext(ctx)
	if _, err := tx.DB().Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx, resp); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// replay asks s for c's record the way the atomic machine does, and checks it is the completed
// record holding body.
func replay(t *testing.T, s store.Transactional[pgstore.DBTX], c store.Claim, body string) {
	t.Helper()
	tx, rec, err := s.BeginAtomic(context.Background(), c)
	if err != nil || tx != nil || rec == nil {
		t.Fatalf("BeginAtomic of a completed key: tx %v, record %+v, %v", tx, rec, err)
	}
	if rec.State != store.Completed || string(rec.Response.Body) != body || rec.Fingerprint != c.Fingerprint ||
		rec.Operation != c.Operation || rec.Response.Status != 201 {
		t.Fatalf("replayed record %+v", rec)
	}
}

// TestCacheReplaysWithoutDatabase: once a record is completed (through the cache, or read
// through it once), its replays send PostgreSQL nothing, in this process and in another one
// sharing the Redis deployment.
func TestCacheReplaysWithoutDatabase(t *testing.T) {
	for _, topo := range redistest.Topologies {
		for _, local := range []bool{false, true} {
			name := string(topo)
			if local {
				name += "+local"
			}
			t.Run(name, func(t *testing.T) {
				pg, st := countedPG(t)
				client := redistest.NewClient(t, topo)
				opts := testCacheOptions(t, local)
				cache := redisstore.NewCache[pgstore.DBTX](pg, client, opts)
				other := redisstore.NewCache[pgstore.DBTX](pg, client, opts) // another process

				c := atomicClaim("k-committed-through-cache", "a", time.Hour)
				commit(t, cache, c, created(`{"id":1}`))
				before := st.n.Load()
				for range 5 {
					replay(t, cache, c, `{"id":1}`)
					replay(t, other, c, `{"id":1}`)
				}
				if n := st.n.Load() - before; n != 0 {
					t.Errorf("replays sent PostgreSQL %d statements, want 0", n)
				}

				// A record committed without the cache is read through once.
				d := atomicClaim("k-committed-without-cache", "b", time.Hour)
				commit(t, pg, d, created(`{"id":2}`))
				before = st.n.Load()
				replay(t, cache, d, `{"id":2}`)
				if n := st.n.Load() - before; n != 1 {
					t.Errorf("the first replay sent %d statements, want the one read", n)
				}
				before = st.n.Load()
				replay(t, cache, d, `{"id":2}`)
				replay(t, other, d, `{"id":2}`)
				if n := st.n.Load() - before; n != 0 {
					t.Errorf("replays after the read-through sent %d statements, want 0", n)
				}

				s := cache.Counters()
				if s.Errors != 0 || s.Writes != 2 {
					t.Errorf("stats %+v: want 2 writes, no errors", s)
				}
				if local && s.LocalHits < 5 {
					t.Errorf("stats %+v: the in-process tier served %d, want the replays", s, s.LocalHits)
				}
				if !local && s.RedisHits < 6 {
					t.Errorf("stats %+v: Redis served %d, want the replays", s, s.RedisHits)
				}
			})
		}
	}
}

// TestCacheNeverOutlivesItsRecord polls a record with a short retention through the cache (both
// tiers) until it has expired: whenever the cache answers, PostgreSQL, asked right after, still
// has the record live, and once PostgreSQL says it has expired the cache does not answer.
func TestCacheNeverOutlivesItsRecord(t *testing.T) {
	for _, topo := range redistest.Topologies {
		t.Run(string(topo), func(t *testing.T) {
			pg := newPG(t)
			opts := testCacheOptions(t, true)
			cache := redisstore.NewCache[pgstore.DBTX](pg, redistest.NewClient(t, topo), opts)
			uncached := redisstore.NewCache[pgstore.DBTX](pg, redistest.NewClient(t, topo), testCacheOptions(t, false))
			ctx := context.Background()
			c := atomicClaim("k-short", "a", 1200*time.Millisecond)
			commit(t, cache, c, created("x"))
			d := atomicClaim("k-short-read-through", "a", 1200*time.Millisecond)
			commit(t, pg, d, created("y"))
			hits := 0
			for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(15 * time.Millisecond) {
				for _, s := range []*redisstore.Cache[pgstore.DBTX]{cache, uncached} {
					for _, id := range []store.ID{c.ID, d.ID} {
						start := time.Now()
						rec, found, err := s.Get(ctx, id)
						if err != nil {
							t.Fatal(err)
						}
						live, liveFound, err := pg.Get(ctx, id)
						if err != nil {
							t.Fatal(err)
						}
						between := time.Since(start) // the copy was measured up to this much earlier
						if found {
							hits++
							// The copy claims RetentionLeft at the cache's read; the record had
							// at most its own remaining (none once expired) plus the time between
							// the two reads left then.
							var recordLeft time.Duration
							if liveFound {
								recordLeft = live.RetentionLeft
							}
							if rec.RetentionLeft > recordLeft+between {
								t.Fatalf("the cached copy of %s claims %v left, the record had at most %v (found %v)",
									id.Key, rec.RetentionLeft, recordLeft+between, liveFound)
							}
						}
					}
				}
			}
			if hits == 0 {
				t.Fatal("the cache never answered")
			}
			if _, found, _ := cache.Get(ctx, c.ID); found {
				t.Fatal("the cache still answers after the retention")
			}
		})
	}
}

// TestCacheNeverHoldsRunningRecords: a lease-mode claim through the cache is not written to
// Redis while it runs; its completed record is, once read.
func TestCacheNeverHoldsRunningRecords(t *testing.T) {
	pg := newPG(t)
	client := redistest.NewClient(t, redistest.Standalone)
	opts := testCacheOptions(t, false)
	cache := redisstore.NewCache[pgstore.DBTX](pg, client, opts)
	ctx := context.Background()
	c := atomicClaim("k-lease", "a", time.Hour)
	c.Lease = time.Minute
	r, err := cache.Reserve(ctx, c)
	if err != nil || !r.Claimed() {
		t.Fatalf("Reserve: %+v, %v", r, err)
	}
	for range 3 {
		again, err := cache.Reserve(ctx, c)
		if err != nil || again.Claimed() || again.Record.State != store.Running {
			t.Fatalf("Reserve while running: %+v, %v", again, err)
		}
	}
	if s := cache.Counters(); s.Writes != 0 || s.RedisHits != 0 {
		t.Fatalf("a running record reached Redis: %+v", s)
	}
	tx, err := cache.BeginCompletion(ctx, c, r.Token)
	if err != nil {
		t.Fatal(err)
	}
	tx.HandlerContext(ctx)
	if err := tx.Commit(ctx, created("done")); err != nil {
		t.Fatal(err)
	}
	got, err := cache.Reserve(ctx, c) // read through
	if err != nil || got.Record.State != store.Completed {
		t.Fatalf("Reserve after completion: %+v, %v", got, err)
	}
	got, err = cache.Reserve(ctx, c)
	if err != nil || got.Record.State != store.Completed || string(got.Record.Response.Body) != "done" {
		t.Fatalf("Reserve after completion: %+v, %v", got, err)
	}
	if s := cache.Counters(); s.Writes != 1 || s.RedisHits != 1 {
		t.Fatalf("stats %+v: want the completed record written once and served from Redis", s)
	}
}

// TestCacheUnreadableValueIsAMiss: whatever sits under a record's key that the cache did not
// write is ignored, and PostgreSQL answers.
func TestCacheUnreadableValueIsAMiss(t *testing.T) {
	pg := newPG(t)
	client := redistest.NewClient(t, redistest.Standalone)
	opts := testCacheOptions(t, false)
	cache := redisstore.NewCache[pgstore.DBTX](pg, client, opts)
	c := atomicClaim("k-garbage", "a", time.Hour)
	commit(t, pg, c, created("real"))
	key := opts.Prefix + "{8:tenant-1:k-garbage}"
	for _, v := range []string{"", "\x01", "\x02garbage", "\x01\x05creat"} {
		if err := client.Do(context.Background(), client.B().Set().Key(key).Value(v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		replay(t, cache, c, "real")
	}
}

// TestCacheRedisDownOrSlow: with Redis killed, or stopped (SIGSTOP) so that calls time out,
// every call is answered by PostgreSQL without an error, a lookup waits at most the cache's
// timeout and, within the backoff, not at all; once Redis is back, it serves again.
func TestCacheRedisDownOrSlow(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerOptions{})
	pg, st := countedPG(t)
	client := redistest.Connect(t, srv.Addr)
	opts := testCacheOptions(t, false)
	opts.Timeout, opts.Backoff = 40*time.Millisecond, 300*time.Millisecond
	cache := redisstore.NewCache[pgstore.DBTX](pg, client, opts)
	c := atomicClaim("k-before", "a", time.Hour)
	commit(t, cache, c, created("before"))
	replay(t, cache, c, "before")
	if s := cache.Counters(); s.RedisHits != 1 {
		t.Fatalf("stats %+v", s)
	}

	check := func(phase string) {
		t.Helper()
		for i := range 20 {
			start := time.Now()
			replay(t, cache, c, "before")
			if d := time.Since(start); d > opts.Timeout+time.Second {
				t.Fatalf("%s: replay %d took %v", phase, i, d)
			}
			k := atomicClaim("k-"+phase+"-"+string(rune('a'+i)), "a", time.Hour)
			commit(t, cache, k, created(phase))
			replay(t, cache, k, phase)
		}
		if s := cache.Counters(); s.Errors == 0 {
			t.Fatalf("%s: stats %+v, want Redis errors", phase, s)
		}
	}

	srv.Kill()
	check("killed")

	srv.Restart()
	time.Sleep(opts.Backoff + 50*time.Millisecond)
	replay(t, cache, c, "before")
	waitFor(t, func() bool { replay(t, cache, c, "before"); return cache.Counters().RedisHits > 1 })

	srv.Pause()
	errs := cache.Counters().Errors
	start := time.Now()
	replay(t, cache, c, "before") // waits for the timeout once
	if d := time.Since(start); d < opts.Timeout/2 || d > opts.Timeout+time.Second {
		t.Errorf("the first lookup on a stopped Redis took %v, want about %v", d, opts.Timeout)
	}
	if cache.Counters().Errors != errs+1 {
		t.Errorf("stats %+v, want one more error", cache.Counters())
	}
	start = time.Now()
	before := st.n.Load()
	for range 10 {
		replay(t, cache, c, "before") // within the backoff: PostgreSQL at once
	}
	if d := time.Since(start); d > opts.Timeout*5 {
		t.Errorf("10 replays within the backoff took %v: they waited for Redis", d)
	}
	if n := st.n.Load() - before; n != 10 {
		t.Errorf("10 replays within the backoff sent %d statements, want 10", n)
	}
	check("stopped")
	srv.Resume()
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 10s")
}

// TestCacheConcurrentWinnerIsKept: an atomic claim that loses to a concurrent request's commit
// (a claim sent with its first statement finds the key completed at its own commit) is answered
// with the winner's record, and the cache keeps that one.
func TestCacheConcurrentWinnerIsKept(t *testing.T) {
	pg, st := countedPG(t)
	client, opts := redistest.NewClient(t, redistest.Standalone), testCacheOptions(t, false)
	cache := redisstore.NewCache[pgstore.DBTX](pg, client, opts)
	// The second claim comes from another replica (a pgstore of its own on the same database
	// and Redis): one Store answers a second claim of a key it is claiming itself with ErrBusy.
	other := redisstore.NewCache[pgstore.DBTX](pgstore.New(pg.Pool(), pgstore.Options{}), client, opts)
	ctx := context.Background()
	c := atomicClaim("k-race", "a", time.Hour)
	first, _, err := cache.BeginAtomic(ctx, c)
	if err != nil || first == nil {
		t.Fatal(err)
	}
	// Both read no record. The first's claim timer is armed only then: the second's read tries
	// the claim lock, and would find the first's claim (ErrBusy) if it had gone out already.
	second, _, err := other.BeginAtomic(ctx, c)
	if err != nil || second == nil {
		_ = first.Abort(ctx)
		t.Fatal(err)
	}
	first.HandlerContext(ctx)
	if err := first.Commit(ctx, created("first")); err != nil {
		_ = second.Abort(ctx)
		t.Fatal(err)
	}
	// The second's claim goes out with its first statement, or alone after the claim delay if
	// the first's commit took longer: either way it meets the first's record, at its Commit or
	// (its statement failing) at the Abort that follows.
	hctx := second.HandlerContext(ctx)
	if _, err = second.DB().Exec(hctx, "SELECT 1"); err == nil {
		err = second.Commit(ctx, created("second"))
	} else {
		err = second.Abort(ctx)
	}
	var done *store.CompletedError
	if !errors.As(err, &done) || string(done.Record.Response.Body) != "first" {
		t.Fatalf("the second claim's end: %v, want the first's record", err)
	}
	before := st.n.Load()
	replay(t, cache, c, "first")
	if n := st.n.Load() - before; n != 0 {
		t.Errorf("the replay sent %d statements, want 0", n)
	}
}
