package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/internal/testkit/redistest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
	"github.com/idemgen/idemgen/runtime/store"
	"github.com/idemgen/idemgen/runtime/store/storetest"
)

// newPG returns a PostgreSQL store on a fresh migrated database.
func newPG(t *testing.T) *pgstore.Store {
	t.Helper()
	return pgstore.New(newPool(t), pgstore.Options{})
}

// emptied returns a function that gives each subtest of a suite the store pg with an empty
// table: the suites make a store per subtest, one after the other, and creating a database for
// each costs a hundred times more than emptying one.
func emptied(pg *pgstore.Store) func(t *testing.T) *pgstore.Store {
	return func(t *testing.T) *pgstore.Store {
		t.Helper()
		if _, err := pg.Pool().Exec(context.Background(), "TRUNCATE idempotency_records, idempotency_provider_calls, idempotency_tombstones"); err != nil {
			t.Fatal(err)
		}
		return pg
	}
}

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t, 20)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

// testCacheOptions are the cache's options in tests: the suite's retentions are tens of
// milliseconds, so the clock margin is one.
func testCacheOptions(t *testing.T, local bool) redisstore.CacheOptions {
	o := redisstore.CacheOptions{Prefix: redistest.Prefix(t), ClockMargin: time.Millisecond}
	if local {
		o.LocalBytes = 1 << 20
	}
	return o
}

// TestPairedSuite runs both shared suites on the Redis lease store paired with PostgreSQL, on a
// standalone server and on a cluster.
func TestPairedSuite(t *testing.T) {
	for _, topo := range redistest.Topologies {
		t.Run(string(topo), func(t *testing.T) {
			pg := emptied(newPG(t))
			newPaired := func(t *testing.T) *redisstore.Paired[pgstore.DBTX] {
				return redisstore.Pair[pgstore.DBTX](newStore(t, topo), pg(t))
			}
			t.Run("Store", func(t *testing.T) {
				storetest.RunStoreTests(t, func(t *testing.T) store.Store { return newPaired(t) })
			})
			t.Run("Transactional", func(t *testing.T) {
				storetest.RunTransactionalTests(t, func(t *testing.T) store.Transactional[pgstore.DBTX] { return newPaired(t) })
			})
		})
	}
}

// TestCacheSuite runs both shared suites on the replay cache in front of PostgreSQL, with and
// without the in-process tier, on a standalone server and on a cluster.
func TestCacheSuite(t *testing.T) {
	for _, topo := range redistest.Topologies {
		for _, local := range []bool{false, true} {
			name := string(topo)
			if local {
				name += "+local"
			}
			t.Run(name, func(t *testing.T) {
				pg := emptied(newPG(t))
				newCache := func(t *testing.T) *redisstore.Cache[pgstore.DBTX] {
					return redisstore.NewCache[pgstore.DBTX](pg(t), redistest.NewClient(t, topo), testCacheOptions(t, local))
				}
				t.Run("Store", func(t *testing.T) {
					storetest.RunStoreTests(t, func(t *testing.T) store.Store { return newCache(t) })
				})
				t.Run("Transactional", func(t *testing.T) {
					storetest.RunTransactionalTests(t, func(t *testing.T) store.Transactional[pgstore.DBTX] { return newCache(t) })
				})
			})
		}
	}
}
