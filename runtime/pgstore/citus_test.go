package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// The store on a Citus coordinator (make test-citus: scripts/with-citus.sh runs these and the
// suites against a coordinator and two workers). Elsewhere they skip.

// needCitus skips t unless the test server is a Citus coordinator.
func needCitus(t *testing.T) {
	t.Helper()
	if !pgtest.IsCitus(t) {
		t.Skip("needs a Citus coordinator: CITUS_URL=... make test-citus (docs/distributed.md)")
	}
}

// advisoryLocksByNode counts the advisory locks held on the coordinator and on each worker of
// e's database, by "host:port".
// sqlClaimLocks counts the advisory locks taken with pg_advisory_lock's one- and two-argument
// forms (objsubid 1 and 2), which is how pgstore takes its claim lock. Citus takes advisory locks
// of its own on the coordinator for distributed modifications (shard and metadata resource
// locks, objsubid 4 and above): they are not the claim lock.
const sqlClaimLocks = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid IN (1, 2)"

func (e *env) advisoryLocksByNode(t *testing.T) (coordinator int, workers map[string]int) {
	t.Helper()
	ctx := context.Background()
	if err := e.pool.QueryRow(ctx, sqlClaimLocks).Scan(&coordinator); err != nil {
		t.Fatal(err)
	}
	rows, err := e.pool.Query(ctx, "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary'")
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for rows.Next() {
		var host string
		var port int
		if err := rows.Scan(&host, &port); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, host+":"+strconv.Itoa(port))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	workers = map[string]int{}
	for _, n := range nodes {
		u, err := url.Parse(e.url)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = n
		c, err := pgx.Connect(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		var k int
		err = c.QueryRow(ctx, sqlClaimLocks).Scan(&k)
		c.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		workers[n] = k
	}
	return coordinator, workers
}

// TestCitusOptionsRefused: on Citus, Open refuses, with the reason, the options that cannot work
// there; a Store made with New answers every operation with the same error.
func TestCitusOptionsRefused(t *testing.T) {
	needCitus(t)
	pool := newPool(t)
	ctx := context.Background()
	for name, o := range map[string]pgstore.Options{
		"LockAtRead":  {Claim: pgstore.ClaimWithStatement{LockAtRead: true}},
		"Partitioned": {Partitioned: true},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := pgstore.Open(ctx, pool, o); !errors.Is(err, pgstore.ErrUnsupported) {
				t.Fatalf("Open: %v, want ErrUnsupported", err)
			}
			_, _, err := pgstore.New(pool, o).Get(ctx, store.ID{Scope: "t", Key: "k"})
			if !errors.Is(err, pgstore.ErrUnsupported) {
				t.Fatalf("Get on New's store: %v, want ErrUnsupported", err)
			}
			t.Log(err)
		})
	}
	if _, err := pgstore.Open(ctx, pool, pgstore.Options{}); err != nil {
		t.Fatalf("Open with the default options: %v", err)
	}
}

