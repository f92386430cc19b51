package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// BenchmarkAtomic compares the runtime's paths under each claim strategy with a baseline in the
// same run: the same business INSERT in a plain pgx transaction (what the handler would cost
// without idempotency). Report the
// ratios, not the absolute times (they depend on the machine):
//
//	scripts/with-postgres.sh go test ./runtime/pgstore -run '^$' -bench Atomic -benchtime 2000x
func BenchmarkAtomic(b *testing.B) {
	e := newEnvB(b, nil)
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
	for _, s := range strategies {
		h := newEnvB(b, withStrategy(s.strategy)).atomicHandler(payOp())
		b.Run(s.name+"/new-key", func(b *testing.B) {
			for i := range b.N {
				if w := serve(h, req("t1", fmt.Sprintf("k-bench-new-%016d", i), body100)); w.Code != 201 {
					b.Fatal(w.Code)
				}
			}
		})
		serve(h, req("t1", "k-bench-replay-000001", body100))
		b.Run(s.name+"/replay", func(b *testing.B) {
			for range b.N {
				if w := serve(h, req("t1", "k-bench-replay-000001", body100)); w.Code != 201 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}

// BenchmarkClaimsWhileSweeping measures new-key requests while a sweeper deletes 100k expired
// rows, with the default small batches and with one big DELETE, against no sweeper at all (the
// baseline in the same run):
//
//	scripts/with-postgres.sh go test ./runtime/pgstore -run '^$' -bench ClaimsWhileSweeping -benchtime 300x
func BenchmarkClaimsWhileSweeping(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		sweep *pgstore.Sweeper
	}{
		{"no-sweeper", nil},
		{"small-batches-default", &pgstore.Sweeper{}},
		{"one-big-delete", &pgstore.Sweeper{BatchSize: 1 << 30}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnvB(b, nil)
			h := e.atomicHandler(payOp())
			if _, err := e.pool.Exec(ctx, `INSERT INTO idempotency_records
				(scope_id, key_id, created_at, expires_at, locked_until, fencing_token, fingerprint,
				 fingerprint_version, response_status, body_omitted, operation, response_headers, response_body)
				SELECT g % 100, md5('expired-' || g)::uuid, now(), now() - interval '1 second', now(), 1, '\x00',
				       1, 201, false, 'op', '\x', convert_to(repeat('x', 200), 'UTF8')
				FROM generate_series(1, 100000) g`); err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			if c.sweep != nil {
				c.sweep.Pool = e.pool
				go func() {
					defer close(done)
					if _, err := c.sweep.SweepOnce(ctx); err != nil {
						b.Error(err)
					}
				}()
			} else {
				close(done)
			}
			b.ResetTimer()
			for i := range b.N {
				if w := serve(h, req("t1", fmt.Sprintf("k-sweep-bench-%016d", i), body100)); w.Code != 201 {
					b.Fatal(w.Code)
				}
			}
			b.StopTimer()
			<-done
		})
	}
}

// BenchmarkPooler measures the default claim strategy's new key and replay, with the plain
// transaction as the baseline of each row, on a direct connection in pgx's default statement
// mode (cache_statement) and in exec mode, and through PgBouncer in transaction pooling mode
// (exec mode, as Open requires there): docs/runtime.md, "Behind a connection pooler".
//
//	scripts/with-postgres.sh scripts/with-pgbouncer.sh go test ./runtime/pgstore -run '^$' -bench Pooler -benchtime 2000x
func BenchmarkPooler(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct {
		name, mode string
		pooled     bool
	}{
		{"direct-cache_statement", "", false},
		{"direct-exec", "exec", false},
		{"pgbouncer-exec", "exec", true},
	} {
		direct := pgtest.NewDatabase(b)
		url := withExecMode(b, direct, c.mode)
		if c.pooled {
			url = pgtest.PoolerURL(b, direct)
		}
		e := newEnvAt(b, url, func(s *setup) { s.store.Limits.Records = -1; s.open = true; s.store.Logger = discardLogger() })
		h := e.atomicHandler(payOp())
		b.Run(c.name+"/baseline-plain-tx", func(b *testing.B) {
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
		runs := 0
		b.Run(c.name+"/new-key", func(b *testing.B) {
			runs++ // -count runs it again: with new keys
			for i := range b.N {
				if w := serve(h, req("t1", fmt.Sprintf("k-bench-new-%04d-%012d", runs, i), body100)); w.Code != 201 || w.Header().Get(runtime.HeaderReplayed) != "" {
					b.Fatal(w.Code)
				}
			}
		})
		serve(h, req("t1", "k-bench-replay-000001", body100))
		b.Run(c.name+"/replay", func(b *testing.B) {
			for range b.N {
				if w := serve(h, req("t1", "k-bench-replay-000001", body100)); w.Code != 201 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
