package pgstore_test

import (
	"context"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// slowCompletionHandler is a lease-mode handler whose completion writes its row and then waits
// in the gate named by X-Hold (or, with X-Signal, signals the crash test's parent and runs a
// statement of a minute): a completion that holds its transaction, and the record's row lock.
func (e *env) slowCompletionHandler(op *runtime.Operation, p *provider) http.Handler {
	return runtime.LeaseHandler(e.rt, op, runtime.BindLease(decodePay, func(ctx context.Context, l *runtime.Lease, r *payReq) (runtime.CompleteFunc[pgstore.DBTX], error) {
		pk, err := l.ProviderKey(ctx, "charge")
		if err != nil {
			return nil, err
		}
		p.charge(pk)
		return func(ctx context.Context, db pgstore.DBTX) (runtime.Response, error) {
			var id int64
			if err := db.QueryRow(ctx, insertPay+" RETURNING id", r.Tenant, r.Amount).Scan(&id); err != nil {
				return runtime.Response{}, err
			}
			if r.Header.Get("X-Signal") != "" {
				os.Stdout.WriteString("IN_HANDLER\n")
				if _, err := db.Exec(ctx, "SELECT pg_sleep(60)"); err != nil {
					return runtime.Response{}, err
				}
			}
			if err := e.pause(ctx, r); err != nil {
				return runtime.Response{}, err
			}
			done := *r
			done.Header = http.Header{}
			return e.answer(ctx, &done, id)
		}, nil
	}))
}

// Lease mode: a duplicate that meets a running completion is answered 409 within its own
// bound, as a duplicate of an atomic claim is; it never waits on the completion's row lock.
// (Waiting on the lock, 30 duplicates of a completion held for 8 s would each hold a pool
// connection for the store timeout, 5 s, and get 503 "the request was not processed".)
// Whether the lease still runs or has ended (a takeover must not start while a completion
// runs), and with the pool's handler slots busy elsewhere.
func TestLeaseCompletionHoldsNoDuplicate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease time.Duration
	}{{"lease running", 5 * time.Second}, {"lease ended", 200 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			// The default store timeout: a duplicate that waited on the lock would wait the
			// whole held completion and get 503 after it; one that does not answers at once.
			e := newEnv(t, func(s *setup) { s.maxConns = 20 })
			p := &provider{}
			op := leaseOp()
			op.Lease = tc.lease
			h := e.slowCompletionHandler(op, p)
			first := make(chan *responseSummary)
			go func() { first <- summarize(t, serve(h, req("t1", key1, body100, "X-Hold", "complete"))) }()
			g := e.gate("complete")
			g.wait(t)
			time.Sleep(tc.lease + 50*time.Millisecond) // "lease ended": past it

			const dups = 30
			var wg sync.WaitGroup
			got := make([]*responseSummary, dups)
			took := make([]time.Duration, dups)
			for i := range dups {
				wg.Add(1)
				go func() {
					defer wg.Done()
					start := time.Now()
					got[i] = summarize(t, serve(h, req("t1", key1, body100)))
					took[i] = time.Since(start)
				}()
			}
			wg.Wait()
			var slowest time.Duration
			for i, s := range got {
				if s.status != 409 {
					t.Errorf("duplicate %d during the completion: %d %s (after %v), want 409 in-flight", i, s.status, s.body, took[i].Round(time.Millisecond))
				}
				slowest = max(slowest, took[i])
			}
			t.Logf("%d duplicates of a held completion: slowest answer %v", dups, slowest.Round(time.Millisecond))
			g.open()
			if s := <-first; s.status != 201 {
				t.Fatalf("the first request: %+v", s)
			}
			if s := summarize(t, serve(h, req("t1", key1, body100))); s.status != 201 || !s.replayed {
				t.Errorf("after the completion: %+v, want the replay", s)
			}
			if n, c := e.payments("t1"), p.count(); n != 1 || c != 1 {
				t.Errorf("payments %d, provider charges %d; want 1 and 1", n, c)
			}
		})
	}
}

// A process killed while PostgreSQL runs a statement of its lease completion: the orphaned
// backend is cut short by client_connection_check_interval, as an orphaned atomic claim's is,
// so the retry is 409 (never 503) until the lease ends, then takes over and completes once.
// (Waiting on the orphan's row lock instead, retries would get 503 until its statement ended.)
func TestCrashDuringALeaseCompletion(t *testing.T) {
	e := newEnv(t, func(s *setup) { s.cfg.StoreTimeout = 2 * time.Second })
	// Killed once PostgreSQL runs the completion's statement.
	crashChildAfter(t, "lease-completion", e.url, func() bool {
		var n int
		err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'active' AND query = 'SELECT pg_sleep(60)'`).Scan(&n)
		return err == nil && n > 0
	})
	killed := time.Now()
	h := e.crashHandler("lease-completion")
	var s *responseSummary
	statuses := map[int]int{}
	for time.Since(killed) < 15*time.Second {
		s = summarize(t, serve(h, req("t1", key1, body100)))
		statuses[s.status]++
		if s.status != 409 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	freed := time.Since(killed)
	t.Logf("retries after the kill: %v; taken over after %v", statuses, freed.Round(time.Millisecond))
	if s.status != 201 || s.replayed {
		t.Fatalf("retry %v after the kill: %+v", freed.Round(time.Millisecond), s)
	}
	if statuses[503] > 0 {
		t.Errorf("%d retries got 503: a duplicate must never wait on the orphaned completion", statuses[503])
	}
	if freed > 5*time.Second {
		t.Errorf("the key stayed blocked %v after the kill, want the lease plus a few seconds", freed)
	}
	p := &provider{db: e.pool}
	if n, c := e.payments("t1"), p.count(); n != 1 || c != 1 {
		t.Fatalf("payments %d, provider charges %d; want 1 and 1", n, c)
	}
}
