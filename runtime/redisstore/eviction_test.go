package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/redistest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
)

// flood commits n records of tenant-a with bodies of size bytes through cache, as one tenant's
// new keys with large responses do.
func flood(t *testing.T, cache *redisstore.Cache[pgstore.DBTX], n, size int) {
	t.Helper()
	big := strings.Repeat("x", size)
	for i := range n {
		c := atomicClaim(fmt.Sprintf("flood-key-%08d", i), big, time.Hour)
		c.ID.Scope = "tenant-a"
		commit(t, cache, c, created(big))
	}
}

// Running lease claims are never evicted. Under maxmemory with an evicting policy, one tenant's
// 400 responses of 200 KB through the cache would evict another tenant's running claim
// (allkeys-lru; volatile-lru too, since running claims carry a TTL), and its duplicate would be
// granted a new claim: its call phase would run twice. So the lease store refuses such a server
// (ErrEvictionPolicy) at New and at every claim; under noeviction a full Redis refuses new claims
// (an error: 503, nothing runs) and keeps the running one, while the cache's copies simply fail
// to be written (misses: PostgreSQL answers).
func TestRunningClaimsAreNeverEvicted(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "allkeys-random", "volatile-ttl", "allkeys-lfu"} {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.StartServer(t, redistest.ServerOptions{Config: []string{"maxmemory 8mb", "maxmemory-policy " + policy}})
			leases, err := redisstore.New(redistest.Connect(t, srv.Addr), redisstore.Options{})
			if !errors.Is(err, redisstore.ErrEvictionPolicy) || leases != nil {
				t.Fatalf("New on maxmemory-policy %s: %v, want ErrEvictionPolicy", policy, err)
			}
			if !strings.Contains(err.Error(), policy) {
				t.Errorf("the error does not name the policy: %v", err)
			}
		})
	}

	t.Run("noeviction", func(t *testing.T) {
		ctx := context.Background()
		srv := redistest.StartServer(t, redistest.ServerOptions{Config: []string{"maxmemory 8mb", "maxmemory-policy noeviction"}})
		client := redistest.Connect(t, srv.Addr)
		leases, err := redisstore.New(client, redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pg := newPG(t)
		cache := redisstore.NewCache[pgstore.DBTX](pg, client, redisstore.CacheOptions{Backoff: time.Millisecond})
		paired := redisstore.Pair[pgstore.DBTX](leases, cache)
		victim := leaseClaim("victim-key-000000001", `{"amount":100}`, time.Minute)
		victim.ID.Scope = "tenant-b"
		if r, err := paired.Reserve(ctx, victim); err != nil || !r.Claimed() {
			t.Fatalf("Reserve: %+v %v", r, err)
		}
		flood(t, cache, 400, 200<<10)
		if n := cache.Counters().Errors; n == 0 {
			t.Errorf("the flood of 80 MB fit in 8 MB: no cache write failed")
		}
		// The flood's last accepted write may leave room for a small claim (and a failed copy's
		// clean-up frees some): fill what is left with small keys until Redis refuses one.
		fill := strings.Repeat("y", 1<<10)
		for i := 0; ; i++ {
			err := client.Do(ctx, client.B().Set().Key(fmt.Sprintf("fill-%08d", i)).Value(fill).Build()).Error()
			if err != nil && strings.Contains(err.Error(), "OOM") {
				break
			}
			if err != nil || i > 16<<10 {
				t.Fatalf("filling Redis to its maxmemory: %d keys of 1 KB, %v", i, err)
			}
		}
		// Full by a few hundred bytes only: Redis gives some back on its own (clientsCron shrinks
		// idle client buffers), which would let a write through a moment later. Keep it full:
		// under noeviction a maxmemory below what is used evicts nothing and refuses writes.
		if _, err := srv.Command("CONFIG", "SET", "maxmemory", "1mb"); err != nil {
			t.Fatal(err)
		}
		r, err := paired.Reserve(ctx, victim)
		if err != nil || r.Claimed() {
			t.Fatalf("the duplicate of the running claim after the flood: %+v %v, want its running record", r, err)
		}
		fresh := leaseClaim("fresh-key-000000001", `{"amount":5}`, time.Minute)
		if r, err := paired.Reserve(ctx, fresh); err == nil {
			t.Errorf("a new claim with memory full: %+v, want Redis's OOM refusal (503, nothing runs)", r)
		} else {
			t.Logf("a new claim with memory full: %v", err)
		}
	})

	t.Run("changed while running", func(t *testing.T) {
		ctx := context.Background()
		srv := redistest.StartServer(t, redistest.ServerOptions{})
		leases, err := redisstore.New(redistest.Connect(t, srv.Addr), redisstore.Options{PolicyRecheck: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Command("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond)
		if _, err := leases.Reserve(ctx, leaseClaim("changed-key-0000001", "{}", time.Minute)); !errors.Is(err, redisstore.ErrEvictionPolicy) {
			t.Errorf("Reserve after CONFIG SET maxmemory-policy allkeys-lru: %v, want ErrEvictionPolicy", err)
		}
		if _, err := srv.Command("CONFIG", "SET", "maxmemory-policy", "noeviction"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond)
		if r, err := leases.Reserve(ctx, leaseClaim("changed-key-0000001", "{}", time.Minute)); err != nil || !r.Claimed() {
			t.Errorf("Reserve after noeviction again: %+v %v", r, err)
		}
	})

	t.Run("reconnect", func(t *testing.T) {
		// A reconnect may reach another server (a failover, a restart with another
		// configuration): the first claim after a connection failure checks again, however
		// recent the last check.
		ctx := context.Background()
		srv := redistest.StartServer(t, redistest.ServerOptions{})
		leases, err := redisstore.New(redistest.Connect(t, srv.Addr), redisstore.Options{PolicyRecheck: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		srv.Kill()
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		if _, err := leases.Reserve(cctx, leaseClaim("reconnect-key-00001", "{}", time.Minute)); err == nil {
			t.Fatal("Reserve with the server down succeeded")
		}
		cancel()
		srv.Restart()
		if _, err := srv.Command("CONFIG", "SET", "maxmemory-policy", "volatile-lru"); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := leases.Reserve(ctx, leaseClaim("reconnect-key-00001", "{}", time.Minute))
			if errors.Is(err, redisstore.ErrEvictionPolicy) {
				break
			}
			if err == nil || time.Now().After(deadline) {
				t.Fatalf("Reserve on the restarted server with volatile-lru: %v, want ErrEvictionPolicy", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("CONFIG refused", func(t *testing.T) {
		// Managed services often rename or forbid CONFIG: the policy is read from INFO.
		srv := redistest.StartServer(t, redistest.ServerOptions{Config: []string{"maxmemory-policy allkeys-lru", `rename-command CONFIG ""`}})
		if _, err := redisstore.New(redistest.Connect(t, srv.Addr), redisstore.Options{}); !errors.Is(err, redisstore.ErrEvictionPolicy) {
			t.Errorf("New: %v, want ErrEvictionPolicy (read through INFO)", err)
		}
		ok := redistest.StartServer(t, redistest.ServerOptions{Config: []string{`rename-command CONFIG ""`}})
		if _, err := redisstore.New(redistest.Connect(t, ok.Addr), redisstore.Options{}); err != nil {
			t.Errorf("New on noeviction read through INFO: %v", err)
		}
	})

	t.Run("CONFIG and INFO refused", func(t *testing.T) {
		srv := redistest.StartServer(t, redistest.ServerOptions{Config: []string{`rename-command CONFIG ""`, `rename-command INFO ""`}})
		client := redistest.Connect(t, srv.Addr)
		if _, err := redisstore.New(client, redisstore.Options{}); !errors.Is(err, redisstore.ErrPolicyUnknown) {
			t.Errorf("New: %v, want ErrPolicyUnknown", err)
		}
		leases, err := redisstore.New(client, redisstore.Options{AssumeNoEviction: true})
		if err != nil {
			t.Fatalf("New with AssumeNoEviction: %v", err)
		}
		if r, err := leases.Reserve(context.Background(), leaseClaim("assumed-key-0000001", "{}", time.Minute)); err != nil || !r.Claimed() {
			t.Errorf("Reserve: %+v %v", r, err)
		}
	})

	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3, redistest.ServerOptions{})
		if _, err := c.Nodes[2].Command("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
			t.Fatal(err)
		}
		_, err := redisstore.New(redistest.Connect(t, c.Addrs()...), redisstore.Options{})
		if !errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), c.Nodes[2].Addr) {
			t.Errorf("New on a cluster with one node on allkeys-lru: %v, want ErrEvictionPolicy naming %s", err, c.Nodes[2].Addr)
		}
	})
}
