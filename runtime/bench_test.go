package runtime

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkAtomic compares the runtime's paths with a baseline in the same run: the same business
// INSERT in a plain pgx transaction (what the handler would cost without idempotency). Report the
// ratios, not the absolute times (they depend on the machine):
//
//	scripts/with-postgres.sh go test ./runtime -run '^$' -bench Atomic -benchtime 2000x
func BenchmarkAtomic(b *testing.B) {
	e := newEnvB(b)
	h := e.atomicHandler(payOp())
	ctx := context.Background()

	b.Run("baseline-plain-tx", func(b *testing.B) {
		for range b.N {
			tx, err := e.pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO payments (scope, amount) VALUES ($1, $2) RETURNING id", "t1", 100); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new-key", func(b *testing.B) {
		for i := range b.N {
			if w := serve(h, req("t1", fmt.Sprintf("k-bench-new-%016d", i), body100)); w.Code != 201 {
				b.Fatal(w.Code)
			}
		}
	})
	serve(h, req("t1", "k-bench-replay-000001", body100))
	b.Run("replay", func(b *testing.B) {
		for range b.N {
			if w := serve(h, req("t1", "k-bench-replay-000001", body100)); w.Code != 201 {
				b.Fatal(w.Code)
			}
		}
	})
}
