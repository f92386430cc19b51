package conformance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/conformance"
	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
	"github.com/idemgen/idemgen/internal/testkit/redistest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// The failure tests run the conformance service on private Redis servers that they kill,
// restart and stop under load, and check what clients saw and what was executed.

// quietLogger drops the runtime's logs: the failure tests make it log every store error.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// failureService is the conformance service of one failure test.
type failureService struct {
	url    string
	client *http.Client
	pool   *pgxpool.Pool
}

// newFailureService serves the conformance service on a fresh database and the store stores
// makes, with a store timeout of 1 s and its logs dropped.
func newFailureService(t *testing.T, stores conformancetest.StoreFactory) *failureService {
	t.Helper()
	env := conformancetest.NewEnv(t, conformancetest.MinPoolSize, stores)
	h, err := conformance.NewHandler(conformance.Config{Store: env.Store, Tables: env.DB, Provider: env.Provider, Logger: quietLogger(), StoreTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &failureService{url: srv.URL, client: &http.Client{Timeout: 20 * time.Second}, pool: env.DB}
}

// answer is what a client saw.
type answer struct {
	status   int
	replayed bool
	problem  string
	body     string
}

func (a answer) String() string {
	s := strconv.Itoa(a.status)
	if a.replayed {
		s += " replayed"
	}
	if a.problem != "" {
		s += " " + a.problem
	}
	return s
}

func (s *failureService) post(t *testing.T, path, tenant, key, body string) answer {
	req, _ := http.NewRequest("POST", s.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tenant)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", path, err)
		return answer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true", body: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		var p struct{ Type string }
		_ = json.Unmarshal(b, &p)
		a.problem = p.Type[strings.LastIndexByte(p.Type, '/')+1:]
	}
	return a
}

// countBy returns, for tenant's rows of table, how many rows each amount has.
func (s *failureService) countBy(t *testing.T, table, tenant string) map[int64]int {
	rows, err := s.pool.Query(context.Background(), `SELECT amount, count(*) FROM `+table+` WHERE tenant = $1 GROUP BY amount`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]int{}
	for rows.Next() {
		var a int64
		var n int
		if err := rows.Scan(&a, &n); err != nil {
			t.Fatal(err)
		}
		out[a] = n
	}
	return out
}

// outage runs load until stop is closed, then returns; the caller kills and restarts Redis
// meanwhile.
type outage struct {
	kill, restart func()
}

// during runs load from workers goroutines for the whole of: up (200ms), Redis down (down),
// Redis back (after). load gets the worker number and the phase it runs in, and is called in
// a loop.
func during(o outage, workers int, down, after time.Duration, load func(worker int, phase string)) {
	var (
		mu    sync.Mutex
		phase = "up"
		wg    sync.WaitGroup
		stop  = make(chan struct{})
	)
	current := func() string { mu.Lock(); defer mu.Unlock(); return phase }
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				load(w, current())
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	o.kill()
	mu.Lock()
	phase = "down"
	mu.Unlock()
	time.Sleep(down)
	o.restart()
	mu.Lock()
	phase = "back"
	mu.Unlock()
	time.Sleep(after)
	close(stop)
	wg.Wait()
}

// redisDeployment is a private standalone server or cluster of a failure test, with the server
// its outage kills.
type redisDeployment struct {
	addrs  []string
	victim *redistest.Server
	// cluster, when set, must be waited for after the victim's restart.
	cluster *redistest.ClusterT
}

func privateRedis(t *testing.T, topo redistest.Topology, fsync string) redisDeployment {
	t.Helper()
	opts := redistest.ServerOptions{AppendFsync: fsync}
	if topo == redistest.Cluster {
		c := redistest.StartCluster(t, 3, opts)
		return redisDeployment{addrs: c.Addrs(), victim: c.Nodes[0], cluster: c}
	}
	s := redistest.StartServer(t, opts)
	return redisDeployment{addrs: []string{s.Addr}, victim: s}
}

func (d redisDeployment) outage(t *testing.T) outage {
	return outage{
		kill: d.victim.Kill,
		restart: func() {
			d.victim.Restart()
			if d.cluster != nil {
				d.cluster.WaitOK(t)
			}
		},
	}
}

// loadStore is the database store of the load tests of this file, without a records cap: one
// tenant makes thousands of new keys a minute (the outage's 503s are retried as new claims
// afterwards), above the default cap of 6000 per minute, which is not what these tests are about.
func loadStore(pool *pgxpool.Pool) *pgstore.Store {
	return pgstore.New(pool, pgstore.Options{Limits: pgstore.Limits{Records: -1}})
}

// TestRedisCacheKilledMidLoad: workers create payments and replay each one twice while Redis
// (the standalone server, or one master of the cluster) is killed and restarted. Every request
// is answered as if Redis were not there: 201 for a new key, the same 201 replayed for a
// retry; no error; one payment per key.
func TestRedisCacheKilledMidLoad(t *testing.T) {
	for _, topo := range redistest.Topologies {
		t.Run(string(topo), func(t *testing.T) {
			d := privateRedis(t, topo, "everysec")
			var cache *redisstore.Cache[pgstore.DBTX]
			s := newFailureService(t, func(_ testing.TB, pool *pgxpool.Pool) store.Transactional[pgstore.DBTX] {
				cache = redisstore.NewCache[pgstore.DBTX](loadStore(pool), redistest.Connect(t, d.addrs...),
					redisstore.CacheOptions{Timeout: 50 * time.Millisecond, Backoff: 100 * time.Millisecond})
				return cache
			})
			const tenant = "cache-outage"
			var (
				mu      sync.Mutex
				n       = map[int]int{}
				created = map[string]bool{}
				byPhase = map[string]map[string]int{}
			)
			during(d.outage(t), 6, 1500*time.Millisecond, 1500*time.Millisecond, func(w int, phase string) {
				mu.Lock()
				i := n[w]
				n[w]++
				mu.Unlock()
				key := fmt.Sprintf("k-cache-%d-%06d-xxxxxxxx", w, i)
				amount := 1000 + w*100000 + i
				body := fmt.Sprintf(`{"amount": %d, "currency": "EUR", "to": "acc_1"}`, amount)
				first := s.post(t, "/v1/payments", tenant, key, body)
				got := []answer{first}
				for range 2 {
					a := s.post(t, "/v1/payments", tenant, key, body)
					got = append(got, a)
					if a.status != 201 || !a.replayed || a.body != first.body {
						t.Errorf("%s: retry of %s answered %v %q, first %v %q", phase, key, a, a.body, first, first.body)
					}
				}
				if first.status != 201 || first.replayed {
					t.Errorf("%s: %s answered %v", phase, key, first)
				}
				mu.Lock()
				created[key] = true
				if byPhase[phase] == nil {
					byPhase[phase] = map[string]int{}
				}
				for _, a := range got {
					byPhase[phase][a.String()]++
				}
				mu.Unlock()
			})
			t.Logf("answers by phase: %v; cache %+v", byPhase, cache.Counters())
			counts := s.countBy(t, "payments", tenant)
			total := 0
			for amount, c := range counts {
				total += c
				if c != 1 {
					t.Errorf("amount %d: %d payments", amount, c)
				}
			}
			if total != len(created) {
				t.Errorf("%d payments for %d keys", total, len(created))
			}
			st := cache.Counters()
			if byPhase["down"] == nil || byPhase["back"] == nil || st.Errors == 0 || st.RedisHits == 0 {
				t.Errorf("the load did not meet the outage: answers %v, cache %+v", byPhase, st)
			}
		})
	}
}

// TestRedisLeaseKilledMidLoad: workers charge through the provider (lease mode) on the Redis
// lease store paired with PostgreSQL, each key sent twice at once and retried, while Redis is
// killed and restarted from its AOF. While Redis is down the service fails closed: 503
// store-unavailable, never an unguarded run; afterwards every key completes, and each charge
// was made once (one provider call, one row).
func TestRedisLeaseKilledMidLoad(t *testing.T) {
	for _, topo := range redistest.Topologies {
		t.Run(string(topo), func(t *testing.T) {
			d := privateRedis(t, topo, "everysec")
			s := newFailureService(t, func(_ testing.TB, pool *pgxpool.Pool) store.Transactional[pgstore.DBTX] {
				leases, err := redisstore.New(redistest.Connect(t, d.addrs...), redisstore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return redisstore.Pair[pgstore.DBTX](leases, loadStore(pool))
			})
			const tenant = "lease-outage"
			var (
				mu      sync.Mutex
				n       = map[int]int{}
				keys    = map[string]string{} // key → body
				byPhase = map[string]map[string]int{}
			)
			allowed := map[string]bool{"201": true, "201 replayed": true, "409 in-flight": true, "503 store-unavailable": true}
			during(d.outage(t), 4, 1500*time.Millisecond, 1000*time.Millisecond, func(w int, phase string) {
				mu.Lock()
				i := n[w]
				n[w]++
				mu.Unlock()
				key := fmt.Sprintf("k-lease-%d-%06d-xxxxxxxx", w, i)
				body := fmt.Sprintf(`{"amount": %d}`, 1000+w*100000+i)
				var wg sync.WaitGroup
				got := make([]answer, 2)
				for j := range got {
					wg.Add(1)
					go func() { defer wg.Done(); got[j] = s.post(t, "/v1/provider-charges", tenant, key, body) }()
				}
				wg.Wait()
				mu.Lock()
				keys[key] = body
				if byPhase[phase] == nil {
					byPhase[phase] = map[string]int{}
				}
				for _, a := range got {
					byPhase[phase][a.String()]++
					if !allowed[a.String()] {
						t.Errorf("%s: %s answered %v %s", phase, key, a, a.body)
					}
				}
				mu.Unlock()
			})
			t.Logf("answers by phase: %v", byPhase)
			if byPhase["down"]["503 store-unavailable"] == 0 {
				t.Errorf("no 503 while Redis was down: %v", byPhase)
			}
			// Every key completes once Redis is back (a claim that survived in the AOF holds its
			// key for the operation's 1s lease, then is taken over).
			for key, body := range keys {
				deadline := time.Now().Add(15 * time.Second)
				for {
					a := s.post(t, "/v1/provider-charges", tenant, key, body)
					if a.status == 201 {
						break
					}
					if !allowed[a.String()] || time.Now().After(deadline) {
						t.Fatalf("retry of %s: %v %s", key, a, a.body)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			counts := s.countBy(t, "provider_charges", tenant)
			for key, body := range keys {
				var amount int64
				fmt.Sscanf(body, `{"amount": %d}`, &amount)
				if counts[amount] != 1 {
					t.Errorf("%s: %d provider_charges rows, want 1", key, counts[amount])
				}
			}
			if calls := providerCalls(t, s, tenant); calls != int64(len(keys)) {
				t.Errorf("the provider charged %d times for %d keys", calls, len(keys))
			}
		})
	}
}

func providerCalls(t *testing.T, s *failureService, tenant string) int64 {
	req, _ := http.NewRequest("GET", s.url+"/_effects", nil)
	req.Header.Set("Authorization", "Bearer "+tenant)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e map[string]int64
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	return e["provider_calls"]
}

// TestRedisClusterMasterRestartedWithAOF: charges completed on a 3-master cluster survive a
// master killed with SIGKILL and restarted from its AOF. With appendfsync always every record
// it acknowledged is back and replays from Redis; with everysec the last second's may be lost,
// and the paired store answers those from PostgreSQL: either way every retry replays and
// nothing runs twice. While the master is down, lease requests whose keys it serves fail
// closed (503) and the replay cache's requests are answered by PostgreSQL.
func TestRedisClusterMasterRestartedWithAOF(t *testing.T) {
	for _, fsync := range []string{"always", "everysec"} {
		t.Run(fsync, func(t *testing.T) {
			d := privateRedis(t, redistest.Cluster, fsync)
			client := redistest.Connect(t, d.addrs...)
			leases, err := redisstore.New(client, redisstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var cache *redisstore.Cache[pgstore.DBTX]
			s := newFailureService(t, func(_ testing.TB, pool *pgxpool.Pool) store.Transactional[pgstore.DBTX] {
				cache = redisstore.NewCache[pgstore.DBTX](loadStore(pool), client,
					redisstore.CacheOptions{Timeout: 100 * time.Millisecond, Backoff: 100 * time.Millisecond})
				return redisstore.Pair[pgstore.DBTX](leases, cache)
			})
			const tenant = "aof"
			const n = 30
			key := func(i int) string { return fmt.Sprintf("k-aof-%03d-xxxxxxxxxxxx", i) }
			charge := func(i int) string { return fmt.Sprintf(`{"amount": %d}`, 500+i) }
			payment := func(i int) string { return fmt.Sprintf(`{"amount": %d, "currency": "EUR", "to": "acc_1"}`, 500+i) }
			onVictim := map[int]bool{}
			for i := range n {
				if a := s.post(t, "/v1/provider-charges", tenant, key(i), charge(i)); a.status != 201 || a.replayed {
					t.Fatalf("charge %d: %v %s", i, a, a.body)
				}
				if a := s.post(t, "/v1/payments", tenant, "p"+key(i), payment(i)); a.status != 201 || a.replayed {
					t.Fatalf("payment %d: %v %s", i, a, a.body)
				}
				slot, err := d.victim.Command("CLUSTER", "KEYSLOT", "x{"+store.DigestOf(store.ID{Scope: tenant, Key: key(i)}).KeyUUID()+"}")
				if err != nil {
					t.Fatal(err)
				}
				if sl, _ := strconv.Atoi(slot); sl < 16384/3 { // the victim, node 0, owns slots 0..5460
					onVictim[i] = true
				}
			}
			if len(onVictim) == 0 || len(onVictim) == n {
				t.Fatalf("%d of %d keys on the victim", len(onVictim), n)
			}

			d.victim.Kill()
			for i := range n {
				// A lease key on the dead master: fail closed. Elsewhere: replayed (until the
				// cluster marks the master failed and stops serving, 503 too). Never executed.
				a := s.post(t, "/v1/provider-charges", tenant, key(i), charge(i))
				if !(a.status == 201 && a.replayed) && a.String() != "503 store-unavailable" {
					t.Errorf("charge %d with a master down: %v %s", i, a, a.body)
				}
				if onVictim[i] && a.status != 503 {
					t.Errorf("charge %d on the dead master: %v, want 503", i, a)
				}
				// The replay cache: PostgreSQL answers.
				if a := s.post(t, "/v1/payments", tenant, "p"+key(i), payment(i)); a.status != 201 || !a.replayed {
					t.Errorf("payment %d with a master down: %v %s", i, a, a.body)
				}
			}

			d.victim.Restart()
			d.cluster.WaitOK(t)
			lost := 0
			for i := range n {
				if !onVictim[i] {
					continue
				}
				var (
					rec   store.Record
					found bool
					err   error
				)
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					// The client reconnects to the restarted master on its own, after a moment.
					if rec, found, err = leases.Get(context.Background(), store.ID{Scope: tenant, Key: key(i)}); err == nil || time.Now().After(deadline) {
						break
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				if !found || rec.State != store.Completed {
					lost++
				}
			}
			t.Logf("appendfsync %s: %d of %d records on the restarted master lost", fsync, lost, len(onVictim))
			if fsync == "always" && lost != 0 {
				t.Errorf("appendfsync always lost %d acknowledged records", lost)
			}
			for i := range n {
				if a := s.post(t, "/v1/provider-charges", tenant, key(i), charge(i)); a.status != 201 || !a.replayed {
					t.Errorf("charge %d after the restart: %v %s", i, a, a.body)
				}
				if a := s.post(t, "/v1/payments", tenant, "p"+key(i), payment(i)); a.status != 201 || !a.replayed {
					t.Errorf("payment %d after the restart: %v %s", i, a, a.body)
				}
			}
			for table, counts := range map[string]map[int64]int{
				"provider_charges": s.countBy(t, "provider_charges", tenant),
				"payments":         s.countBy(t, "payments", tenant),
			} {
				if len(counts) != n {
					t.Errorf("%s: %d amounts, want %d", table, len(counts), n)
				}
				for amount, c := range counts {
					if c != 1 {
						t.Errorf("%s: amount %d has %d rows", table, amount, c)
					}
				}
			}
			if calls := providerCalls(t, s, tenant); calls != n {
				t.Errorf("the provider charged %d times for %d keys", calls, n)
			}
		})
	}
}
