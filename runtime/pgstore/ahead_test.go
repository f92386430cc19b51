package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/pgstore"
)

// bodyUsage is the tenant counter rows of stored bytes: their summed amount, and the
// transaction ids that last wrote them (xmin), which change with every update.
func (e *env) bodyUsage(t *testing.T) (amount int64, xmins string) {
	t.Helper()
	err := e.pool.QueryRow(context.Background(), `SELECT COALESCE(sum(amount), 0), COALESCE(string_agg(xmin::text, ',' ORDER BY scope_id, slot), '')
		FROM idempotency_scope_usage WHERE kind = 2`).Scan(&amount, &xmins)
	if err != nil {
		t.Fatal(err)
	}
	return amount, xmins
}

// storedBodies is the bytes of the response bodies and headers that the table keeps.
func (e *env) storedBodies(t *testing.T) int64 {
	t.Helper()
	var n int64
	err := e.pool.QueryRow(context.Background(), `SELECT COALESCE(sum(length(response_body) + length(response_headers)), 0)
		FROM idempotency_records WHERE response_status <> 0 AND NOT body_omitted`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Under the default cap (256 MiB a day) a counting commit counts 64 KiB ahead for the tenant's
// next responses on the same Store, so the next commits store their bodies without updating
// the counter row: over many new keys of small responses the row is written once.
func TestBodyBytesCountedAhead(t *testing.T) {
	for _, mode := range []string{"atomic", "lease"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, nil)
			op := payOp()
			h := e.atomicHandler(op)
			if mode == "lease" {
				op = leaseOp()
				h = e.leaseHandler(op, &provider{})
			}
			if w := serve(h, req("t1", "k-ahead-first-00000", body100)); w.Code != 201 {
				t.Fatalf("first key: %d %s", w.Code, w.Body)
			}
			first, xmin := e.bodyUsage(t)
			if first <= 64<<10 {
				t.Fatalf("counted %d bytes after one response, want its own and 64 KiB ahead", first)
			}
			const n = 40
			for i := range n {
				if w := serve(h, req("t1", fmt.Sprintf("k-ahead-%013d", i), body100)); w.Code != 201 {
					t.Fatalf("key %d: %d %s", i, w.Code, w.Body)
				}
			}
			if amount, x := e.bodyUsage(t); amount != first || x != xmin {
				t.Errorf("after %d more responses the counter row is %d bytes (xmin %s), want it untouched: %d (xmin %s)", n, amount, x, first, xmin)
			}
			if kept := e.storedBodies(t); kept > first {
				t.Errorf("the table keeps %d bytes, more than the %d counted", kept, first)
			}
			if r := summarize(t, serve(h, req("t1", "k-ahead-0000000000007", body100))); !r.replayed || len(r.body) == 0 {
				t.Errorf("a response stored from the reservation replays without its body: %+v", r)
			}
		})
	}
}

// A cap below 1 KiB counts no bytes ahead: every commit counts its own, so the cap holds to the
// byte (two responses of 167 bytes (100 of body, 67 of headers) fill 334 exactly; a third does not).
func TestBodyBytesSmallCapToTheByte(t *testing.T) {
	e := newEnv(t, func(s *setup) { s.store.Limits = pgstore.Limits{BodyBytes: 334} })
	h := e.atomicHandler(payOp())
	var sizes []int
	for i := range 3 {
		key := fmt.Sprintf("k-small-cap-%08d", i)
		if w := serve(h, req("t1", key, body100, "X-Big", "100")); w.Code != 201 {
			t.Fatalf("key %d: %d", i, w.Code)
		}
		sizes = append(sizes, len(summarize(t, serve(h, req("t1", key, body100))).body))
	}
	amount, _ := e.bodyUsage(t)
	if kept := e.storedBodies(t); amount != kept || kept > 334 {
		t.Errorf("counted %d bytes, the table keeps %d, cap 334: want them equal and within the cap", amount, kept)
	}
	if sizes[0] != 100 || sizes[1] != 100 || sizes[2] != 0 {
		t.Errorf("replayed body sizes %v (counted %d), want [100 100 0]", sizes, amount)
	}
}

