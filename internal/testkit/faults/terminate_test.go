package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
)

// The moment of a stop that the storm of scenario 3 hits by chance, made deterministic: the
// server commits a request's transaction and acknowledges the COMMIT, then terminates the
// session (pg_terminate_backend, as a fast shutdown does) before the pipeline's end. The
// replica's sessions run with commit_delay, so each COMMIT sleeps 100ms inside the commit, where
// the termination is held off until the commit is done. The client must be told the truth:
// success (the COMMIT was acknowledged), or at worst that the outcome is unknown; never "not
// processed". The retry replays.
func TestTerminatedAfterCommit(t *testing.T) {
	if pgtest.ViaPgBouncer() {
		t.Skip("PgBouncer refuses the startup parameters that slow the COMMIT down (commit_delay)")
	}
	for _, mode := range []string{"atomic", "lease"} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, pgtest.NewDatabase(t))
			a := w.replica("A", func(c *replicaConfig) {
				c.Session = map[string]string{"commit_delay": "100000", "commit_siblings": "0"}
			})
			h := NewHistory()
			c := NewClient(h, 30*time.Second)
			defer c.Close()
			ctx := context.Background()
			began := time.Now()
			r := &Request{Logical: c.NextLogical(), Mode: mode, Tenant: "tC", Key: w.key("commit-ack"), Amount: 100}
			done := make(chan Attempt, 1)
			go func() { done <- c.Send(ctx, a.target(), r) }()
			var pid int
			eventually(t, "the request's COMMIT to be in progress", 30*time.Second, func() bool {
				err := w.pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
					WHERE datname = current_database() AND state = 'active' AND query = 'COMMIT'`).Scan(&pid)
				return err == nil
			})
			var terminated bool
			if err := w.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&terminated); err != nil || !terminated {
				t.Fatalf("pg_terminate_backend(%d): %v %v", pid, terminated, err)
			}
			first := <-done
			retry := c.Run(ctx, r, Policy{Pick: func(int) Target { return a.target() }, MaxBackoff: 50 * time.Millisecond, Deadline: 30 * time.Second})
			w.verify("terminated-after-commit/"+mode, h, time.Since(began),
				AuditOptions{Allowed: []Kind{KindOK, KindReplay, KindUnknown, KindUnavailable}, Settled: true}, ModelOptions{},
				fmt.Sprintf("session terminated during its acknowledged COMMIT: the client got %d %s (%s); the retry %s of %s", first.Status, first.Kind, first.Detail, retry.Kind, retry.ExecAttempt))
			if first.Kind == KindUnavailable {
				t.Errorf("the request whose COMMIT the server acknowledged was answered %d %q", first.Status, first.Detail)
			}
		})
	}
}

// The other moment of a stop that scenario 3 hits by chance: the session is terminated while a
// statement of the handler's transaction runs (its pg_sleep). Nothing committed; the database,
// which is the idempotency store in atomic mode and the completion's store in lease mode, went
// away under the handler. The answer must be 503 (docs/design.md section 1: the store cannot be reached → 503,
// never 500), and the retry runs once.
func TestTerminatedInHandler(t *testing.T) {
	for _, mode := range []string{"atomic", "lease"} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, pgtest.NewDatabase(t))
			a := w.replica("A", nil)
			h := NewHistory()
			c := NewClient(h, 30*time.Second)
			defer c.Close()
			ctx := context.Background()
			began := time.Now()
			r := &Request{Logical: c.NextLogical(), Mode: mode, Tenant: "tC", Key: w.key("terminated"), Amount: 100,
				Headers: map[string]string{"X-Hold": "complete", "X-Sleep-SQL": "30s"}}
			done := make(chan Attempt, 1)
			go func() { done <- c.Send(ctx, a.target(), r) }()
			a.awaitHandler(done)
			var pid int
			eventually(t, "the handler's statement to run", 30*time.Second, func() bool {
				err := w.pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
					WHERE datname = current_database() AND state = 'active' AND query LIKE 'SELECT pg_sleep%'`).Scan(&pid)
				return err == nil
			})
			var terminated bool
			if err := w.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&terminated); err != nil || !terminated {
				t.Fatalf("pg_terminate_backend(%d): %v %v", pid, terminated, err)
			}
			first := <-done
			retry := &Request{Logical: r.Logical, Mode: mode, Tenant: r.Tenant, Key: r.Key, Amount: r.Amount}
			final := c.Run(ctx, retry, Policy{Pick: func(int) Target { return a.target() }, MaxBackoff: 50 * time.Millisecond, Deadline: 30 * time.Second})
			c.Send(ctx, a.target(), retry)
			w.verify("terminated-in-handler/"+mode, h, time.Since(began),
				AuditOptions{Allowed: []Kind{KindOK, KindReplay, KindConflict, KindUnknown, KindUnavailable}, Settled: true}, ModelOptions{},
				fmt.Sprintf("session terminated during the handler's statement: the client got %d %s (%s); the retry %s", first.Status, first.Kind, first.Detail, final.Kind))
			if first.Status != 503 {
				t.Errorf("the request whose database session was terminated mid-handler got %d, want 503", first.Status)
			}
		})
	}
}
