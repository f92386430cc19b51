// Package storetest is the shared test suite of idempotency stores: every store, present and
// future, must pass RunStoreTests (the lease-mode protocol of store.Store) and, when it runs
// handlers' writes in its transactions, RunTransactionalTests. The suite uses real time with
// short leases and retentions (tens of milliseconds), so a store's own clock is what it checks.
//
//	func TestStore(t *testing.T) {
//		storetest.RunStoreTests(t, func(t *testing.T) store.Store { return newStoreForTest(t) })
//	}
package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/canonical"
	"github.com/idemgen/idemgen/runtime/store"
)

// Timing of the suite: a lease or retention that must still hold, and one that must have ended.
const (
	short = 150 * time.Millisecond
	long  = time.Minute
)

// claim returns a lease-mode claim of key in scope "t1" for request body.
func claim(key, body string, lease, retention time.Duration) store.Claim {
	return store.Claim{
		ID:          store.ID{Scope: "t1", Key: key},
		Operation:   "createPayment",
		Fingerprint: canonical.Fingerprint{Version: canonical.Version, Sum: sha256.Sum256([]byte(body))},
		Retention:   retention,
		Lease:       lease,
	}
}

// retained is c with retention r.
func retained(c store.Claim, r time.Duration) store.Claim {
	c.Retention = r
	return c
}

// remembered is c with retention r and a tombstone of tomb (docs: store.Claim.Tombstone).
func remembered(c store.Claim, r, tomb time.Duration) store.Claim {
	c.Retention, c.Tombstone = r, tomb
	return c
}

func response(body string) store.Response {
	return store.Response{Status: 201, Header: []byte(`{"Content-Type":["application/json"]}`), Body: []byte(body)}
}

