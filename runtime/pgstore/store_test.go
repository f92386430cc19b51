package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
	"github.com/idemgen/idemgen/runtime/store/storetest"
)

// newPool returns a pool on a fresh migrated database.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

func TestStoreSuite(t *testing.T) {
	storetest.RunStoreTests(t, func(t *testing.T) store.Store {
		return pgstore.New(newPool(t), pgstore.Options{Partitioned: partitioned()})
	})
}

func TestTransactionalSuite(t *testing.T) {
	for name, strategy := range map[string]pgstore.ClaimStrategy{
		"WithStatement": pgstore.ClaimWithStatement{},
		"ReadFirst":     pgstore.ClaimReadFirst{},
		"Pipelined":     pgstore.ClaimPipelined{},
	} {
		t.Run(name, func(t *testing.T) {
			storetest.RunTransactionalTests(t, func(t *testing.T) store.Transactional[pgstore.DBTX] {
				// Without a records cap, under which ClaimPipelined claims as ClaimReadFirst.
				return pgstore.New(newPool(t), pgstore.Options{Claim: strategy, Partitioned: partitioned(), Limits: pgstore.Limits{Records: -1}})
			})
		})
	}
	t.Run("NoAdvisoryLocks", func(t *testing.T) {
		if partitioned() {
			t.Skip("the partitioned layout needs advisory locks")
		}
		storetest.RunTransactionalTests(t, func(t *testing.T) store.Transactional[pgstore.DBTX] {
			return pgstore.New(newPool(t), pgstore.Options{NoAdvisoryLocks: true})
		})
	})
}
