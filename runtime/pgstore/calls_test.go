package pgstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/store"
)

// The provider call log (migration 0003): what each end of a lease-mode request writes to it,
// what reconciliation reads, and an operator's resolution with its audit trail.

func callClaim(key string, lease time.Duration) store.Claim {
	return store.Claim{
		ID:          store.ID{Scope: "t1", Key: key},
		Operation:   "capture",
		Fingerprint: canonical.Fingerprint{Version: canonical.Version, Sum: sha256.Sum256([]byte(key))},
		Retention:   time.Hour,
		Lease:       lease,
	}
}

func providerKey(key, label string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(key+"/"+label)))
}

// reserveWithCall claims key and records its call labelled charge.
func reserveWithCall(t *testing.T, st *pgstore.Store, key string, lease time.Duration) (store.Claim, int64, string) {
	t.Helper()
	ctx := context.Background()
	c := callClaim(key, lease)
	r, err := st.Reserve(ctx, c)
	if err != nil || !r.Claimed() {
		t.Fatalf("Reserve %s: %+v, %v", key, r, err)
	}
	pk := providerKey(key, "charge")
	if err := st.BeginCall(ctx, c, r.Token, store.Call{Label: "charge", ProviderKey: pk, Amount: 1250, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	return c, r.Token, pk
}

func findCall(t *testing.T, st *pgstore.Store, pk string) store.CallRecord {
	t.Helper()
	got, err := st.FindCalls(context.Background(), []string{pk, "not-a-provider-key", providerKey("nobody", "charge")})
	if err != nil || len(got) != 1 {
		t.Fatalf("FindCalls: %d calls, %v; want 1", len(got), err)
	}
	return got[0]
}

func TestCallLog(t *testing.T) {
	ctx := context.Background()
	st := pgstore.New(newPool(t), pgstore.Options{Partitioned: partitioned()})

	t.Run("completed", func(t *testing.T) {
		c, token, pk := reserveWithCall(t, st, "completed", time.Minute)
		got := findCall(t, st, pk)
		if got.Outcome != store.CallStarted || got.Record.State != store.Running || got.Record.LeaseEnded ||
			got.Record.Uncertain != store.NotUncertain || got.Amount != 1250 || got.Currency != "EUR" ||
			got.Label != "charge" || got.Operation != "capture" || got.Token != token || got.Ref == "" {
			t.Fatalf("started call: %+v", got)
		}
		c.Calls = true
		tx, err := st.BeginCompletion(ctx, c, token)
		if err != nil {
			t.Fatal(err)
		}
		tx.HandlerContext(ctx)
		if err := tx.Commit(ctx, store.Response{Status: 201, Body: []byte(`{"id":1}`)}); err != nil {
			t.Fatal(err)
		}
		got = findCall(t, st, pk)
		if got.Outcome != store.CallCompleted || got.Status != 201 || got.SettledAt.IsZero() || got.Record.State != 0 {
			t.Fatalf("completed call: %+v", got)
		}
	})
	t.Run("released", func(t *testing.T) {
		c, token, pk := reserveWithCall(t, st, "released", time.Minute)
		if err := st.Release(ctx, c.ID, token); err != nil {
			t.Fatal(err)
		}
		if got := findCall(t, st, pk); got.Outcome != store.CallReleased || got.Status != 0 {
			t.Fatalf("released call: %+v", got)
		}
	})
	t.Run("lease-ended-then-taken-over", func(t *testing.T) {
		c, token, pk := reserveWithCall(t, st, "ended", 100*time.Millisecond)
		time.Sleep(200 * time.Millisecond)
		if got := findCall(t, st, pk); !got.Record.LeaseEnded || got.Record.Uncertain != store.UncertainLeaseEnded {
			t.Fatalf("call of an ended lease: %+v", got.Record)
		}
		next, err := st.TakeOver(ctx, c, token)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.BeginCall(ctx, c, next, store.Call{Label: "charge", ProviderKey: pk, Amount: 1250, Currency: "EUR"}); err != nil {
			t.Fatal(err)
		}
		got := findCall(t, st, pk)
		if got.Record.Uncertain != store.UncertainTakenOver || got.Record.LeaseEnded || got.Token != next {
			t.Fatalf("call after the takeover: %+v", got)
		}
		// Completed through the autocommitted Complete: its calls are settled too.
		if err := st.Complete(ctx, withRetention(c, time.Hour), next, store.Response{Status: 200}); err != nil {
			t.Fatal(err)
		}
		if got := findCall(t, st, pk); got.Outcome != store.CallCompleted || got.Status != 200 {
			t.Fatalf("call after Complete: %+v", got)
		}
	})
	t.Run("scan", func(t *testing.T) {
		var n int
		err := st.ScanCalls(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), func(c *store.CallRecord) error {
			n++
			return nil
		})
		if err != nil || n != 3 {
			t.Fatalf("ScanCalls: %d calls, %v; want 3", n, err)
		}
		stop := errors.New("stop")
		if err := st.ScanCalls(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), func(*store.CallRecord) error { return stop }); err != stop {
			t.Errorf("ScanCalls returned %v, want fn's error", err)
		}
		n = 0
		if err := st.ScanCalls(ctx, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour), func(*store.CallRecord) error { n++; return nil }); err != nil || n != 0 {
			t.Errorf("ScanCalls of a later window: %d calls, %v", n, err)
		}
	})
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	st := pgstore.New(pool, pgstore.Options{Partitioned: partitioned()})
	line := []byte(`{"idempotency_key":"k","status":"succeeded","amount":"1250","currency":"EUR"}`)

	t.Run("complete", func(t *testing.T) {
		c, token, pk := reserveWithCall(t, st, "to-complete", 3*time.Second)
		res := store.Resolution{ProviderKey: pk, Token: token, Complete: true, Class: "charged_no_record",
			Operator: "ada", Reason: "report of the day", Report: line,
			Response: store.Response{Status: 201, Header: []byte(`{"Content-Type":["application/json"]}`), Body: []byte(`{"charged":true}`)}}
		if _, err := st.Resolve(ctx, res); !errors.Is(err, store.ErrLost) {
			t.Fatalf("Resolve while the lease runs: %v, want ErrLost", err)
		}
		eventually(t, "the lease to end", func() bool { return findCall(t, st, pk).Record.LeaseEnded })
		if _, err := st.Resolve(ctx, store.Resolution{ProviderKey: pk, Token: token + 1, Complete: true, Response: res.Response}); !errors.Is(err, store.ErrLost) {
			t.Fatalf("Resolve under another token: %v, want ErrLost", err)
		}
		done, err := st.Resolve(ctx, res)
		if err != nil || !done.Record || done.At.IsZero() {
			t.Fatalf("Resolve: %+v, %v", done, err)
		}
		rec, found, err := st.Get(ctx, c.ID)
		if err != nil || !found || rec.State != store.Completed || rec.Response.Status != 201 || string(rec.Response.Body) != `{"charged":true}` {
			t.Fatalf("record after the resolution: %+v, %v, %v", rec, found, err)
		}
		if rec.RetentionLeft <= 50*time.Minute {
			t.Errorf("the resolved record replays for %v, want the operation's retention (1h)", rec.RetentionLeft)
		}
		if got := findCall(t, st, pk); got.Outcome != store.CallResolvedCompleted || got.Status != 201 {
			t.Errorf("call after the resolution: %+v", got)
		}
		var action, operator, reason, class string
		var written bool
		var report map[string]any
		var reportRaw []byte
		err = pool.QueryRow(ctx, `SELECT action, record_written, operator, reason, class, report::text FROM idempotency_resolutions
			WHERE fencing_token = $1`, token).Scan(&action, &written, &operator, &reason, &class, &reportRaw)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(reportRaw, &report); err != nil || report["status"] != "succeeded" {
			t.Errorf("audit report %s: %v", reportRaw, err)
		}
		if action != "completed" || !written || operator != "ada" || reason != "report of the day" || class != "charged_no_record" {
			t.Errorf("audit row: %s %v %s %q %s", action, written, operator, reason, class)
		}
		if _, err := st.Resolve(ctx, res); !errors.Is(err, store.ErrLost) {
			t.Errorf("second Resolve: %v, want ErrLost", err)
		}
	})
	t.Run("release", func(t *testing.T) {
		c, token, pk := reserveWithCall(t, st, "to-release", 50*time.Millisecond)
		time.Sleep(100 * time.Millisecond)
		done, err := st.Resolve(ctx, store.Resolution{ProviderKey: pk, Token: token, Class: "uncertain_not_charged", Operator: "ada"})
		if err != nil || !done.Record {
			t.Fatalf("Resolve: %+v, %v", done, err)
		}
		if _, found, _ := st.Get(ctx, c.ID); found {
			t.Error("the released record is still there")
		}
		if got := findCall(t, st, pk); got.Outcome != store.CallResolvedReleased {
			t.Errorf("call after the resolution: %+v", got)
		}
	})
	t.Run("record-gone", func(t *testing.T) {
		// The handler failed after its call and released the key: only the log is settled.
		c, token, pk := reserveWithCall(t, st, "gone", time.Minute)
		if err := st.Release(ctx, c.ID, token); err != nil {
			t.Fatal(err)
		}
		done, err := st.Resolve(ctx, store.Resolution{ProviderKey: pk, Token: token, Complete: true,
			Response: store.Response{Status: 201}, Class: "charged_no_record", Operator: "ada"})
		if err != nil || done.Record {
			t.Fatalf("Resolve of a released call: %+v, %v; want the log settled, no record", done, err)
		}
		if _, found, _ := st.Get(ctx, c.ID); found {
			t.Error("a record appeared")
		}
		if got := findCall(t, st, pk); got.Outcome != store.CallResolvedCompleted {
			t.Errorf("call: %+v", got)
		}
	})
	t.Run("unknown-call", func(t *testing.T) {
		if _, err := st.Resolve(ctx, store.Resolution{ProviderKey: providerKey("nobody", "charge")}); !errors.Is(err, store.ErrLost) {
			t.Errorf("Resolve of an unknown call: %v, want ErrLost", err)
		}
	})
}

// The sweepers delete calls older than CallRetention, and keep the others.
func TestSweepCalls(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	st := pgstore.New(pool, pgstore.Options{Partitioned: partitioned()})
	_, _, old := reserveWithCall(t, st, "old", time.Minute)
	_, _, recent := reserveWithCall(t, st, "recent", time.Minute)
	if _, err := pool.Exec(ctx, `UPDATE idempotency_provider_calls SET started_at = now() - interval '8 days'
		WHERE provider_key = decode($1, 'hex')`, old); err != nil {
		t.Fatal(err)
	}
	var err error
	if partitioned() {
		_, err = (&pgstore.PartitionSweeper{Pool: pool, CallRetention: 7 * 24 * time.Hour}).SweepOnce(ctx)
	} else {
		_, err = (&pgstore.Sweeper{Pool: pool, CallRetention: 7 * 24 * time.Hour}).SweepOnce(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.FindCalls(ctx, []string{old, recent})
	if err != nil || len(got) != 1 || got[0].ProviderKey != recent {
		t.Fatalf("after the sweep: %+v, %v; want only the recent call", got, err)
	}
}