// RunStoreTests runs the lease-mode protocol suite against fresh stores from newStore (one per
// subtest).
func RunStoreTests(t *testing.T, newStore func(t *testing.T) store.Store) {
	ctx := context.Background()
	t.Run("GetAbsent", func(t *testing.T) {
		s := newStore(t)
		if _, found, err := s.Get(ctx, store.ID{Scope: "t1", Key: "absent"}); err != nil || found {
			t.Fatalf("Get of an absent key: found %v, err %v", found, err)
		}
	})
	t.Run("ReserveThenRecord", func(t *testing.T) {
		s := newStore(t)
		c := claim("k1", "a", long, long)
		r, err := s.Reserve(ctx, c)
		if err != nil || !r.Claimed() {
			t.Fatalf("Reserve of a new key: %+v, %v", r, err)
		}
		rec := mustGet(t, s, c.ID)
		if rec.State != store.Running || rec.Operation != c.Operation || rec.Fingerprint != c.Fingerprint || rec.Token != r.Token {
			t.Errorf("record after Reserve: %+v", rec)
		}
		if rec.LeaseLeft <= 0 || rec.LeaseLeft > long {
			t.Errorf("LeaseLeft = %v, want within (0, %v]", rec.LeaseLeft, long)
		}
		again, err := s.Reserve(ctx, claim("k1", "b", long, long))
		if err != nil || again.Claimed() || again.Record.Token != r.Token || again.Record.Fingerprint != c.Fingerprint {
			t.Errorf("second Reserve: %+v, %v; want the first claim's record", again, err)
		}
	})
	t.Run("ScopesAreApart", func(t *testing.T) {
		s := newStore(t)
		a := claim("k1", "a", long, long)
		b := a
		b.ID.Scope = "t2"
		for _, c := range []store.Claim{a, b} {
			if r, err := s.Reserve(ctx, c); err != nil || !r.Claimed() {
				t.Fatalf("Reserve in scope %s: %+v, %v", c.ID.Scope, r, err)
			}
		}
	})
	t.Run("CompleteThenReplay", func(t *testing.T) {
		s := newStore(t)
		c := claim("k1", "a", long, long)
		r := mustReserve(t, s, c)
		if err := s.Complete(ctx, retained(c, long), r.Token+1, response("x")); !errors.Is(err, store.ErrLost) {
			t.Errorf("Complete under another token: %v, want ErrLost", err)
		}
		want := response(`{"id":1}`)
		if err := s.Complete(ctx, retained(c, long), r.Token, want); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		rec := mustGet(t, s, c.ID)
		if rec.State != store.Completed || rec.Response.Status != want.Status ||
			string(rec.Response.Header) == "" || string(rec.Response.Body) != string(want.Body) || rec.Response.BodyOmitted {
			t.Errorf("completed record: %+v", rec)
		}
		checkRetentionLeft(t, rec, long)
		if err := s.Complete(ctx, retained(c, long), r.Token, want); !errors.Is(err, store.ErrLost) {
			t.Errorf("second Complete: %v, want ErrLost", err)
		}
		omitted := claim("k2", "a", long, long)
		r = mustReserve(t, s, omitted)
		if err := s.Complete(ctx, retained(omitted, long), r.Token, store.Response{Status: 200, BodyOmitted: true}); err != nil {
			t.Fatal(err)
		}
		if rec := mustGet(t, s, omitted.ID); !rec.Response.BodyOmitted || len(rec.Response.Body) != 0 {
			t.Errorf("omitted body: %+v", rec.Response)
		}
	})
	t.Run("Release", func(t *testing.T) {
		s := newStore(t)
		c := claim("k1", "a", long, long)
		r := mustReserve(t, s, c)
		if err := s.Release(ctx, c.ID, r.Token+1); err != nil {
			t.Fatal(err)
		}
		mustGet(t, s, c.ID) // another token releases nothing
		if err := s.Release(ctx, c.ID, r.Token); err != nil {
			t.Fatal(err)
		}
		if _, found, _ := s.Get(ctx, c.ID); found {
			t.Fatal("record still there after Release")
		}
		mustReserve(t, s, c)
	})
	t.Run("ExtendMovesTheLease", func(t *testing.T) {
		s := newStore(t)
		c := claim("k1", "a", short, long)
		r := mustReserve(t, s, c)
		if err := s.Extend(ctx, c.ID, r.Token+1, long); !errors.Is(err, store.ErrLost) {
			t.Errorf("Extend under another token: %v, want ErrLost", err)
		}
		if err := s.Extend(ctx, c.ID, r.Token, long); err != nil {
			t.Fatal(err)
		}
		if rec := mustGet(t, s, c.ID); rec.LeaseLeft <= short {
			t.Errorf("LeaseLeft after Extend = %v, want above %v", rec.LeaseLeft, short)
		}
	})
	t.Run("ExtendToZeroHandsOver", func(t *testing.T) {
		// Runtime.Shutdown ends the lease of a call phase it cannot finish: the same request's
		// retry takes it over at once; another request still meets the running record.
		s := newStore(t)
		c := claim("k1", "a", long, long)
		r := mustReserve(t, s, c)
		if err := s.Extend(ctx, c.ID, r.Token, 0); err != nil {
			t.Fatal(err)
		}
		rec := mustGet(t, s, c.ID)
		if rec.State != store.Running || rec.LeaseLeft > 0 {
			t.Fatalf("after Extend to 0: %v with %v of lease left, want running with none", rec.State, rec.LeaseLeft)
		}
		next, err := s.TakeOver(ctx, c, r.Token)
		if err != nil || next <= r.Token {
			t.Fatalf("TakeOver after Extend to 0: %d, %v; want a token above %d", next, err, r.Token)
		}
		if err := s.Complete(ctx, retained(c, long), r.Token, response("handed over")); !errors.Is(err, store.ErrLost) {
			t.Errorf("the old owner's Complete: %v, want ErrLost", err)
		}
	})
	t.Run("TakeOverAfterTheLease", func(t *testing.T) {
		s := newStore(t)
		c := claim("k1", "a", short, long)
		r := mustReserve(t, s, c)
		if _, err := s.TakeOver(ctx, c, r.Token); !errors.Is(err, store.ErrLost) {
			t.Errorf("TakeOver while the lease runs: %v, want ErrLost", err)
		}
		time.Sleep(short + 50*time.Millisecond)
		if rec := mustGet(t, s, c.ID); rec.LeaseLeft > 0 {
			t.Errorf("LeaseLeft after the lease = %v", rec.LeaseLeft)
		}
		next, err := s.TakeOver(ctx, c, r.Token)
		if err != nil || next <= r.Token {
			t.Fatalf("TakeOver: %d, %v; want a token above %d", next, err, r.Token)
		}
		if _, err := s.TakeOver(ctx, c, r.Token); !errors.Is(err, store.ErrLost) {
			t.Errorf("second TakeOver from the old token: %v, want ErrLost", err)
		}
		if err := s.Complete(ctx, retained(c, long), r.Token, response("zombie")); !errors.Is(err, store.ErrLost) {
			t.Errorf("the old owner's Complete: %v, want ErrLost", err)
		}
		if err := s.Complete(ctx, retained(c, long), next, response("new")); err != nil {
			t.Errorf("the new owner's Complete: %v", err)
		}
	})
	t.Run("RunningRecordOutlivesRetention", func(t *testing.T) {
		// A running record must stay visible while its lease can still complete, whatever the
		// retention: otherwise a request with another body would claim the key meanwhile.
		s := newStore(t)
		c := claim("k1", "a", 3*short, short/3)
		r := mustReserve(t, s, c)
		time.Sleep(short)
		if rec := mustGet(t, s, c.ID); rec.State != store.Running || rec.Token != r.Token {
			t.Fatalf("running record after its retention: %+v", rec)
		}
		if got, err := s.Reserve(ctx, claim("k1", "b", long, long)); err != nil || got.Claimed() {
			t.Fatalf("another request claimed a key whose lease still runs: %+v, %v", got, err)
		}
	})
	t.Run("RunningRecordNeverExpires", func(t *testing.T) {
		// Retention and lease far shorter than the call: the running record must stay the
		// key's record, so another body never runs under it (422), while the owner can still
		// complete it and the same request can take it over.
		s := newStore(t)
		c := claim("k1", "a", 50*time.Millisecond, 50*time.Millisecond)
		r := mustReserve(t, s, c)
		time.Sleep(3 * short)
		rec, found, err := s.Get(ctx, c.ID)
		if err != nil || !found || rec.Token != r.Token || rec.State != store.Running || rec.LeaseLeft > 0 {
			t.Fatalf("running record long after lease + retention: %+v, found %v, %v", rec, found, err)
		}
		if got, err := s.Reserve(ctx, claim("k1", "b", long, long)); err != nil || got.Claimed() {
			t.Fatalf("another request claimed a running key: %+v, %v", got, err)
		}
		if err := s.Complete(ctx, retained(c, long), r.Token, response("late")); err != nil {
			t.Fatalf("the owner could not complete its running record: %v", err)
		}
	})
	t.Run("ExpiredIsAbsent", func(t *testing.T) {
		s := newStore(t)
		c := claim("k1", "a", short/3, short/3)
		r := mustReserve(t, s, c)
		if err := s.Complete(ctx, retained(c, short/3), r.Token, response("x")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(short)
		if _, found, err := s.Get(ctx, c.ID); err != nil || found {
			t.Fatalf("Get after retention: found %v, err %v", found, err)
		}
		again, err := s.Reserve(ctx, claim("k1", "b", long, long))
		if err != nil || !again.Claimed() || again.Token <= r.Token {
			t.Fatalf("Reserve of an expired key: %+v, %v; want a claim with a token above %d", again, err, r.Token)
		}
	})
	t.Run("TombstoneAfterRetention", func(t *testing.T) {
		// After the retention the response is gone, but the key is remembered: the same
		// request and another one both meet the tombstone (the runtime answers 410 and 422),
		// and neither claims the key.
		s := newStore(t)
		c := remembered(claim("k1", "a", long, short/3), short/3, long)
		r := mustReserve(t, s, c)
		started := time.Now()
		if err := s.Complete(ctx, c, r.Token, response(`{"id":1}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(short)
		checkTombstone(t, mustGet(t, s, c.ID), c, started)
		for _, body := range []string{"a", "b"} {
			again, err := s.Reserve(ctx, claim("k1", body, long, long))
			if err != nil || again.Claimed() {
				t.Fatalf("Reserve of a remembered key (body %s): %+v, %v; want its tombstone", body, again, err)
			}
			checkTombstone(t, again.Record, c, started)
		}
	})
	t.Run("TombstoneForgotten", func(t *testing.T) {
		// Once the tombstone's horizon has passed too, the key is new again.
		s := newStore(t)
		c := remembered(claim("k1", "a", long, short/3), short/3, short/2)
		r := mustReserve(t, s, c)
		if err := s.Complete(ctx, c, r.Token, response("x")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(short)
		if rec, found, err := s.Get(ctx, c.ID); err != nil || found {
			t.Fatalf("Get after the tombstone's horizon: %+v, found %v, err %v", rec, found, err)
		}
		again, err := s.Reserve(ctx, claim("k1", "b", long, long))
		if err != nil || !again.Claimed() || again.Token <= r.Token {
			t.Fatalf("Reserve of a forgotten key: %+v, %v; want a claim with a token above %d", again, err, r.Token)
		}
	})
	t.Run("TombstoneInspected", func(t *testing.T) {
		s := newStore(t)
		in, ok := s.(store.Inspector)
		if !ok {
			t.Skip("the store does not implement store.Inspector")
		}
		c := remembered(claim("k1", "a", long, short/3), short/3, long)
		r := mustReserve(t, s, c)
		if err := s.Complete(ctx, c, r.Token, store.Response{Status: 422, Body: []byte("no")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(short)
		snaps, err := in.Inspect(ctx, c.ID.Scope, []string{c.ID.Key}, true)
		if err != nil || len(snaps) != 1 {
			t.Fatalf("Inspect of a remembered key: %d snapshots, %v", len(snaps), err)
		}
		sn := snaps[0]
		if sn.State != store.Expired || !sn.Live || sn.StatusClass != 4 || sn.CompletedAt.IsZero() ||
			!sn.ForgetAt.After(sn.ReadAt) || sn.Fingerprint.Version != c.Fingerprint.Version || sn.Ref == "" || len(sn.Response.Body) != 0 {
			t.Errorf("tombstone snapshot: %+v", sn)
		}
		st, err := in.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Tombstones < 1 {
			t.Errorf("Stats.Tombstones = %d, want at least 1", st.Tombstones)
		}
	})
	t.Run("BeginCallNeedsTheToken", func(t *testing.T) {
		s := newStore(t)
		c := claim("k1", "a", long, long)
		r := mustReserve(t, s, c)
		if err := s.BeginCall(ctx, c, r.Token+1, call(c, "charge")); !errors.Is(err, store.ErrLost) {
			t.Errorf("BeginCall under another token: %v, want ErrLost", err)
		}
		for range 2 {
			if err := s.BeginCall(ctx, c, r.Token, call(c, "charge")); err != nil {
				t.Fatalf("BeginCall: %v", err)
			}
		}
		if err := s.Complete(ctx, retained(c, long), r.Token, response("x")); err != nil {
			t.Fatal(err)
		}
		if err := s.BeginCall(ctx, c, r.Token, call(c, "refund")); !errors.Is(err, store.ErrLost) {
			t.Errorf("BeginCall on a completed record: %v, want ErrLost", err)
		}
		if err := s.MarkUncertain(ctx, c.ID, r.Token, store.UncertainCompletionFailed); err != nil {
			t.Errorf("MarkUncertain of a completed record: %v, want nil (left alone)", err)
		}
	})
	t.Run("UncertainOutcomes", func(t *testing.T) {
		s := newStore(t)
		in, ok := s.(store.Inspector)
		if !ok {
			t.Skip("the store does not implement store.Inspector")
		}
		// ended: a call started, then the lease ended with nobody completing (a killed process).
		ended := claim("ended", "a", short, long)
		re := mustReserve(t, s, ended)
		charge := call(ended, "charge")
		charge.Amount, charge.Currency = 1999, "EUR"
		mustBeginCall(t, s, ended, re.Token, charge)
		mustBeginCall(t, s, ended, re.Token, call(ended, "customer"))
		// failed: a call started, then the completion failed while the lease still runs.
		failed := claim("failed", "a", long, long)
		rf := mustReserve(t, s, failed)
		mustBeginCall(t, s, failed, rf.Token, call(failed, "charge"))
		if err := s.MarkUncertain(ctx, failed.ID, rf.Token+1, store.UncertainCompletionFailed); err != nil {
			t.Fatal(err)
		}
		checkUncertain(t, in, failed.ID, store.NotUncertain, 1) // another token marks nothing
		if err := s.MarkUncertain(ctx, failed.ID, rf.Token, store.UncertainCompletionFailed); err != nil {
			t.Fatal(err)
		}
		// quiet: no call started: neither a mark nor an ended lease makes it uncertain.
		quiet := claim("quiet", "a", short, long)
		rq := mustReserve(t, s, quiet)
		if err := s.MarkUncertain(ctx, quiet.ID, rq.Token, store.UncertainOutcomeUnknown); err != nil {
			t.Fatal(err)
		}
		// taken: a call started, the lease ended, a retry took it over, then completed.
		taken := claim("taken", "a", short, long)
		rt := mustReserve(t, s, taken)
		mustBeginCall(t, s, taken, rt.Token, call(taken, "charge"))
		// released: a call started, then the handler failed.
		released := claim("released", "a", long, long)
		rr := mustReserve(t, s, released)
		mustBeginCall(t, s, released, rr.Token, call(released, "charge"))
		if err := s.Release(ctx, released.ID, rr.Token); err != nil {
			t.Fatal(err)
		}
		// running: a call started, its lease runs: in progress, not uncertain.
		running := claim("running", "a", long, long)
		rn := mustReserve(t, s, running)
		mustBeginCall(t, s, running, rn.Token, call(running, "charge"))
		checkUncertain(t, in, running.ID, store.NotUncertain, 1)
		time.Sleep(short + 50*time.Millisecond)

		snap := checkUncertain(t, in, ended.ID, store.UncertainLeaseEnded, 2)
		if len(snap.Calls) == 2 && snap.Calls[0] != charge {
			t.Errorf("first call = %+v, want %+v (in the order they started)", snap.Calls[0], charge)
		}
		if !snap.UncertainSince.IsZero() {
			t.Errorf("UncertainSince of a derived uncertainty = %v, want zero", snap.UncertainSince)
		}
		if f := checkUncertain(t, in, failed.ID, store.UncertainCompletionFailed, 1); f.UncertainSince.IsZero() || f.LeaseLeft <= 0 {
			t.Errorf("marked record: UncertainSince %v, LeaseLeft %v; want a time and a running lease", f.UncertainSince, f.LeaseLeft)
		}
		checkUncertain(t, in, quiet.ID, store.NotUncertain, 0)
		list, err := in.Uncertain(ctx, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		refs := map[string]bool{}
		for _, sn := range list {
			refs[sn.Ref] = true
			if sn.Ref == "" || sn.State != store.Running || sn.Uncertain == store.NotUncertain || len(sn.Calls) == 0 || sn.Operation != ended.Operation {
				t.Errorf("listed: %+v", sn)
			}
		}
		if len(list) != 3 || !refs[snap.Ref] {
			t.Fatalf("Uncertain listed %d records (%v), want ended, failed and taken", len(list), refs)
		}
		if len(list) == 3 && (!list[0].CreatedAt.Before(list[1].CreatedAt) && !list[0].CreatedAt.Equal(list[1].CreatedAt)) {
			t.Errorf("not oldest first: %v then %v", list[0].CreatedAt, list[1].CreatedAt)
		}
		if one, err := in.Uncertain(ctx, time.Time{}, 1); err != nil || len(one) != 1 || one[0].Ref != list[0].Ref {
			t.Errorf("Uncertain with limit 1: %d records, %v; want the oldest", len(one), err)
		}
		if none, err := in.Uncertain(ctx, time.Now().Add(time.Hour), 0); err != nil || len(none) != 0 {
			t.Errorf("Uncertain since an hour from now: %d records, %v; want none", len(none), err)
		}

		next, err := s.TakeOver(ctx, taken, rt.Token)
		if err != nil {
			t.Fatal(err)
		}
		checkUncertain(t, in, taken.ID, store.UncertainTakenOver, 1)
		if err := s.BeginCall(ctx, taken, next, call(taken, "charge")); err != nil {
			t.Fatalf("the new owner's BeginCall: %v", err)
		}
		if err := s.Complete(ctx, retained(taken, long), next, response("done")); err != nil {
			t.Fatal(err)
		}
		checkUncertain(t, in, taken.ID, store.NotUncertain, 1)
		if list, err := in.Uncertain(ctx, time.Time{}, 0); err != nil || len(list) != 2 {
			t.Errorf("after the takeover's completion Uncertain listed %d records, %v; want 2", len(list), err)
		}
	})
	t.Run("ConcurrentReservesOneWins", func(t *testing.T) {
		s := newStore(t)
		const n = 20
		var wg sync.WaitGroup
		var mu sync.Mutex
		claimed := 0
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := s.Reserve(ctx, claim("k1", fmt.Sprint(i%2), long, long))
				if err != nil && !errors.Is(err, store.ErrBusy) {
					t.Errorf("Reserve: %v", err)
				}
				if r.Claimed() {
					mu.Lock()
					claimed++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if claimed != 1 {
			t.Fatalf("%d of %d concurrent Reserves claimed the key, want 1", claimed, n)
		}
	})
}

// RunTransactionalTests runs the suite of store.Transactional against fresh stores from
// newStore (one per subtest). The handler's writes are not looked at (DB is the store's own);
// the tests check the records.
func RunTransactionalTests[DB any](t *testing.T, newStore func(t *testing.T) store.Transactional[DB]) {
	ctx := context.Background()
	atomicClaim := func(key, body string, retention time.Duration) store.Claim {
		c := claim(key, body, 0, retention)
		return c
	}
	t.Run("AtomicCommitThenReplay", func(t *testing.T) {
		s := newStore(t)
		c := atomicClaim("k1", "a", long)
		tx := mustBegin(t, s, c)
		tx.HandlerContext(ctx)
		_ = tx.DB()
		if err := tx.Commit(ctx, response(`{"id":1}`)); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		rec := mustGet(t, s, c.ID)
		if rec.State != store.Completed || string(rec.Response.Body) != `{"id":1}` || rec.Fingerprint != c.Fingerprint {
			t.Errorf("record after Commit: %+v", rec)
		}
		checkRetentionLeft(t, rec, long)
		tx2, got, err := s.BeginAtomic(ctx, atomicClaim("k1", "a", long))
		if err != nil || tx2 != nil || got == nil || got.State != store.Completed {
			t.Fatalf("BeginAtomic of a completed key: tx %v, record %+v, %v", tx2, got, err)
		}
	})
	t.Run("AtomicAbortFreesTheKey", func(t *testing.T) {
		s := newStore(t)
		c := atomicClaim("k1", "a", long)
		tx := mustBegin(t, s, c)
		tx.HandlerContext(ctx)
		if err := tx.Abort(ctx); err != nil {
			t.Fatalf("Abort: %v", err)
		}
		if _, found, _ := s.Get(ctx, c.ID); found {
			t.Fatal("a record after Abort")
		}
		tx = mustBegin(t, s, c)
		if err := tx.Commit(ctx, response("x")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("AtomicConcurrentClaimsOneCommits", func(t *testing.T) {
		// The first claim is announced once its handler has run for a while (a store may send
		// it lazily); a second claim meanwhile must not commit.
		s := newStore(t)
		c := atomicClaim("k1", "a", long)
		tx1 := mustBegin(t, s, c)
		tx1.HandlerContext(ctx)
		time.Sleep(100 * time.Millisecond)
		tx2, rec, err := s.BeginAtomic(ctx, c)
		switch {
		case errors.Is(err, store.ErrBusy):
		case err != nil:
			t.Fatalf("second BeginAtomic: %v", err)
		case rec != nil:
			t.Fatalf("second BeginAtomic saw a record before the first committed: %+v", rec)
		default:
			tx2.HandlerContext(ctx)
			if err := tx2.Commit(ctx, response("second")); !errors.Is(err, store.ErrBusy) {
				t.Fatalf("second claim's Commit: %v, want ErrBusy", err)
			}
		}
		if err := tx1.Commit(ctx, response("first")); err != nil {
			t.Fatalf("first claim's Commit: %v", err)
		}
		if rec := mustGet(t, s, c.ID); string(rec.Response.Body) != "first" {
			t.Errorf("stored %q, want the first claim's response", rec.Response.Body)
		}
	})
	t.Run("AtomicWaitReplaysOrGivesUp", func(t *testing.T) {
		// concurrency.wait: a claim that may wait gets the first claim's record when it commits
		// in time, and ErrBusy when its wait runs out first.
		s := newStore(t)
		c := atomicClaim("k1", "a", long)
		tx1 := mustBegin(t, s, c)
		tx1.HandlerContext(ctx)
		if err := tx1.Confirm(ctx); err != nil {
			t.Fatal(err)
		}
		short := c
		short.Wait = 50 * time.Millisecond
		if _, rec, err := s.BeginAtomic(ctx, short); !errors.Is(err, store.ErrBusy) {
			t.Fatalf("a 50ms wait on a held key: record %+v, %v; want ErrBusy", rec, err)
		}
		waiting := c
		waiting.Wait = 5 * time.Second
		type begun struct {
			tx  store.Tx[DB]
			rec *store.Record
			err error
		}
		done := make(chan begun, 1)
		go func() {
			tx, rec, err := s.BeginAtomic(ctx, waiting)
			done <- begun{tx, rec, err}
		}()
		time.Sleep(100 * time.Millisecond) // the waiter is at the store (only an absence can be checked)
		if err := tx1.Commit(ctx, response("first")); err != nil {
			t.Fatal(err)
		}
		select {
		case b := <-done:
			if b.err != nil || b.tx != nil || b.rec == nil || string(b.rec.Response.Body) != "first" {
				t.Fatalf("the waiting claim: tx %v, record %+v, %v; want the first claim's record", b.tx, b.rec, b.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting claim never returned")
		}
	})
	t.Run("AtomicReclaimsAnExpiredKey", func(t *testing.T) {
		s := newStore(t)
		c := atomicClaim("k1", "a", short/3)
		tx := mustBegin(t, s, c)
		if err := tx.Commit(ctx, response("old")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(short)
		tx = mustBegin(t, s, atomicClaim("k1", "b", long))
		if err := tx.Commit(ctx, response("new")); err != nil {
			t.Fatalf("Commit over an expired record: %v", err)
		}
		if rec := mustGet(t, s, c.ID); string(rec.Response.Body) != "new" {
			t.Errorf("stored %q, want new", rec.Response.Body)
		}
	})
	t.Run("AtomicTombstone", func(t *testing.T) {
		// An atomic-mode record is remembered after its retention too: a late retry gets the
		// tombstone from BeginAtomic and holds no claim.
		s := newStore(t)
		c := remembered(atomicClaim("k1", "a", short/3), short/3, long)
		started := time.Now()
		tx := mustBegin(t, s, c)
		tx.HandlerContext(ctx)
		if err := tx.Commit(ctx, response("old")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(short)
		for _, body := range []string{"a", "b"} {
			tx2, rec, err := s.BeginAtomic(ctx, atomicClaim("k1", body, long))
			if err != nil || tx2 != nil || rec == nil {
				if tx2 != nil {
					_ = tx2.Abort(ctx)
				}
				t.Fatalf("BeginAtomic of a remembered key (body %s): tx %v, record %+v, %v; want its tombstone", body, tx2, rec, err)
			}
			checkTombstone(t, *rec, c, started)
		}
	})
	t.Run("LeaseCompletionTombstone", func(t *testing.T) {
		s := newStore(t)
		c := remembered(claim("k1", "a", long, short/3), short/3, long)
		started := time.Now()
		r := mustReserve(t, s, c)
		tx, err := s.BeginCompletion(ctx, c, r.Token)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx, response("done")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(short)
		checkTombstone(t, mustGet(t, s, c.ID), c, started)
	})
	t.Run("LeaseCompletion", func(t *testing.T) {
		s := newStore(t)
		c := claim("k1", "a", long, long)
		r := mustReserve(t, s, c)
		if _, err := s.BeginCompletion(ctx, c, r.Token+1); !errors.Is(err, store.ErrLost) {
			t.Errorf("BeginCompletion under another token: %v, want ErrLost", err)
		}
		tx, err := s.BeginCompletion(ctx, c, r.Token)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx, response("done")); err != nil {
			t.Fatal(err)
		}
		if rec := mustGet(t, s, c.ID); rec.State != store.Completed || string(rec.Response.Body) != "done" {
			t.Errorf("record after completion: %+v", rec)
		}
	})
	t.Run("LeaseCompletionAbortReleases", func(t *testing.T) {
		s := newStore(t)
		c := claim("k1", "a", long, long)
		r := mustReserve(t, s, c)
		tx, err := s.BeginCompletion(ctx, c, r.Token)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		if _, found, _ := s.Get(ctx, c.ID); found {
			t.Fatal("record still there after the completion was aborted")
		}
	})
	t.Run("Plain", func(t *testing.T) {
		s := newStore(t)
		tx, err := s.BeginPlain(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx.HandlerContext(ctx)
		if err := tx.Commit(ctx, store.Response{}); err != nil {
			t.Fatalf("Commit of a plain transaction: %v", err)
		}
	})
}

// checkRetentionLeft checks what a store says of a completed record's remaining retention:
// nothing (zero), or a positive duration no longer than the retention it was completed with.
func checkRetentionLeft(t *testing.T, rec store.Record, retention time.Duration) {
	t.Helper()
	if rec.RetentionLeft < 0 || rec.RetentionLeft > retention {
		t.Errorf("RetentionLeft = %v, want 0 (unknown) or within (0, %v]", rec.RetentionLeft, retention)
	}
}

// checkTombstone checks rec, the record of c's key after its retention, against c: a tombstone
// with the fingerprint's version and first bytes, the 2xx class of the suite's response, a
// completion after started (the store's clock may differ from this machine's by a minute), no
// response, and a horizon left within c.Tombstone.
func checkTombstone(t *testing.T, rec store.Record, c store.Claim, started time.Time) {
	t.Helper()
	var prefix [32]byte
	copy(prefix[:store.TombstoneSumBytes], c.Fingerprint.Sum[:])
	if rec.State != store.Expired || rec.Fingerprint.Version != c.Fingerprint.Version || rec.Fingerprint.Sum != prefix ||
		!store.SameTombstoneSum(rec.Fingerprint.Sum, c.Fingerprint.Sum) || rec.StatusClass != 2 {
		t.Errorf("tombstone: state %d, fingerprint %v, class %d; want Expired, %v (first %d bytes), 2", rec.State, rec.Fingerprint, rec.StatusClass, c.Fingerprint, store.TombstoneSumBytes)
	}
	if rec.CompletedAt.Before(started.Add(-time.Minute)) || rec.CompletedAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("tombstone CompletedAt %v, want about %v", rec.CompletedAt, started)
	}
	if rec.ForgetLeft <= 0 || rec.ForgetLeft > c.Tombstone {
		t.Errorf("tombstone ForgetLeft %v, want within (0, %v]", rec.ForgetLeft, c.Tombstone)
	}
	if rec.Response.Status != 0 || len(rec.Response.Body) != 0 || rec.RetentionLeft != 0 || rec.Operation != "" {
		t.Errorf("tombstone keeps more than it should: %+v", rec)
	}
}

// call is the call labelled label of c's request, with a provider key unique to both.
func call(c store.Claim, label string) store.Call {
	sum := sha256.Sum256([]byte(c.ID.Scope + "\x00" + c.ID.Key + "\x00" + label))
	return store.Call{Label: label, ProviderKey: fmt.Sprintf("%x", sum)}
}

func mustBeginCall(t *testing.T, s store.Store, c store.Claim, token int64, cl store.Call) {
	t.Helper()
	if err := s.BeginCall(context.Background(), c, token, cl); err != nil {
		t.Fatalf("BeginCall %s %s: %v", c.ID.Key, cl.Label, err)
	}
}

// checkUncertain inspects the record of id and checks its uncertainty and its number of calls.
func checkUncertain(t *testing.T, in store.Inspector, id store.ID, want store.Uncertainty, calls int) store.Snapshot {
	t.Helper()
	snaps, err := in.Inspect(context.Background(), id.Scope, []string{id.Key}, false)
	if err != nil || len(snaps) != 1 {
		t.Fatalf("Inspect %s: %d snapshots, %v", id.Key, len(snaps), err)
	}
	sn := snaps[0]
	if sn.Uncertain != want || len(sn.Calls) != calls || sn.Ref == "" {
		t.Errorf("%s: Uncertain %q with %d calls (ref %q), want %q with %d", id.Key, sn.Uncertain, len(sn.Calls), sn.Ref, want, calls)
	}
	return sn
}

func mustReserve(t *testing.T, s store.Store, c store.Claim) store.Reservation {
	t.Helper()
	r, err := s.Reserve(context.Background(), c)
	if err != nil || !r.Claimed() {
		t.Fatalf("Reserve %s: %+v, %v", c.ID.Key, r, err)
	}
	return r
}

func mustGet(t *testing.T, s store.Store, id store.ID) store.Record {
	t.Helper()
	rec, found, err := s.Get(context.Background(), id)
	if err != nil || !found {
		t.Fatalf("Get %s: found %v, err %v", id.Key, found, err)
	}
	return rec
}

func mustBegin[DB any](t *testing.T, s store.Transactional[DB], c store.Claim) store.Tx[DB] {
	t.Helper()
	tx, rec, err := s.BeginAtomic(context.Background(), c)
	if err != nil || tx == nil {
		t.Fatalf("BeginAtomic %s: record %+v, %v", c.ID.Key, rec, err)
	}
	return tx
}
