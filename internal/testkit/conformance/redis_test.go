package conformance_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/conformance/conformancetest"
	"github.com/idemgen/idemgen/internal/testkit/redistest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// TestCasesRedisCache runs every case against the service whose store is the Redis replay
// cache in front of PostgreSQL: on a standalone server with the in-process tier, and on a
// 3-master cluster without it (every replay then goes to Redis).
func TestCasesRedisCache(t *testing.T) {
	for _, topo := range redistest.Topologies {
		t.Run(string(topo), func(t *testing.T) {
			conformancetest.RunOn(t, "../../..", func(t testing.TB, db *pgxpool.Pool) store.Transactional[pgstore.DBTX] {
				opts := redisstore.CacheOptions{Prefix: redistest.Prefix(t)}
				if topo == redistest.Standalone {
					opts.LocalBytes = 16 << 20
				}
				return redisstore.NewCache[pgstore.DBTX](pgstore.New(db, pgstore.Options{}), redistest.NewClient(t, topo), opts)
			}, service, nil)
		})
	}
}

// TestCasesRedisLease runs every case against the service whose store is the Redis lease store
// paired with PostgreSQL: the lease-mode cases (provider charges) claim, take over and replay in
// Redis and complete in PostgreSQL; the atomic-mode ones run on PostgreSQL as they do alone.
// On a standalone server and on a 3-master cluster.
func TestCasesRedisLease(t *testing.T) {
	for _, topo := range redistest.Topologies {
		t.Run(string(topo), func(t *testing.T) {
			conformancetest.RunOn(t, "../../..", func(t testing.TB, db *pgxpool.Pool) store.Transactional[pgstore.DBTX] {
				leases, err := redisstore.New(redistest.NewClient(t, topo), redisstore.Options{Prefix: redistest.Prefix(t)})
				if err != nil {
					t.Fatal(err)
				}
				return redisstore.Pair[pgstore.DBTX](leases, pgstore.New(db, pgstore.Options{}))
			}, service, nil)
		})
	}
}