// Concurrent new keys of one tenant on two Stores (two replicas) never store more than the
// cap, counted ahead or not: the count is one row whose cap is checked on its latest version
// under its row lock.
func TestBodyBytesCapUnderConcurrency(t *testing.T) {
	for _, c := range []struct {
		name string
		cap  int64
	}{{"to the byte", 20_000}, {"counted ahead", 200_000}} {
		t.Run(c.name, func(t *testing.T) {
			tweak := func(s *setup) { s.store.Limits, s.maxConns = pgstore.Limits{BodyBytes: c.cap}, 20 }
			e := newEnv(t, tweak)
			other := newEnvAt(t, e.url, tweak)
			hs := []http.Handler{e.atomicHandler(payOp()), other.atomicHandler(payOp())}
			size := int(c.cap / 40) // 80 responses ask for twice the cap
			var wg sync.WaitGroup
			errs := make(chan string, 80)
			for i := range 80 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w := serve(hs[i%2], req("t1", fmt.Sprintf("k-conc-cap-%07d", i), body100, "X-Big", strconv.Itoa(size)))
					if w.Code != 201 || w.Body.Len() != size {
						errs <- fmt.Sprintf("key %d: %d with %d bytes", i, w.Code, w.Body.Len())
					}
				}()
			}
			wg.Wait()
			close(errs)
			for msg := range errs {
				t.Error(msg)
			}
			amount, _ := e.bodyUsage(t)
			kept := e.storedBodies(t)
			if amount > c.cap || kept > amount {
				t.Errorf("counted %d bytes, the table keeps %d; cap %d", amount, kept, c.cap)
			}
			if kept < c.cap/2 {
				t.Errorf("the table keeps %d bytes: the cap of %d refused far too early", kept, c.cap)
			}
		})
	}
}

// A reservation is counted in one window and used only in it: with less than 2 s of the window
// left, none is made, so under a 1 s window every commit counts its own bytes and the counters
// hold exactly what the table keeps.
func TestBodyBytesNotCountedAheadNearWindowEnd(t *testing.T) {
	e := newEnv(t, func(s *setup) { s.store.Limits.BodyWindow = time.Second })
	h := e.atomicHandler(payOp())
	for i := range 5 {
		if w := serve(h, req("t1", fmt.Sprintf("k-window-%011d", i), body100)); w.Code != 201 {
			t.Fatalf("key %d: %d", i, w.Code)
		}
	}
	amount, _ := e.bodyUsage(t)
	if kept := e.storedBodies(t); amount != kept {
		t.Errorf("counted %d bytes, the table keeps %d: want them equal (nothing counted ahead)", amount, kept)
	}
}

// A busy tenant's commits never all find the reservation empty at once: it is refilled, by one
// commit at a time, while it still serves. After the first response counted the first
// reservation (64 KiB under the default cap), 640 concurrent responses of 367 bytes (300 of
// body, 67 of headers: 3.6 reservations' worth) count none of their own bytes; one commit in
// about a hundred and fifty counts the next reservation, and the counter row holds at least
// what the table keeps.
func TestBodyBytesRefilledBeforeItRunsOut(t *testing.T) {
	e := newEnv(t, nil)
	h := e.atomicHandler(payOp())
	if w := serve(h, req("t1", "k-refill-first-00000", body100, "X-Big", "300")); w.Code != 201 {
		t.Fatalf("first key: %d %s", w.Code, w.Body)
	}
	own, refills := e.rtt.ownCharges.Load(), e.rtt.refills.Load()
	if own != 1 || refills != 0 {
		t.Fatalf("the first response: %d counts of its own bytes and %d refills, want 1 and 0", own, refills)
	}
	const workers, each = 16, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if rec := serve(h, req("t1", fmt.Sprintf("k-refill-%02d-%08d", w, i), body100, "X-Big", "300")); rec.Code != 201 {
					t.Errorf("worker %d key %d: %d %s", w, i, rec.Code, rec.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	own, refills = e.rtt.ownCharges.Load()-own, e.rtt.refills.Load()-refills
	if own != 0 {
		t.Errorf("%d of %d responses counted their own bytes: the reservation ran out under them", own, workers*each)
	}
	if refills < 3 || refills > 7 {
		t.Errorf("%d refills for %d responses of 3.6 reservations' worth, want 3 to 7", refills, workers*each)
	}
	amount, _ := e.bodyUsage(t)
	if kept := e.storedBodies(t); kept > amount {
		t.Errorf("the table keeps %d bytes, more than the %d counted", kept, amount)
	}
}
