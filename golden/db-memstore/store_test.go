package dbmemstore

// Hand-written tests of the code generated for testdata/specs/db-memstore.yaml, whose config
// names the in-memory store's handle (db: *memstore.DB): the store the generated DBTX belongs to
// passes the store suite, and the generated handlers of both modes run through it, writing
// through DBTX in the store's transactions. memstore is a unit-test store; the point here is
// that generated code is not tied to PostgreSQL's handle.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/store"
	"github.com/idemgen/idemgen/runtime/store/memstore"
	"github.com/idemgen/idemgen/runtime/store/storetest"
)

// The generated handle is the in-memory store's: the store runs writes through DBTX.
var _ store.Transactional[DBTX] = (*memstore.Store)(nil)

func TestStoreSuite(t *testing.T) {
	storetest.RunStoreTests(t, func(t *testing.T) store.Store { return memstore.New(nil) })
	storetest.RunTransactionalTests(t, func(t *testing.T) store.Transactional[DBTX] { return memstore.New(nil) })
}

func TestHandlersWriteThroughDBTX(t *testing.T) {
	st := memstore.New(nil)
	rt, err := runtime.New(runtime.Config{Store: st, SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	var entries, settles atomic.Int32
	mux := http.NewServeMux()
	err = Register(mux, rt, Handlers{
		CreateEntry: func(ctx context.Context, tx DBTX, p CreateEntryParams, body CreateEntryBody) (runtime.Response, error) {
			n := entries.Add(1)
			tx.Put("entry/"+body.Account, fmt.Sprint(body.Amount))
			return runtime.Response{Status: 201, Body: []byte(fmt.Sprintf(`{"entry":%d}`, n))}, nil
		},
		SettleEntry: func(ctx context.Context, lease *runtime.Lease, p SettleEntryParams) (runtime.CompleteFunc[DBTX], error) {
			settles.Add(1) // the bank call, outside any transaction
			return func(ctx context.Context, tx DBTX) (runtime.Response, error) {
				tx.Put("settled/"+p.EntryID, "yes")
				return runtime.Response{Status: 200, Body: []byte(`{"settled":"` + p.EntryID + `"}`)}, nil
			}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	send := func(path, key, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Idempotency-Key", key)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	r1, b1 := send("/entries", "entry-key-0000000001", `{"account":"acc_1","amount":250}`)
	if r1.StatusCode != 201 || b1 != `{"entry":1}` {
		t.Fatalf("first: %d %s", r1.StatusCode, b1)
	}
	if v, ok := st.Value("entry/acc_1"); !ok || v != "250" {
		t.Errorf("the handler's write through DBTX: %q %v, want 250 committed with the record", v, ok)
	}
	r2, b2 := send("/entries", "entry-key-0000000001", `{ "amount": 250, "account": "acc_1" }`)
	if r2.Header.Get("Idempotent-Replayed") != "true" || b2 != b1 || entries.Load() != 1 {
		t.Errorf("retry: %d %s replayed=%q, handler ran %d times", r2.StatusCode, b2, r2.Header.Get("Idempotent-Replayed"), entries.Load())
	}
	if r, _ := send("/entries", "entry-key-0000000001", `{"account":"acc_1","amount":251}`); r.StatusCode != 422 {
		t.Errorf("another body under the same key: %d, want 422", r.StatusCode)
	}

	r3, b3 := send("/entries/e_7/settle", "settle-key-000000001", "")
	r4, b4 := send("/entries/e_7/settle", "settle-key-000000001", "")
	if r3.StatusCode != 200 || b3 != `{"settled":"e_7"}` || r4.Header.Get("Idempotent-Replayed") != "true" || b4 != b3 || settles.Load() != 1 {
		t.Errorf("lease mode: %d %s, then %d %s, call phase ran %d times", r3.StatusCode, b3, r4.StatusCode, b4, settles.Load())
	}
	if v, ok := st.Value("settled/e_7"); !ok || v != "yes" {
		t.Errorf("the completion's write through DBTX: %q %v", v, ok)
	}
}

// TestRegisterRefusesAnotherStore: a store whose transactions do not give DBTX cannot serve the
// handlers; Register says so instead of mounting them.
func TestRegisterRefusesAnotherStore(t *testing.T) {
	plain := struct{ store.Store }{memstore.New(nil)} // records only, no transactions
	rt, err := runtime.New(runtime.Config{Store: plain, SingleTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	err = Register(http.NewServeMux(), rt, Handlers{
		CreateEntry: func(context.Context, DBTX, CreateEntryParams, CreateEntryBody) (runtime.Response, error) {
			return runtime.Response{}, nil
		},
	})
	if err == nil || !strings.Contains(err.Error(), "memstore.DB") {
		t.Fatalf("Register on a store without DBTX transactions: %v", err)
	}
}
