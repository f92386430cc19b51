package pgstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// The adversary's small pool: a pool of 4 (pgxpool's default on 2 cores), a slow handler that
// does not watch its context (it works before its first statement, as a handler that calls out
// first does), and 20 duplicates of one key at once. Before, the duplicates that read the key
// as new took the handler slots and held them for the handler's time (ClaimWithStatement runs
// a duplicate's code up to its first statement), the rest waited for a slot until their store
// timeout: up to 14 of 20 answered 503 store-unavailable by a store that was there. Now a
// duplicate holds a connection for one read at most: on the same Store it is answered from the
// Store's own claims in progress, without a round trip; on another, its lost claim gives the
// connection and slot back at once, while its handler still runs.

// slowHandler serves op: it waits for the gate, ignoring its context, then writes its payment.
func (e *env) slowHandler(op *runtime.Operation, g *gate) http.Handler {
	return e.handlerWith(op, func(ctx context.Context, db pgstore.DBTX, r *payReq) (runtime.Response, error) {
		g.enter()
		<-g.release
		if _, err := db.Exec(ctx, insertPay, r.Tenant, r.Amount); err != nil {
			return runtime.Response{}, err
		}
		return runtime.Response{Status: http.StatusCreated, Body: []byte(`{"ok":true}`)}, nil
	})
}

// answers serves n copies of r's request on handlers (round robin) at once and sends their
// recorders to the returned channel as they are answered.
func answersOf(hs []http.Handler, n int, r func() *http.Request) <-chan *httptest.ResponseRecorder {
	out := make(chan *httptest.ResponseRecorder, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out <- serve(hs[i%len(hs)], r())
		}()
	}
	go func() { wg.Wait(); close(out) }()
	return out
}

func TestDuplicatesOnASmallPool(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			e := newEnv(t, func(c *setup) { c.maxConns = 4; c.store.Claim = s.strategy })
			g := e.gate("slow")
			h := e.slowHandler(payOp(), g)
			all := answersOf([]http.Handler{h}, 20, func() *http.Request { return req("acme", key1, body100) })
			// Every duplicate is answered while the request that got the key still runs.
			for range 19 {
				select {
				case w := <-all:
					if w.Code != http.StatusConflict {
						t.Errorf("a duplicate got %d %s, want 409", w.Code, w.Body)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("a duplicate was not answered while the first request ran")
				}
			}
			g.wait(t)
			if n := e.pool.Stat().AcquiredConns(); n != 1 {
				t.Errorf("%d connections acquired with the duplicates answered, want the first request's 1", n)
			}
			g.open()
			if w := <-all; w.Code != http.StatusCreated {
				t.Errorf("the first request got %d %s", w.Code, w.Body)
			}
			if n := e.payments("acme"); n != 1 {
				t.Errorf("%d payments, want 1", n)
			}
		})
	}
}

// Duplicates on two replicas (two Stores of 4 connections each on one database), sent at once:
// on each replica, the duplicates that read the key before any claim went out take a handler
// slot and run the slow handler's code; all claims but one are lost within ClaimWithStatement's
// delay, which gives their connections and slots back while their handlers are still parked.
// Whichever replica wins, one connection stays acquired: the winner's.
func TestDuplicatesOnTwoReplicasSmallPools(t *testing.T) {
	a := newEnv(t, func(c *setup) { c.maxConns = 4 })
	b := newEnvAt(t, a.url, func(c *setup) { c.maxConns = 4 })
	ga, gb := a.gate("slow"), b.gate("slow")
	ha, hb := a.slowHandler(payOp(), ga), b.slowHandler(payOp(), gb)
	all := answersOf([]http.Handler{ha, hb}, 20, func() *http.Request { return req("acme", key1, body100) })
	eventually(t, "a handler to start", func() bool {
		select {
		case <-ga.entered:
			return true
		case <-gb.entered:
			return true
		default:
			return false
		}
	})
	eventually(t, "every lost claim to give its connection back", func() bool {
		return a.pool.Stat().AcquiredConns()+b.pool.Stat().AcquiredConns() == 1 && a.advisoryLockHeld()
	})
	ga.open()
	gb.open()
	count := map[int]int{}
	replayed := 0
	for w := range all {
		count[w.Code]++
		if w.Header().Get(runtime.HeaderReplayed) == "true" {
			replayed++
		}
	}
	if count[http.StatusCreated]-replayed != 1 || count[http.StatusCreated]+count[http.StatusConflict] != 20 {
		t.Errorf("answers %v (%d replayed), want one execution and 409s or replays", count, replayed)
	}
	if n := a.payments("acme"); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}
}
