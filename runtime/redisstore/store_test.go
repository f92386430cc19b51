package redisstore_test

import (
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/redistest"
	"github.com/idemgen/idemgen/runtime/redisstore"
	"github.com/idemgen/idemgen/runtime/store"
	"github.com/idemgen/idemgen/runtime/store/storetest"
)

// newStore returns a lease store on the shared deployment topo, under a prefix of its own.
func newStore(t *testing.T, topo redistest.Topology) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redistest.NewClient(t, topo), redisstore.Options{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStoreSuite runs the shared lease-mode suite on a standalone server and on a 3-master
// cluster.
func TestStoreSuite(t *testing.T) {
	for _, topo := range redistest.Topologies {
		t.Run(string(topo), func(t *testing.T) {
			storetest.RunStoreTests(t, func(t *testing.T) store.Store { return newStore(t, topo) })
		})
	}
}
