package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// countingStore is the store a service is given, in front of a real one: it counts the claims
// that reach it (BeginAtomic for an atomic-mode request, Reserve for a lease-mode one) and, when
// refuse is set, fails them with it.
type countingStore struct {
	store.Transactional[pgstore.DBTX]
	refuse           error
	atomics, reserve atomic.Int64
}

func (s *countingStore) BeginAtomic(ctx context.Context, c store.Claim) (store.Tx[pgstore.DBTX], *store.Record, error) {
	s.atomics.Add(1)
	if s.refuse != nil {
		return nil, nil, s.refuse
	}
	return s.Transactional.BeginAtomic(ctx, c)
}

func (s *countingStore) Reserve(ctx context.Context, c store.Claim) (store.Reservation, error) {
	s.reserve.Add(1)
	if s.refuse != nil {
		return store.Reservation{}, s.refuse
	}
	return s.Transactional.Reserve(ctx, c)
}

// TestServiceKeepsRecordsOnlyInItsStore: the conformance service claims every key through the
// store it is given and nowhere else. Each keyed request to a marked operation reaches that
// store (a retry too: the store answers it from the record), and when the store's claims fail
// the service fails closed, 503 store-unavailable, with no business row written and no
// provider call made.
func TestServiceKeepsRecordsOnlyInItsStore(t *testing.T) {
	const tenant = "only-its-store"
	payment := func(i int) string { return fmt.Sprintf(`{"amount": %d, "currency": "EUR", "to": "acc_1"}`, 100+i) }
	charge := func(i int) string { return fmt.Sprintf(`{"amount": %d}`, 200+i) }
	counting := func(refuse error, st **countingStore) func(testing.TB, *pgxpool.Pool) store.Transactional[pgstore.DBTX] {
		return func(_ testing.TB, db *pgxpool.Pool) store.Transactional[pgstore.DBTX] {
			*st = &countingStore{Transactional: pgstore.New(db, pgstore.Options{}), refuse: refuse}
			return *st
		}
	}

	t.Run("every-claim-goes-through-it", func(t *testing.T) {
		var st *countingStore
		s := newFailureService(t, counting(nil, &st))
		const n = 3
		for i := range n {
			for try := range 2 {
				if a := s.post(t, "/v1/payments", tenant, fmt.Sprintf("k-only-payment-%03d-xxxx", i), payment(i)); a.status != 201 || a.replayed != (try == 1) {
					t.Errorf("payment %d, try %d: %v %s", i, try, a, a.body)
				}
				if a := s.post(t, "/v1/provider-charges", tenant, fmt.Sprintf("k-only-charge-%03d-xxxxx", i), charge(i)); a.status != 201 || a.replayed != (try == 1) {
					t.Errorf("charge %d, try %d: %v %s", i, try, a, a.body)
				}
			}
		}
		if got := st.atomics.Load(); got != 2*n {
			t.Errorf("%d atomic-mode claims reached the store, want %d (one per request)", got, 2*n)
		}
		if got := st.reserve.Load(); got != 2*n {
			t.Errorf("%d lease-mode claims reached the store, want %d (one per request)", got, 2*n)
		}
		if got := rows(t, s, "payments", tenant) + rows(t, s, "provider_charges", tenant); got != 2*n {
			t.Errorf("%d payment and charge rows, want %d", got, 2*n)
		}
		if calls := providerCalls(t, s, tenant); calls != n {
			t.Errorf("the provider charged %d times, want %d", calls, n)
		}
	})

	t.Run("claims-fail-503-and-nothing-written", func(t *testing.T) {
		var st *countingStore
		s := newFailureService(t, counting(errors.New("the test's store refuses every claim"), &st))
		if a := s.post(t, "/v1/payments", tenant, "k-only-refused-payment-x", payment(0)); a.String() != "503 store-unavailable" {
			t.Errorf("payment on a store whose claims fail: %v %s, want 503 store-unavailable", a, a.body)
		}
		if a := s.post(t, "/v1/provider-charges", tenant, "k-only-refused-charge-xx", charge(0)); a.String() != "503 store-unavailable" {
			t.Errorf("charge on a store whose claims fail: %v %s, want 503 store-unavailable", a, a.body)
		}
		if a, r := st.atomics.Load(), st.reserve.Load(); a != 1 || r != 1 {
			t.Errorf("claims that reached the failing store: %d atomic, %d lease; want 1 and 1", a, r)
		}
		for _, table := range []string{"payments", "provider_charges"} {
			if got := rows(t, s, table, tenant); got != 0 {
				t.Errorf("%d %s rows written although the claim failed", got, table)
			}
		}
		if calls := providerCalls(t, s, tenant); calls != 0 {
			t.Errorf("the provider charged %d times although the claim failed", calls)
		}
	})
}

// rows counts tenant's rows of table in the service's database.
func rows(t *testing.T, s *failureService, table, tenant string) int {
	t.Helper()
	n := 0
	for _, c := range s.countBy(t, table, tenant) {
		n += c
	}
	return n
}
