package memstore_test

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/store"
	"github.com/idemgen/idemgen/runtime/store/memstore"
	"github.com/idemgen/idemgen/runtime/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.RunStoreTests(t, func(*testing.T) store.Store { return memstore.New(nil) })
}

func TestTransactional(t *testing.T) {
	storetest.RunTransactionalTests(t, func(*testing.T) store.Transactional[*memstore.DB] { return memstore.New(nil) })
}
