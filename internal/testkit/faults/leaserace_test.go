package faults

import (
	"context"
	"fmt"
	"github.com/jackc/pgx/v5/pgtype"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/testkit/pgtest"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// Scenario 4: lease expiry races, with a sweeper running on both replicas.
//
//   - retention-shorter-than-call: the first request's provider call outlasts
//     its lease and its retention; requests with another body, after the lease and after
//     lease + retention, must get 422 while the first owner can still complete, and the first
//     request must complete (201) with one provider charge.
//   - takeover: the same request retried after the lease takes the claim over (201, the
//     provider deduplicates its call); another body gets 422; the first owner's late completion
//     (a zombie) is refused (409) and its retry replays the new owner's response.
//   - zombie-completion-in-progress: the first owner is inside its completion transaction (the
//     record locked) when its lease ends: the same request is answered 409 without waiting on
//     the lock (or replays once the owner committed), never runs again.

// leaseRig is one lease race: replicas A and B of a lease-mode service with a sweeper.
type leaseRig struct {
	w     *world
	a, b  *replica
	h     *History
	c     *Client
	began time.Time
	lease time.Duration
}

func newLeaseRig(t *testing.T, lease, retention time.Duration) *leaseRig {
	w := newWorld(t, pgtest.NewDatabase(t))
	cfg := func(c *replicaConfig) { c.Lease, c.Retention, c.Sweep = lease, retention, 100*time.Millisecond }
	h := NewHistory()
	r := &leaseRig{w: w, a: w.replica("A", cfg), b: w.replica("B", cfg), h: h, c: NewClient(h, 60*time.Second), lease: lease}
	t.Cleanup(r.c.Close)
	r.began = time.Now()
	return r
}

// recordIs reports whether the key's record satisfies the SQL condition cond (over the row r
// and now()); a missing row satisfies it when missing is set.
func (r *leaseRig) recordIs(tenant, key, cond string, missing bool) bool {
	var ok *bool
	scopeID, keyID := pgstore.Digest(store.ID{Scope: tenant, Key: key})
	err := r.w.pool.QueryRow(context.Background(), `SELECT (SELECT `+cond+` FROM idempotency_records r WHERE scope_id = $1 AND key_id = $2)`, scopeID, pgtype.UUID{Bytes: keyID, Valid: true}).Scan(&ok)
	if err != nil {
		r.w.t.Fatal(err)
	}
	if ok == nil {
		return missing
	}
	return *ok
}

// settle retries req on t until a definitive answer.
func (r *leaseRig) settle(req *Request, t Target) Attempt {
	return r.c.Run(context.Background(), req, Policy{Pick: func(int) Target { return t }, MaxBackoff: 50 * time.Millisecond, Deadline: 60 * time.Second})
}

func TestLeaseExpiry(t *testing.T) {
	t.Run("retention-shorter-than-call", func(t *testing.T) {
		// The figures in long mode: lease 1s, retention 2s, a call of 4s.
		lease, retention, call := pick(500*time.Millisecond, time.Second), pick(time.Second, 2*time.Second), pick(2500*time.Millisecond, 4*time.Second)
		r := newLeaseRig(t, lease, retention)
		ctx := context.Background()
		key := r.w.key("expiry")
		first := &Request{Logical: r.c.NextLogical(), Mode: "lease", Tenant: "tL", Key: key, Amount: 100,
			Headers: map[string]string{"X-Hold": "call", "X-Delay": call.String()}}
		other := &Request{Logical: r.c.NextLogical(), Mode: "lease", Tenant: "tL", Key: key, Amount: 250}
		done := make(chan Attempt, 1)
		go func() { done <- r.c.Send(ctx, r.a.target(), first) }()
		r.a.awaitHandler(done)
		eventually(t, "the first claim's lease to end", 30*time.Second, func() bool {
			return r.recordIs("tL", key, "r.locked_until <= now()", true)
		})
		afterLease := r.c.Send(ctx, r.b.target(), other)
		// lease + retention after the claim: the running record's expires_at as the store sets it.
		eventually(t, "lease + retention to pass since the claim", 30*time.Second, func() bool {
			return r.recordIs("tL", key, fmt.Sprintf("now() > r.created_at + interval '%d milliseconds'", (lease+retention).Milliseconds()), true)
		})
		select {
		case a := <-done:
			t.Fatalf("the first request finished (%s) before lease + retention had passed: the machine is too slow for this scenario's timings", a.Kind)
		default:
		}
		afterRetention := r.c.Send(ctx, r.b.target(), other)
		firstAnswer := <-done
		retryFirst := &Request{Logical: first.Logical, Mode: "lease", Tenant: "tL", Key: key, Amount: 100}
		settledFirst := firstAnswer
		if !firstAnswer.Kind.Definitive() {
			settledFirst = r.settle(retryFirst, r.a.target())
		}
		settledOther := r.settle(other, r.b.target())
		confirm := r.c.Send(ctx, r.b.target(), retryFirst)
		r.w.verify("lease/retention-shorter-than-call", r.h, time.Since(r.began),
			AuditOptions{Allowed: []Kind{KindOK, KindReplay, KindConflict, KindMismatch}, Settled: true},
			ModelOptions{Retention: retention},
			fmt.Sprintf("lease %v, retention %v, call %v; another body after the lease: %d %s; after lease + retention: %d %s; the first request: %d %s, settled %s; the other body settled %s",
				lease, retention, call, afterLease.Status, afterLease.Kind, afterRetention.Status, afterRetention.Kind,
				firstAnswer.Status, firstAnswer.Kind, settledFirst.Kind, settledOther.Kind))
		for _, c := range []struct {
			what string
			got  Attempt
			want Kind
		}{
			{"another body after the first claim's lease", afterLease, KindMismatch},
			{"another body after lease + retention, the first owner still running", afterRetention, KindMismatch},
			{"the first request, whose owner nobody took over", firstAnswer, KindOK},
			{"the first request's retry", confirm, KindReplay},
		} {
			if c.got.Kind != c.want {
				t.Errorf("%s: got %d %s (%s), want %s", c.what, c.got.Status, c.got.Kind, c.got.Detail, c.want)
			}
		}
	})

	t.Run("takeover", func(t *testing.T) {
		lease, call := pick(500*time.Millisecond, time.Second), pick(1500*time.Millisecond, 4*time.Second)
		r := newLeaseRig(t, lease, time.Hour)
		ctx := context.Background()
		key := r.w.key("takeover")
		first := &Request{Logical: r.c.NextLogical(), Mode: "lease", Tenant: "tL", Key: key, Amount: 100,
			Headers: map[string]string{"X-Hold": "call", "X-Delay": call.String()}}
		done := make(chan Attempt, 1)
		go func() { done <- r.c.Send(ctx, r.a.target(), first) }()
		r.a.awaitHandler(done)
		eventually(t, "the first claim's lease to end", 30*time.Second, func() bool {
			return r.recordIs("tL", key, "r.locked_until <= now()", true)
		})
		// The same request (its client retried) takes over and completes.
		again := &Request{Logical: r.c.NextLogical(), Mode: "lease", Tenant: "tL", Key: key, Amount: 100}
		takeover := r.c.Send(ctx, r.b.target(), again)
		other := r.c.Send(ctx, r.b.target(), &Request{Logical: r.c.NextLogical(), Mode: "lease", Tenant: "tL", Key: key, Amount: 250})
		zombie := <-done
		retry := r.settle(&Request{Logical: first.Logical, Mode: "lease", Tenant: "tL", Key: key, Amount: 100}, r.a.target())
		r.w.verify("lease/takeover", r.h, time.Since(r.began),
			AuditOptions{Allowed: []Kind{KindOK, KindReplay, KindConflict, KindMismatch}, Settled: true}, ModelOptions{},
			fmt.Sprintf("lease %v, call %v; takeover: %d %s; another body: %d %s; the zombie's completion: %d %s; its retry: %s of %s",
				lease, call, takeover.Status, takeover.Kind, other.Status, other.Kind, zombie.Status, zombie.Kind, retry.Kind, retry.ExecAttempt))
		for _, c := range []struct {
			what string
			got  Attempt
			want Kind
		}{
			{"the same request after the lease (takeover)", takeover, KindOK},
			{"another body", other, KindMismatch},
			{"the zombie's completion", zombie, KindConflict},
			{"the zombie's retry", retry, KindReplay},
		} {
			if c.got.Kind != c.want {
				t.Errorf("%s: got %d %s (%s), want %s", c.what, c.got.Status, c.got.Kind, c.got.Detail, c.want)
			}
		}
		if retry.ExecAttempt != takeover.ID {
			t.Errorf("the zombie's retry replays the execution of %s, want the takeover's (%s)", retry.ExecAttempt, takeover.ID)
		}
	})

	t.Run("zombie-completion-in-progress", func(t *testing.T) {
		lease, stmt := pick(500*time.Millisecond, time.Second), pick(1200*time.Millisecond, 3*time.Second)
		r := newLeaseRig(t, lease, time.Hour)
		ctx := context.Background()
		key := r.w.key("zombie")
		first := &Request{Logical: r.c.NextLogical(), Mode: "lease", Tenant: "tL", Key: key, Amount: 100,
			Headers: map[string]string{"X-Hold": "complete", "X-Sleep-SQL": stmt.String()}}
		done := make(chan Attempt, 1)
		go func() { done <- r.c.Send(ctx, r.a.target(), first) }()
		r.a.awaitHandler(done)
		eventually(t, "the first claim's lease to end", 30*time.Second, func() bool {
			// A plain read sees the committed version, whose lease the completion does not move.
			return r.recordIs("tL", key, "r.locked_until <= now()", false)
		})
		again := &Request{Logical: r.c.NextLogical(), Mode: "lease", Tenant: "tL", Key: key, Amount: 100}
		takeover := r.c.Send(ctx, r.b.target(), again)
		owner := <-done
		if !takeover.Kind.Definitive() {
			r.settle(again, r.b.target())
		}
		other := r.c.Send(ctx, r.b.target(), &Request{Logical: r.c.NextLogical(), Mode: "lease", Tenant: "tL", Key: key, Amount: 250})
		r.w.verify("lease/zombie-completion-in-progress", r.h, time.Since(r.began),
			AuditOptions{Allowed: []Kind{KindOK, KindReplay, KindConflict, KindMismatch}, Settled: true}, ModelOptions{},
			fmt.Sprintf("lease %v, completion statement %v; the owner: %d %s; the same request after the lease: %d %s after %v; another body: %d %s",
				lease, stmt, owner.Status, owner.Kind, takeover.Status, takeover.Kind, (takeover.Return-takeover.Call).Round(time.Millisecond), other.Status, other.Kind))
		if owner.Kind != KindOK {
			t.Errorf("the owner completing when its lease ended: got %d %s (%s), want 201", owner.Status, owner.Kind, owner.Detail)
		}
		if takeover.Kind != KindReplay && takeover.Kind != KindConflict {
			t.Errorf("the same request while the owner completes: got %d %s, want a replay (or 409)", takeover.Status, takeover.Kind)
		}
	})
}