// TestCitusDuplicates: with the default options, 50 concurrent duplicates (on another replica)
// of a key whose first request holds its claim are each answered 409 within the conflict timeout, never entering the
// handler, while the claim lock is held on the worker that holds the key's shard, where the
// duplicates' reads look for it (nothing on the coordinator); then the first completes once and
// a retry replays. Each strategy offered on Citus, and the portable path (NoAdvisoryLocks,
// whose duplicates wait on the row on the worker, up to ConflictTimeout there).
func TestCitusDuplicates(t *testing.T) {
	needCitus(t)
	for _, s := range []struct {
		name  string
		tweak func(*setup)
	}{
		{"WithStatement", func(*setup) {}},
		{"ReadFirst", withStrategy(pgstore.ClaimReadFirst{})},
		{"NoAdvisoryLocks", func(c *setup) { c.store.NoAdvisoryLocks = true }},
	} {
		t.Run(s.name, func(t *testing.T) {
			e := newEnv(t, s.tweak)
			var entered atomic.Int64
			pay := func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
				entered.Add(1)
				var id int64
				if err := db.QueryRow(ctx, insertPay+" RETURNING id", r.Tenant, r.Amount).Scan(&id); err != nil {
					return runtime.Response{}, err
				}
				return e.answer(ctx, r, id)
			}
			h := e.handlerWith(payOp(), pay)
			// The duplicates reach another replica (a Store of its own on the same database): the
			// first request's own Store would answer them from its claims in progress without
			// asking the database, and this test is about what the database answers on Citus.
			dup := newEnvAt(t, e.url, s.tweak).handlerWith(payOp(), pay)
			done := make(chan int)
			go func() { done <- serve(h, req("t1", key1, body100, "X-Hold", "first")).Code }()
			g := e.gate("first")
			g.wait(t)
			if s.name != "NoAdvisoryLocks" {
				coordinator, workers := e.advisoryLocksByNode(t)
				// The claimants' lock and the probes' lock (takeClaimLocks), both on one worker.
				holding := 0
				for _, n := range workers {
					if n != 0 {
						holding++
					}
					if n != 0 && n != 2 {
						holding = -1
					}
				}
				if coordinator != 0 || holding != 1 {
					t.Errorf("claim locks: %d on the coordinator, %v on the workers; want two, on the worker of the shard", coordinator, workers)
				}
			}
			const n = 50
			took := make([]time.Duration, n)
			codes := concurrently(n, func(i int) int {
				start := time.Now()
				w := serve(dup, req("t1", key1, body100))
				took[i] = time.Since(start)
				if w.Code == 409 && problemType(t, w) != runtime.ProblemInFlight {
					return -1
				}
				return w.Code
			})
			// Every duplicate was answered while the first still held its claim (the gate opens
			// only now): none waited for it. Without advisory locks each waited on the row, on the
			// worker, up to ConflictTimeout: a lock wait that did not reach the worker would have
			// lasted until the first request ended, which never comes before they all return.
			// One more duplicate alone shows what a duplicate costs without the storm's queue.
			alone := time.Now()
			if w := serve(dup, req("t1", key1, body100)); w.Code != 409 {
				t.Errorf("lone duplicate: %d", w.Code)
			}
			lone := time.Since(alone)
			g.open()
			for i, c := range codes {
				if c != 409 {
					t.Errorf("duplicate %d: %d, want 409 in-flight", i, c)
				}
			}
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			t.Logf("%d duplicates: 409 in %v (median) to %v (slowest), a lone duplicate in %v; handler entered %d time(s)",
				n, took[n/2].Round(time.Millisecond), took[n-1].Round(time.Millisecond), lone.Round(time.Millisecond), entered.Load())
			if <-done != 201 || e.payments("t1") != 1 {
				t.Fatal("first request")
			}
			if got := entered.Load(); got != 1 {
				t.Errorf("handler entered %d times, want once", got)
			}
			if w := serve(h, req("t1", key1, body100)); w.Header().Get(runtime.HeaderReplayed) != "true" {
				t.Fatalf("retry: %d, want a replay", w.Code)
			}
		})
	}
}

// TestCitusWaitingDuplicatesReplay: duplicates with concurrency.wait wait for the first request
// and replay its answer.
func TestCitusWaitingDuplicatesReplay(t *testing.T) {
	needCitus(t)
	e := newEnv(t, nil)
	op := payOp()
	op.Wait = 10 * time.Second
	h := e.atomicHandler(op)
	done := make(chan int)
	go func() { done <- serve(h, req("t1", key1, body100, "X-Hold", "first")).Code }()
	g := e.gate("first")
	g.wait(t)
	const n = 50
	answers := make(chan *responseSummary, n)
	for range n {
		go func() { answers <- summarize(t, serve(h, req("t1", key1, body100))) }()
	}
	eventually(t, "the duplicates to wait", func() bool { return e.st.WaitingForTest() > 0 })
	g.open()
	for range n {
		if s := <-answers; s.status != 201 || !s.replayed {
			t.Errorf("waiting duplicate: %+v", s)
		}
	}
	if <-done != 201 || e.payments("t1") != 1 {
		t.Fatal("first request")
	}
}

// TestCitusStorageBytesMeasuresTheShards: Stats().StorageBytes is the shards' size, not the
// coordinator's empty table's.
func TestCitusStorageBytesMeasuresTheShards(t *testing.T) {
	needCitus(t)
	e := newEnv(t, nil)
	h := e.atomicHandler(payOp())
	for i := range 200 {
		if w := serve(h, req("t1", fmt.Sprintf("k-bytes-%08d-xx", i), body100, "X-Big", "4000")); w.Code != 201 {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	st, err := e.st.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var shell int64
	if err := e.pool.QueryRow(context.Background(), "SELECT pg_total_relation_size('idempotency_records')").Scan(&shell); err != nil {
		t.Fatal(err)
	}
	// 200 bodies of 4,000 bytes: at least 800,000 bytes, compressed or not (TOAST keeps
	// repeated bytes small: the rows and indexes are the floor).
	if st.StorageBytes < 200*100 || st.StorageBytes <= shell {
		t.Fatalf("StorageBytes %d (the coordinator's table alone: %d)", st.StorageBytes, shell)
	}
	t.Logf("StorageBytes %d, the coordinator's shell table %d", st.StorageBytes, shell)
}
